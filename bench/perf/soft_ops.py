"""``ltr-bench perf soft-ops``: our fast soft rank and soft sort next to torchsort, in one process.

``ltr-bench perf soft-ops [--lengths 100,1000,10000,100000] [--batch 16] [--rounds 7]
[--epsilon 1.0] [--seed 0] [--out reports/perf/soft_ops.md]`` times forward + backward of
:func:`bench.losses.permutahedron.soft_rank` and :func:`~bench.losses.permutahedron.soft_sort`
(L2 and KL, float32, ``B`` full lists of length ``n``, scores ~ N(0, 1), a N(0, 1) cotangent)
and, when it is installed, the same of ``torchsort`` 0.1.10's ``soft_rank`` / ``soft_sort`` (the
optional extra ``perf-peers``: ``pip install -e .[perf-peers]``; it compiles a C++ extension
against the installed torch). Without torchsort the suite says so in one line and times ours
alone.

Protocol (also written into the table's header):

* one process, torch pinned to one thread (``torch.set_num_threads(1)``, which also sets
  OpenMP's thread count that torchsort's ``#pragma omp parallel for`` uses; our kernels are
  serial numba), the same float32 inputs for both sides;
* torchsort ranks and sorts ascending and ours descending, so the timed torchsort calls are
  its native ``soft_rank(x)`` / ``soft_sort(x)`` on the same ``x`` (the mirror image of ours:
  the same work); equality is checked untimed on the mirrored calls ``soft_rank(-x)`` and
  ``-soft_sort(-x)``, values and vector-Jacobian products (:data:`VALUE_TOL`, :data:`GRAD_TOL`
  relative to the largest entry; one ``MISMATCH`` makes the exit status 1), against torchsort
  run in float64 on the same (float32-valued) inputs: torchsort's own float32 run is not a
  reference at large ``n``, where ``rho / epsilon - x`` (up to ``1e5``) keeps only about 0.01
  of ``x`` and its blocks, hence its gradients, move (measured at ``n = 10^5``, relative to the
  largest entry of its float64 run: soft sort values 7.7e-4 away, the KL soft rank's values
  3.2e-4 and its gradient 0.78 on untied scores). The gradient is compared on the entries
  whose score is not tied within its list (float32 N(0, 1) scores tie: 2,224 of 1.6 million
  entries at ``n = 10^5``): the soft sort's gradient at a tie
  depends on which tied score sorts first, ours keeps the input order and torchsort's
  ``torch.sort`` does not promise any. Of the others at most :data:`MAX_OFF` may differ by more
  than :data:`GRAD_TOL`: where two adjacent blocks' values agree to rounding, float64 rounding
  decides whether they pool, and the gradient jumps there (measured: 28 of 1.6 million
  entries, soft rank KL at ``n = 10^5``; the values agree to 4e-8);
* one untimed warm-up per side (numba compiles or loads its cache there), then ``--rounds``
  rounds; each round times each side once, back to back, the side going first alternating, so
  both see the same load on a shared machine; a timing repeats the call until it has run
  :data:`MIN_TIMING_S` and reports the mean per call;
* ratio = median over rounds of ours / torchsort within a round; the table also shows each
  side's median milliseconds.

Targets (issue 43): ratio <= 1 at every length, ratio <= 0.8 at ``n >= 1000``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.atomic import write_text
from bench.errors import UsageError
from bench.losses.permutahedron import soft_rank, soft_sort
from bench.perf.common import (
    SuiteResult,
    Target,
    fmt,
    loadavg,
    machine_line,
    md_table,
    now_utc,
    parse_int_list,
    targets_section,
)

MIN_TIMING_S = 0.02  # a timing repeats the call until it has run this long (n = 100: ~0.3 ms a call)
VALUE_TOL = 1e-4  # max |ours - torchsort| <= VALUE_TOL * max |torchsort| (float32, n up to 1e5)
GRAD_TOL = 1e-3  # the same for the vector-Jacobian products, entry by entry
MAX_OFF = 1e-4  # share of untied entries whose vector-Jacobian product may be off by more
GOAL_ALL = 1.0  # ours / torchsort at every n
GOAL_LONG = 0.8  # ours / torchsort at n >= LONG
LONG = 1000
OPS = ("rank", "sort")
REGULARIZATIONS = ("l2", "kl")


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (what ``lscpu`` prints), ``unknown`` elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def peer_version() -> str:
    try:
        return importlib.metadata.version("torchsort")
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def torchsort_module() -> Any | None:
    """``torchsort`` when it imports (with its compiled extension), else ``None``."""
    try:
        import torchsort  # type: ignore[import-not-found]
    except ImportError:
        return None
    return torchsort


def _ours(op: str, reg: str, epsilon: float, mask: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    fn = soft_rank if op == "rank" else soft_sort
    return lambda x: fn(x, mask, epsilon=epsilon, regularization=reg)  # type: ignore[arg-type]


def _theirs(ts: Any, op: str, reg: str, epsilon: float) -> Callable[[torch.Tensor], torch.Tensor]:
    fn = ts.soft_rank if op == "rank" else ts.soft_sort
    return lambda x: fn(x, reg, epsilon)


def _mirrored(ts: Any, op: str, reg: str, epsilon: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """torchsort's ascending operator turned into our descending one (untimed equality check)."""
    if op == "rank":
        return lambda x: ts.soft_rank(-x, reg, epsilon)
    return lambda x: -ts.soft_sort(-x, reg, epsilon)


