"""``ltr-bench perf``: performance suites, printed and written as markdown tables.

Suites live in :data:`SUITES` (name -> :class:`PerfSuite`); ``register_cli`` turns each
into ``ltr-bench perf <suite>``, so adding ``perf scaling``, ``perf train`` or ``perf all``
is one more entry. Only the ``losses`` suite exists here:

``ltr-bench perf losses [--device cpu|cuda|auto] [--lengths 100,1000,3375] [--batch 16]
[--repeats N] [--out reports/perf/losses.md]`` times forward + backward of every
registered loss at its default hyperparameters on ``B`` full lists of length ``L``
(scores ~ N(0, 1), labels uniform on 0..4, float32 by default) next to the textbook
references of :mod:`bench.perf_reference`, measured in the same run.

Measurement protocol (also written into the table's header):

* time: one untimed warm-up call, then ``--repeats`` timed calls (``perf_counter``,
  CUDA synchronised); the table shows the minimum, the least-disturbed call (timeit's
  convention: on a shared machine other processes only ever add time). A call slower
  than 5 s is timed once.
* peak memory, CPU: tracemalloc cannot see torch's allocator, so we use the kernel's
  resident-set high-water mark: before the first timed call we ``malloc_trim(0)`` (hand
  freed heap pages back), reset ``VmHWM`` by writing ``5`` to ``/proc/self/clear_refs``
  and read ``VmRSS``; after it we read ``VmHWM``. Peak = HWM - RSS before, i.e. the extra
  resident memory the call needed at its high point (page granular; everything the process
  touched, torch or not). Where ``/proc`` is unavailable the column says ``n/a``.
  CUDA: ``torch.cuda.max_memory_allocated`` minus the allocation before the call.
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
import ctypes
import gc
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import torch

from bench import losses, perf_reference
from bench.atomic import write_text
from bench.cli import CliError

SLOW_CALL_S = 5.0
# Per-list count of n x n matrices a dense reference keeps alive (softmax, products, and
# for Sinkhorn two iterates per round), used to size the measured subset.
DENSE_MATRICES = {"neuralndcg": 70, "neuralndcg_transposed": 70, "sinkprop": 20, "arf": 24}
DEFAULT_DENSE_MATRICES = 12


@dataclass(frozen=True)
class PerfSuite:
    """One ``ltr-bench perf <name>`` sub-command."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# --------------------------------------------------------------------------- measuring


def _libc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak extra memory of one call: RSS high-water mark on CPU, allocator peak on CUDA."""

    def __init__(self, device: torch.device):
        self.device = device
        self.method = "cuda max_memory_allocated" if device.type == "cuda" else "RSS high-water mark (/proc VmHWM)"

    def start(self) -> None:
        gc.collect(0)  # a full collection costs ~0.2 s with torch loaded; young cycles suffice
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return
        _libc_trim()
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
                fh.write("5")
            self._base = _status_kib("VmRSS")
        except OSError:
            self._base = None

    def stop(self) -> float | None:
        """Peak in MiB (``None`` when the platform cannot tell)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return (torch.cuda.max_memory_allocated(self.device) - self._base) / 2**20
        peak = _status_kib("VmHWM")
        if self._base is None or peak is None:
            return None
        return max(peak - self._base, 0) / 1024


@dataclass
class Measurement:
    seconds: float
    peak_mib: float | None
    value: float


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(fn: Callable[[torch.Tensor], torch.Tensor], scores: torch.Tensor, repeats: int) -> Measurement:
    """Minimum forward+backward time of ``fn(scores)`` and the peak memory of one call."""
    device = scores.device
    memory = PeakMemory(device)

    def once() -> tuple[float, float]:
        s = scores.detach().clone().requires_grad_(True)
        _sync(device)
        start = time.perf_counter()
        value = fn(s)
        value.backward()
        _sync(device)
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


