"""``ltr-bench perf losses``: forward + backward of every loss vs textbook references.

``ltr-bench perf losses [--device cpu|cuda|auto] [--lengths 100,1000,3375] [--batch 16]
[--repeats N] [--only-at L=loss,loss ...] [--out reports/perf/losses.md]`` times forward +
backward of every registered loss at its default hyperparameters on ``B`` full lists of
length ``L`` (scores ~ N(0, 1), labels uniform on 0..4, float32 by default) next to the
textbook references of :mod:`bench.perf.reference`, measured in the same run.
``--only-at 3375=pirank_ndcg`` restricts one length to a subset of the losses (the dense
references of the other losses take minutes there).

Measurement protocol (also written into the table's header):

* time: one untimed warm-up call, then ``--repeats`` timed calls (``perf_counter``,
  CUDA synchronised); the table shows the minimum, the least-disturbed call (timeit's
  convention: on a shared machine other processes only ever add time). A call slower
  than 5 s is timed once.
* peak memory: :class:`bench.perf.common.PeakMemory` around the first timed call (RSS
  high-water mark above the resident set before it on CPU, allocator peak on CUDA);
  where ``/proc`` is unavailable the column says ``n/a``.
* references too slow or too large to run on all ``B`` lists are measured on ``b < B``
  lists and their time is scaled by ``B / b`` (per-list work is independent, so the
  scaling is linear); the table lists ``b`` and shows the memory measured for ``b`` lists.
  Dense references get ``b = memory budget / (per-list matrices x n^2 x itemsize)``;
  index-list references get ``b = pair budget / n^2``.
* ``rel. diff`` = ``|ours - reference| / |reference|`` on the same ``b`` lists: it
  confirms both compute the same quantity.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench import losses
from bench.atomic import write_text
from bench.errors import UsageError
from bench.losses.complexity import stated_complexity
from bench.perf import reference
from bench.perf.common import (
    PeakMemory,
    SuiteResult,
    Target,
    fmt,
    loadavg,
    machine_line,
    now_utc,
    parse_int_list,
    sync,
    targets_section,
)
from bench.perf.kernel_worker import make_inputs
from bench.training.device import resolve_device

SLOW_CALL_S = 5.0
# Per-list count of n x n matrices a dense reference keeps alive (softmax, products, and
# for Sinkhorn two iterates per round), used to size the measured subset.
DENSE_MATRICES = {"neuralndcg": 70, "neuralndcg_transposed": 70, "sinkprop": 20, "arf": 24}
DEFAULT_DENSE_MATRICES = 12


# --------------------------------------------------------------------------- measuring


@dataclass
class Measurement:
    seconds: float
    peak_mib: float | None
    value: float


def measure(fn: Callable[[torch.Tensor], torch.Tensor], scores: torch.Tensor, repeats: int) -> Measurement:
    """Minimum forward+backward time of ``fn(scores)`` and the peak memory of one call."""
    device = scores.device
    memory = PeakMemory(device)

    def once() -> tuple[float, float]:
        s = scores.detach().clone().requires_grad_(True)
        sync(device)
        start = time.perf_counter()
        value = fn(s)
        value.backward()
        sync(device)
        return time.perf_counter() - start, value.item()

    warm, value = once()
    times = []
    memory.start()
    first, _ = once()
    peak = memory.stop()
    times.append(first)
    n_more = 0 if max(warm, first) > SLOW_CALL_S else max(repeats - 1, 0)
    for _ in range(n_more):
        times.append(once()[0])
    return Measurement(min(times), peak, value)


# --------------------------------------------------------------------------- the losses suite


def reference_lists(name: str, kind: str, length: int, batch: int, itemsize: int, budget_mib: float,
                    pair_budget: int) -> int:
    """How many of the ``batch`` lists a reference is measured on (>= 1)."""
    if kind == "index":
        b = pair_budget // (length * length)
    else:
        per_list = DENSE_MATRICES.get(name, DEFAULT_DENSE_MATRICES) * length * length * itemsize
        b = int(budget_mib * 2**20 // per_list)
    return max(1, min(batch, b))


def _inputs(batch: int, length: int, seed: int, dtype: torch.dtype, device: torch.device):
    return make_inputs(batch, length, seed + length, dtype, device)


def loss_scores(name: str, scores: torch.Tensor) -> torch.Tensor:
    """What loss ``name`` is timed on: ``scores [B, L]``, or for a loss on one logit per grade
    (:func:`bench.losses.grade_outputs`) the logits ``s * c`` for grades ``c = 0..C-1``, ``[B, L, C]``.

    >>> loss_scores("softmax_pointwise", torch.ones(1, 2)).shape
    torch.Size([1, 2, 5])
    """
    grades = losses.grade_outputs(name)
    if grades is None:
        return scores
    return scores.unsqueeze(-1) * torch.arange(grades, dtype=scores.dtype, device=scores.device)


COLUMNS = ["L", "loss", "ours fwd+bwd (s)", "ours peak (MiB)", "reference", "ref lists measured b",
           "ref fwd+bwd (s, x B/b)", "ref peak (MiB, b lists)", "speed-up", "rel. diff"]


def _only_at(items: list[str], names: list[str]) -> dict[int, list[str]]:
    """``["3375=pirank_ndcg,ranknet"]`` -> ``{3375: [...]}`` (losses kept in registry order)."""
    out: dict[int, list[str]] = {}
    for item in items or []:
        length, sep, subset = item.partition("=")
        try:
            n = int(length)
        except ValueError:
            n = -1
        wanted = [s.strip() for s in subset.split(",") if s.strip()]
        if not sep or n < 2 or not wanted:
            raise UsageError(f"--only-at expects L=loss[,loss...] with L >= 2, got {item!r}")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise UsageError(f"--only-at {item!r}: {', '.join(unknown)} not among the measured losses")
        out[n] = [name for name in names if name in wanted]
    return out


def report_losses(args: argparse.Namespace) -> SuiteResult:
    """Measure every (L, loss) cell, write the table to ``args.out``, return it with targets."""
    device = resolve_device(args.device, on_missing_cuda=None)
    dtype = {"float32": torch.float32, "float64": torch.float64}[args.dtype]
    lengths = parse_int_list(args.lengths, "--lengths", 2)
    if args.batch < 1 or args.repeats < 1:
        raise UsageError("--batch and --repeats must be >= 1")
    names = losses.names() if not args.losses else [n.strip() for n in args.losses.split(",") if n.strip()]
    for name in names:
        try:
            losses.info(name)
        except ValueError as exc:
            raise UsageError(f"--losses: {exc}") from exc
    only_at = _only_at(args.only_at, names)
    itemsize = torch.empty((), dtype=dtype).element_size()
    load = loadavg()
    rows: list[list[str]] = []
    results: dict[tuple[int, str], dict[str, Any]] = {}
    errors = 0
    for length in lengths:
        scores, labels, mask = _inputs(args.batch, length, args.seed, dtype, device)
        for name in only_at.get(length, names):
            row = [str(length), name]
            entry: dict[str, Any] = {}
            try:
                loss = losses.get(name)
                if isinstance(loss, torch.nn.Module):
                    loss = loss.to(device=device, dtype=dtype)
                ours = measure(lambda s, loss=loss, labels=labels, mask=mask: loss(s, labels, mask),
                               loss_scores(name, scores), args.repeats)
                entry["ours"], entry["peak"] = ours.seconds, ours.peak_mib
                row += [fmt(ours.seconds), fmt(ours.peak_mib)]
            except Exception as exc:  # one failing loss must not hide the others' numbers
                errors += 1
                rows.append(row + [f"error: {type(exc).__name__}: {exc}"] + [""] * (len(COLUMNS) - 3))
                continue
            ref = reference.REFERENCES.get(name)
            if ref is None:
                stated = stated_complexity(name)
                row += [f"none (O({stated}) loss)" if stated else "none", "", "", "", "", ""]
            else:
                fn, kind, label = ref
                b = reference_lists(name, kind, length, args.batch, itemsize, args.ref_budget_mib, args.pair_budget)
                what = _reference_label(label, length)
                try:
                    sub = slice(0, b)
                    refm = measure(lambda s, fn=fn, y=labels[sub]: fn(s, y), scores[sub], args.repeats)
                    ours_b = loss(scores[sub], labels[sub], mask[sub]).item()
                    scaled = refm.seconds * args.batch / b
                    entry["ref"] = scaled
                    diff = abs(ours_b - refm.value) / max(abs(refm.value), 1e-300)
                    row += [what, str(b), fmt(scaled), fmt(refm.peak_mib), f"{scaled / ours.seconds:.1f}x", f"{diff:.1e}"]
                except Exception as exc:
                    errors += 1
                    row += [what, str(b), f"error: {type(exc).__name__}: {exc}", "", "", ""]
            results[(length, name)] = entry
            rows.append(row)
            print(" | ".join(row), flush=True)
    targets = loss_targets(results, args.batch) + gpu_loss_targets(results, args.batch, device)
    table = _render(args, device, dtype, rows, targets, load)
    print(table)
    write_text(args.out, table)
    print(f"wrote {args.out}")
    return SuiteResult("losses", table, targets, 1 if errors else 0, [Path(args.out)])


def _reference_label(label: str, length: int) -> str:
    if "NeuralSort" not in label:
        return label
    product = "row sums by A@11^T (cubic)" if length <= reference.NEURALSORT_CUBIC_MAX else "dense row sums"
    return f"{label}; {product}"


#: the GPU goal: NeuralNDCG forward + backward at L = 1000, B = 16 (seconds)
GPU_NEURALNDCG_GOAL_S = 5e-3


def gpu_loss_targets(results: dict[tuple[int, str], dict[str, Any]], batch: int, device: torch.device) -> list[Target]:
    """On CUDA at ``B = 16``: NeuralNDCG forward + backward at ``L = 1000`` within
    :data:`GPU_NEURALNDCG_GOAL_S`."""
    ours = results.get((1000, "neuralndcg"), {}).get("ours")
    if device.type != "cuda" or batch != 16 or ours is None:
        return []
    return [Target("neuralndcg fwd+bwd at L=1000, B=16 on the GPU", f"{1e3 * ours:.2f} ms",
                   f"<= {1e3 * GPU_NEURALNDCG_GOAL_S:g} ms", ours <= GPU_NEURALNDCG_GOAL_S)]


def loss_targets(results: dict[tuple[int, str], dict[str, Any]], batch: int) -> list[Target]:
    """The loss kernels' targets, evaluated where the run has the data (only at ``B = 16``)."""
    if batch != 16:
        return []
    out: list[Target] = []

    def get(length: int, name: str, key: str) -> float | None:
        return results.get((length, name), {}).get(key)

    for name in ("neuralndcg", "neuralndcg_transposed"):
        ours, ref = get(1000, name, "ours"), get(1000, name, "ref")
        if ours is not None and ref is not None:
            out.append(Target(f"{name} fwd+bwd at L=1000, B=16", f"{ours:.3g} s, {ref / ours:.1f}x the reference",
                              ">= 10x and < 1 s", ref / ours >= 10 and ours < 1.0))
    peak = get(1000, "neuralndcg", "peak")
    if peak is not None:
        out.append(Target("neuralndcg peak memory at L=1000, B=16", f"{peak:.0f} MiB", "< 2 GB (2048 MiB)", peak < 2048))
    for name in ("ranknet", "lambdaloss", "approxndcg"):
        ours = get(1000, name, "ours")
        if ours is not None:
            out.append(Target(f"{name} fwd+bwd at L=1000, B=16", f"{ours:.3g} s", "< 0.25 s", ours < 0.25))
    ours, ref = get(3375, "pirank_ndcg", "ours"), get(3375, "pirank_ndcg", "ref")
    if ours is not None and ref is not None:
        out.append(Target("pirank_ndcg@10 fwd+bwd at L=3375, B=16", f"{ours:.3g} s, {ref / ours:.1f}x the full-matrix "
                          "depth-1 reference", ">= 30x", ref / ours >= 30))
    return out