def _call(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, cotangent: torch.Tensor) -> None:
    leaf = x.detach().requires_grad_(True)
    fn(leaf).backward(cotangent)


def _timing(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, cotangent: torch.Tensor, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        _call(fn, x, cotangent)
    return (time.perf_counter() - start) / calls


def _value_and_vjp(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                   cotangent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = x.detach().requires_grad_(True)
    out = fn(leaf)
    out.backward(cotangent)
    assert leaf.grad is not None
    return out.detach(), leaf.grad


def _relative_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).abs().max() / b.abs().max().clamp(min=1e-30))


def tied(x: torch.Tensor) -> torch.Tensor:
    """Entries whose value occurs more than once in their row (``[B, n]`` bool).

    >>> tied(torch.tensor([[1.0, 2.0, 1.0], [3.0, 4.0, 5.0]])).tolist()
    [[True, False, True], [False, False, False]]
    """
    ordered, order = torch.sort(x, dim=-1)
    same = ordered[:, 1:] == ordered[:, :-1]
    false = torch.zeros_like(same[:, :1])
    in_order = torch.cat([same, false], -1) | torch.cat([false, same], -1)
    return torch.zeros_like(in_order).scatter(-1, order, in_order)


def gradient_off(a: torch.Tensor, b: torch.Tensor, skip: torch.Tensor) -> float:
    """Share of the entries outside ``skip`` where ``|a - b| > GRAD_TOL * max |b|``."""
    off = ((a.double() - b).abs() > GRAD_TOL * b.abs().max()) & ~skip
    return float(off.sum()) / max(int((~skip).sum()), 1)


def measure_pair(ours: Callable, theirs: Callable | None, x: torch.Tensor, cotangent: torch.Tensor,
                 rounds: int) -> dict[str, Any]:
    """Paired timings: per-call seconds of each side per round and the per-round ratios."""
    warm = time.perf_counter()
    _call(ours, x, cotangent)
    _call(ours, x, cotangent)  # the first call may compile; the second is a fair estimate
    sides = {"ours": ours} if theirs is None else {"ours": ours, "torchsort": theirs}
    estimate = {}
    for name, fn in sides.items():
        warm = time.perf_counter()
        _call(fn, x, cotangent)
        estimate[name] = time.perf_counter() - warm
    calls = max(1, round(MIN_TIMING_S / max(min(estimate.values()), 1e-6)))
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds):
        names = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in names:
            times[name].append(_timing(sides[name], x, cotangent, calls))
    out: dict[str, Any] = {"calls": calls, "ours": statistics.median(times["ours"])}
    if theirs is not None:
        out["torchsort"] = statistics.median(times["torchsort"])
        out["ratio"] = statistics.median(o / t for o, t in zip(times["ours"], times["torchsort"], strict=True))
    return out


COLUMNS = ["n", "reg.", "op", "calls/timing", "ours ms", "torchsort ms", "ours / torchsort", "value gap",
           "vjp off (untied)"]