def _parse_lengths(text: str) -> list[int]:
    try:
        lengths = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise CliError(f"--lengths must be comma-separated integers, got {text!r}") from exc
    if not lengths or min(lengths) < 2:
        raise CliError(f"--lengths needs list lengths >= 2, got {text!r}")
    return lengths


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; an explicit unavailable CUDA is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise CliError("--device cuda requested but torch.cuda.is_available() is False (use --device auto or cpu)")
    return torch.device(name)


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
    gen = torch.Generator().manual_seed(seed + length)
    scores = torch.randn(batch, length, generator=gen, dtype=dtype).to(device)
    labels = torch.randint(0, 5, (batch, length), generator=gen).to(dtype).to(device)
    return scores, labels, torch.ones(batch, length, dtype=torch.bool, device=device)


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.3e}"


COLUMNS = ["L", "loss", "ours fwd+bwd (s)", "ours peak (MiB)", "reference", "ref lists measured b",
           "ref fwd+bwd (s, x B/b)", "ref peak (MiB, b lists)", "speed-up", "rel. diff"]


def run_losses(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    dtype = {"float32": torch.float32, "float64": torch.float64}[args.dtype]
    lengths = _parse_lengths(args.lengths)
    if args.batch < 1 or args.repeats < 1:
        raise CliError("--batch and --repeats must be >= 1")
    names = losses.names() if not args.losses else [n.strip() for n in args.losses.split(",") if n.strip()]
    for name in names:
        try:
            losses.info(name)
        except ValueError as exc:
            raise CliError(f"--losses: {exc}") from exc
    itemsize = torch.empty((), dtype=dtype).element_size()
    load = _loadavg()
    rows: list[list[str]] = []
    results: dict[tuple[int, str], dict[str, Any]] = {}
    errors = 0
    for length in lengths:
        scores, labels, mask = _inputs(args.batch, length, args.seed, dtype, device)
        for name in names:
            row = [str(length), name]
            entry: dict[str, Any] = {}
            try:
                loss = losses.get(name)
                if isinstance(loss, torch.nn.Module):
                    loss = loss.to(device=device, dtype=dtype)
                ours = measure(lambda s: loss(s, labels, mask), scores, args.repeats)
                entry["ours"] = ours.seconds
                row += [_fmt(ours.seconds), _fmt(ours.peak_mib)]
            except Exception as exc:  # one failing loss must not hide the others' numbers
                errors += 1
                rows.append(row + [f"error: {type(exc).__name__}: {exc}"] + [""] * (len(COLUMNS) - 3))
                continue
            ref = perf_reference.REFERENCES.get(name)
            if ref is None:
                row += ["none (O(n) loss)", "", "", "", "", ""]
            else:
                fn, kind, label = ref
                b = reference_lists(name, kind, length, args.batch, itemsize, args.ref_budget_mib, args.pair_budget)
                what = _reference_label(label, length)
                try:
                    sub = slice(0, b)
                    refm = measure(lambda s: fn(s, labels[sub]), scores[sub], args.repeats)
                    ours_b = loss(scores[sub], labels[sub], mask[sub]).item()
                    scaled = refm.seconds * args.batch / b
                    entry["ref"] = scaled
                    diff = abs(ours_b - refm.value) / max(abs(refm.value), 1e-300)
                    row += [what, str(b), _fmt(scaled), _fmt(refm.peak_mib), f"{scaled / ours.seconds:.1f}x", f"{diff:.1e}"]
                except Exception as exc:
                    errors += 1
                    row += [what, str(b), f"error: {type(exc).__name__}: {exc}", "", "", ""]
            results[(length, name)] = entry
            rows.append(row)
            print(" | ".join(row), flush=True)
    table = _render(args, device, dtype, rows, results, load)
    print(table)
    write_text(args.out, table)
    print(f"wrote {args.out}")
    return 1 if errors else 0


def _reference_label(label: str, length: int) -> str:
    if "NeuralSort" not in label:
        return label
    product = "row sums by A@11^T (cubic)" if length <= perf_reference.NEURALSORT_CUBIC_MAX else "dense row sums"
    return f"{label}; {product}"


def _targets(results: dict[tuple[int, str], dict[str, Any]], batch: int) -> list[str]:
    """The suite's performance targets, evaluated where the run has the data (never asserted)."""
    if batch != 16:
        return []
    lines = []

    def get(length: int, name: str, key: str) -> float | None:
        return results.get((length, name), {}).get(key)

    for name in ("neuralndcg", "neuralndcg_transposed"):
        ours, ref = get(1000, name, "ours"), get(1000, name, "ref")
        if ours is not None and ref is not None:
            ok = ref / ours >= 10 and ours < 1.0
            lines.append(f"- {name} at L=1000: {ours:.3g} s, {ref / ours:.1f}x the reference (target >= 10x and < 1 s): {'met' if ok else 'MISSED'}")
    ours, ref = get(3375, "pirank_ndcg", "ours"), get(3375, "pirank_ndcg", "ref")
    if ours is not None and ref is not None:
        ok = ref / ours >= 30
        lines.append(f"- pirank_ndcg@10 at L=3375: {ref / ours:.1f}x its full-matrix depth-1 reference (target >= 30x): {'met' if ok else 'MISSED'}")
    for name in ("ranknet", "lambdaloss", "approxndcg"):
        ours = get(1000, name, "ours")
        if ours is not None:
            lines.append(f"- {name} at L=1000: {ours:.3g} s (target < 0.25 s): {'met' if ours < 0.25 else 'MISSED'}")
    return lines


def _loadavg() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "n/a"


def _render(args, device, dtype, rows, results, load: str) -> str:
    memory = PeakMemory(device).method
    head = [
        "# Loss performance: forward + backward",
        "",
        f"- generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by `ltr-bench perf losses`",
        f"- device {device} ({platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads), dtype {str(dtype).replace('torch.', '')}, B = {args.batch} full lists "
        f"per call, scores ~ N(0, 1), labels uniform on 0..4, seed {args.seed}, default hyperparameters",
        f"- time: minimum of {args.repeats} timed calls after one warm-up (calls > {SLOW_CALL_S:g} s timed once); "
        f"load average at start {load}, at end {_loadavg()} (1/5/15 min)",
        f"- peak memory: {memory}, extra memory of one call above the resident set before it",
        f"- references (bench/perf_reference.py) measured on b lists, time scaled by B/b; dense-reference b from "
        f"a {args.ref_budget_mib:g} MiB budget, index-list b from a {args.pair_budget:g}-pair budget; NeuralSort "
        f"row sums by the explicit A@11^T product for L <= {perf_reference.NEURALSORT_CUBIC_MAX}, dense row sum beyond",
        "- speed-up = scaled reference time / ours; rel. diff = |ours - ref| / |ref| on the b lists",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    body = ["| " + " | ".join(r) + " |" for r in rows]
    targets = _targets(results, args.batch)
    tail = ["", "## Targets", "", *targets] if targets else []
    return "\n".join(head + body + tail) + "\n"


def _add_losses_arguments(p: argparse.ArgumentParser) -> None:
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


SUITES: dict[str, PerfSuite] = {
    "losses": PerfSuite("losses", "time and peak memory of every registered loss vs textbook references",
                        _add_losses_arguments, run_losses),
}


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add ``perf`` with one sub-command per entry of :data:`SUITES`."""
    perf = subparsers.add_parser("perf", help="performance suites (markdown tables)")
    suites = perf.add_subparsers(dest="suite", metavar="SUITE")
    suites.required = True
    for suite in SUITES.values():
        p = suites.add_parser(suite.name, help=suite.help)
        suite.add_arguments(p)
        p.set_defaults(func=suite.run)


__all__ = ["PerfSuite", "SUITES", "measure", "register_cli", "resolve_device"]