def _render(args, device, dtype, rows, targets: list[Target], load: str) -> str:
    memory = PeakMemory(device).method
    head = [
        "# Loss performance: forward + backward",
        "",
        f"- generated {now_utc()} by `ltr-bench perf losses`",
        f"- {machine_line(device)}",
        f"- dtype {str(dtype).replace('torch.', '')}, B = {args.batch} full lists "
        f"per call, scores ~ N(0, 1), labels uniform on 0..4, seed {args.seed}, default hyperparameters",
        f"- time: minimum of {args.repeats} timed calls after one warm-up (calls > {SLOW_CALL_S:g} s timed once); "
        f"load average at start {load}, at end {loadavg()} (1/5/15 min)",
        f"- peak memory: {memory}, extra memory of one call above the resident set before it",
        f"- references (bench/reference.py) measured on b lists, time scaled by B/b; dense-reference b from "
        f"a {args.ref_budget_mib:g} MiB budget, index-list b from a {args.pair_budget:g}-pair budget; NeuralSort "
        f"row sums by the explicit A@11^T product for L <= {reference.NEURALSORT_CUBIC_MAX}, dense row sum beyond",
        "- speed-up = scaled reference time / ours; rel. diff = |ours - ref| / |ref| on the b lists",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    body = ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(head + body + targets_section(targets)) + "\n"


def add_losses_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--lengths", default="100,1000,3375", help="comma-separated list lengths L")
    p.add_argument("--batch", type=int, default=16, help="lists per call B")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per measurement")
    p.add_argument("--out", type=Path, default=Path("reports/perf/losses.md"))
    p.add_argument("--losses", default="", help="comma-separated subset of registered losses (default: all)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ref-budget-mib", type=float, default=2048.0, help="memory budget of one dense reference call")
    p.add_argument("--pair-budget", type=int, default=2_000_000, help="pairs a Python index-list reference may enumerate")
    p.add_argument("--only-at", action="append", default=[], metavar="L=LOSS[,LOSS]",
                   help="at length L measure only these losses (repeatable), e.g. 3375=pirank_ndcg")