def report_soft_ops(args: argparse.Namespace) -> SuiteResult:
    """Measure every (n, regularisation, operator) cell, write the table, return it with targets."""
    lengths = parse_int_list(args.lengths, "--lengths", 2)
    if args.batch < 1 or args.rounds < 1 or not args.epsilon > 0:
        raise UsageError("--batch and --rounds must be >= 1 and --epsilon > 0")
    ts = torchsort_module()
    note = (f"torchsort {getattr(ts, '__version__', None) or peer_version()} is installed: timed side by side"
            if ts is not None else
            "torchsort is not installed (pip install -e .[perf-peers]): timing ours alone")
    print(note, flush=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    load_before = loadavg()
    rows: list[list[str]] = []
    targets: list[Target] = []
    rc = 0
    try:
        generator = torch.Generator().manual_seed(args.seed)
        for n in lengths:
            x = torch.randn(args.batch, n, generator=generator)
            cotangent = torch.randn(args.batch, n, generator=generator)
            mask = torch.ones(args.batch, n, dtype=torch.bool)
            for reg in REGULARIZATIONS:
                for op in OPS:
                    ours = _ours(op, reg, args.epsilon, mask)
                    theirs = None if ts is None else _theirs(ts, op, reg, args.epsilon)
                    m = measure_pair(ours, theirs, x, cotangent, args.rounds)
                    row = [str(n), reg, op, str(m["calls"]), fmt(m["ours"] * 1e3)]
                    if ts is None:
                        row += ["", "", "", ""]
                    else:
                        out_a, vjp_a = _value_and_vjp(ours, x, cotangent)
                        out_b, vjp_b = _value_and_vjp(_mirrored(ts, op, reg, args.epsilon), x.double(),
                                                      cotangent.double())
                        gap = _relative_gap(out_a, out_b)
                        off = gradient_off(vjp_a, vjp_b, tied(x))
                        same = gap <= VALUE_TOL and off <= MAX_OFF
                        rc |= 0 if same else 1
                        row += [fmt(m["torchsort"] * 1e3), f"{m['ratio']:.2f}"]
                        row += [f"{gap:.1e}", f"{off:.1e}" + ("" if same else " MISMATCH")]
                        goal = GOAL_LONG if n >= LONG else GOAL_ALL
                        targets.append(Target(f"soft {op} {reg}, n = {n}, B = {args.batch}: ours / torchsort",
                                              f"{m['ratio']:.2f}", f"<= {goal}", m["ratio"] <= goal))
                    rows.append(row)
                    print(" | ".join(row), flush=True)
    finally:
        torch.set_num_threads(threads)
    header = [
        "# Soft rank and soft sort: ours against torchsort",
        "",
        f"{now_utc()}; {machine_line(torch.device('cpu'))} (1 during the timings); CPU {cpu_model()}; load average "
        f"{load_before} at the start, {loadavg()} at the end.",
        "",
        note + ".",
        "",
        f"float32, B = {args.batch} full lists, scores ~ N(0, 1), epsilon = {args.epsilon}, forward + backward "
        f"with a N(0, 1) cotangent; {args.rounds} rounds, each timing each side once, back to back, alternating "
        f"which goes first; a timing repeats the call `calls/timing` times (>= {MIN_TIMING_S} s); ms = the median "
        "per call; ratio = the median over rounds of ours / torchsort. Against torchsort in float64 on the same "
        f"inputs: value gap = max |ours - torchsort| / max |torchsort| (limit {VALUE_TOL:g}); vjp off = the share "
        f"of entries with an untied score whose vector-Jacobian product is off by more than {GRAD_TOL:g} of the "
        f"largest (limit {MAX_OFF:g}).",
        "",
    ]
    markdown = "\n".join(header + [md_table(COLUMNS, rows)] + targets_section(targets)) + "\n"
    print(markdown)
    write_text(args.out, markdown)
    return SuiteResult("soft-ops", markdown, targets, rc, [args.out])


def add_soft_ops_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lengths", default="100,1000,10000,100000", help="comma-separated list lengths n")
    p.add_argument("--batch", type=int, default=16, help="lists per call B")
    p.add_argument("--rounds", type=int, default=7, help="paired rounds per cell")
    p.add_argument("--epsilon", type=float, default=1.0, help="regularisation strength of both sides")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("reports/perf/soft_ops.md"))
