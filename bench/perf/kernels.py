"""``ltr-bench perf kernels``: the four loss kernels timed against a previous checkout, side by side.

``ltr-bench perf kernels [--baseline DIR] [--batch 16] [--length 1000] [--rounds 9]
[--out reports/perf/kernels.md]`` times forward + backward of ``neuralndcg``, ``ranknet``,
``lambdaloss`` and ``approxndcg`` (default hyperparameters, float32, ``B`` full lists of
length ``L``; ``--kernels`` names any registered losses, the four have goals) in the current
tree and, with ``--baseline``, in another checkout of the repository (e.g. the previous main),
in one run:

* one worker process per checkout (:mod:`bench.perf.kernel_worker`, the same protocol code on
  both sides, ``PYTHONPATH`` and working directory set to the checkout; the worker reports
  which ``bench`` package it imported and the table shows it), the same torch threads, the
  same tensors generated from ``--seed``;
* torch's global generator seeded with ``--seed`` before every call, so a sampled loss
  (Gumbel, PL-Rank) draws the same noise on both sides;
* one untimed warm-up call per kernel and side, then ``--rounds`` rounds; each round times
  one call per kernel on each side, back to back, the side that goes first alternating
  between rounds, so both sides see the same machine load (the machine is shared: absolute
  seconds drift, the paired ratio is what is compared);
* ratio = median over rounds of (ours / baseline) of the two calls of a round; the table
  also shows each side's minimum and median seconds;
* same quantity: both sides' loss value and gradient with respect to the scores on the same
  inputs must agree within float32 tolerance, :data:`VALUE_RTOL` relative on the value and
  :data:`GRAD_TOL` of the largest gradient entry on every gradient entry (one ``MISMATCH``
  makes the exit status 1).

NeuralNDCG's memory-traffic floor: each Sinkhorn iteration of :mod:`bench.losses.sinkhorn`
(scaling-vector form) is two matrix-vector products over the ``B x L x L`` float32 kernel
forward (``K v``, then ``K^T u`` with ``u`` depending on the first) and two backward
(``K a``, then ``K^T c``), each of which reads the whole kernel (64 MB at B = 16,
L = 1000: twice the 32 MiB L3 of the machine this was written on), so streamed from memory
the iterations move ``4 x T x B x L^2 x 4`` bytes for ``T`` iterations actually run on these
inputs (:func:`bench.losses.sinkhorn.sinkhorn_iterations`, the most over the lists). The
floor is that over this machine's memory bandwidth, measured in the same run and in every round as
``a.add_(b)`` on two :data:`BANDWIDTH_MIB` MiB float32 arrays (3 x the array bytes moved per
call: two reads and a write, STREAM's count), best of all rounds. The goal compares
NeuralNDCG's minimum measured time (all of it: NeuralSort, the softmax, the iterations and
the gradient assembly) with 1.5 x that floor. The iterations run chunk by chunk of lists
that fit in cache (:func:`bench.losses.chunks.list_chunks`), so their passes read ``K``
from cache, not memory: this floor is a yardstick for the whole kernel, not a bound on the
iterations.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

import bench
from bench.atomic import write_text
from bench.errors import UsageError
from bench.perf import kernel_worker
from bench.perf.common import SuiteResult, Target, fmt, loadavg, machine_line, md_table, now_utc, targets_section

# registry name -> goal on time ours / baseline (issue 27, item 1)
GOALS: dict[str, float] = {"neuralndcg": 0.85, "ranknet": 0.95, "lambdaloss": 0.80, "approxndcg": 0.95}
FLOOR_GOAL = 1.5  # NeuralNDCG time <= 1.5 x its Sinkhorn memory-traffic floor
VALUE_RTOL = 1e-5  # |value ours - value baseline| <= VALUE_RTOL * |value baseline|
GRAD_TOL = 1e-4  # max_i |grad ours - grad baseline| <= GRAD_TOL * max_i |grad baseline|
BANDWIDTH_MIB = 256
SWEEPS_PER_ITERATION = 4  # reads of K per Sinkhorn iteration: K v and K^T u forward, K a and K^T c backward


@dataclass
class Side:
    """One checkout's worker process."""

    label: str
    root: Path
    proc: subprocess.Popen
    ready: dict
    times: dict[str, list[float]] = field(default_factory=dict)

    def ask(self, cmd: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label} worker ({self.root}) exited: {self.proc.wait()}")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"{self.label} worker: {out['error']}")
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask({"op": "quit"})
            except (RuntimeError, BrokenPipeError, ValueError):
                pass
            self.proc.wait(timeout=30)


def checkout_root() -> Path:
    """The checkout this ``bench`` package was imported from."""
    return Path(bench.__file__).resolve().parent.parent


def start_worker(label: str, root: Path, config: dict) -> Side:
    """Start a worker importing ``bench`` from ``root`` and wait for its ready line."""
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS=str(config["threads"]))
    source = Path(kernel_worker.__file__).read_text(encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", source, json.dumps(config)], cwd=root, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the {label} worker in {root} failed to start (exit status {proc.wait()})")
    ready = json.loads(line)
    imported = Path(ready["bench"]).resolve().parent.parent
    if imported != root.resolve():
        proc.kill()
        raise RuntimeError(f"the {label} worker imported bench from {imported}, not {root}")
    return Side(label, root, proc, ready)


def memory_bandwidth(mib: int = BANDWIDTH_MIB, calls: int = 3) -> float:
    """Best ``a.add_(b)`` bandwidth in bytes/s over ``calls`` calls (3 x the array bytes each)."""
    n = mib * 2**20 // 4
    a, b = torch.ones(n), torch.ones(n)
    a.add_(b)  # touch every page first
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        a.add_(b)
        best = min(best, time.perf_counter() - start)
    return 3 * n * 4 / best


def sinkhorn_iterations_run(batch: int, length: int, seed: int) -> int:
    """Sinkhorn iterations NeuralNDCG runs on the suite's inputs (current tree, default tau, tol)."""
    import inspect

    from bench.losses.neuralndcg import neuralndcg
    from bench.losses.neuralsort import neuralsort
    from bench.losses.sinkhorn import sinkhorn_iterations

    defaults = {k: p.default for k, p in inspect.signature(neuralndcg).parameters.items()}
    scores, _, mask = kernel_worker.make_inputs(batch, length, seed)
    with torch.no_grad():
        p_hat = neuralsort(scores, mask, tau=defaults["tau"])
        rows = torch.arange(length)[None, :] < mask.sum(-1, keepdim=True)
        its = sinkhorn_iterations(p_hat, rows, mask, max_iter=defaults["max_iter"], tol=defaults["tol"])
    return int(its.max())


def compare(a: dict, b: dict) -> tuple[float, float, bool]:
    """``(value rel. diff, grad diff / max |grad|, within tolerance)`` of two ``check`` results."""
    v_diff = abs(float(a["value"]) - float(b["value"])) / max(abs(float(b["value"])), 1e-30)
    g_scale = float(b["grad"].abs().max())
    g_diff = float((a["grad"] - b["grad"]).abs().max()) / max(g_scale, 1e-30)
    return v_diff, g_diff, v_diff <= VALUE_RTOL and g_diff <= GRAD_TOL


def _check_all(sides: list[Side], kernels: list[str]) -> dict[str, tuple[float, float, bool]]:
    out = {}
    with tempfile.TemporaryDirectory(prefix="ltr-kernels-") as tmp:
        for name in kernels:
            got = []
            for side in sides:
                path = Path(tmp) / f"{side.label}-{name}.pt"
                side.ask({"op": "check", "name": name, "path": str(path)})
                got.append(torch.load(path, weights_only=True))  # tensors only: never unpickle code
            if len(got) == 2:
                out[name] = compare(got[0], got[1])
    return out


def _time_rounds(sides: list[Side], kernels: list[str], rounds: int) -> list[float]:
    """Warm-up, then ``rounds`` interleaved rounds; returns the bandwidth samples (bytes/s)."""
    for side in sides:
        for name in kernels:
            side.ask({"op": "time", "name": name})
            side.times[name] = []
    bandwidths = []
    for r in range(rounds):
        bandwidths.append(memory_bandwidth())
        for name in kernels:
            for side in sides if r % 2 == 0 else sides[::-1]:
                side.times[name].append(float(side.ask({"op": "time", "name": name})["s"]))
        print(f"round {r + 1}/{rounds}: " + ", ".join(
            f"{name} " + "/".join(f"{s.times[name][-1]:.3f}" for s in sides) for name in kernels), flush=True)
    return bandwidths


def report_kernels(args: argparse.Namespace) -> SuiteResult:
    """Time the kernels (and the baseline's), write the table to ``args.out``, return it with targets."""
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    from bench import losses

    unknown = sorted(set(kernels) - set(losses.names()))
    if unknown or not kernels:
        raise UsageError(f"--kernels: registered losses only (the four with goals: {', '.join(GOALS)}), "
                         f"got {args.kernels!r}")
    if args.batch < 1 or args.length < 2 or args.rounds < 1:
        raise UsageError("need --batch >= 1, --length >= 2 and --rounds >= 1")
    baseline = None
    if args.baseline is not None:
        baseline = Path(args.baseline).resolve()
        if not (baseline / "bench" / "losses" / "__init__.py").is_file():
            raise UsageError(f"--baseline {args.baseline}: not a checkout of ltr-bench (no bench/losses there)")
    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    config = {"batch": args.batch, "length": args.length, "seed": args.seed, "threads": threads, "kernels": kernels}
    load_start = loadavg()
    sides: list[Side] = []
    try:
        sides.append(start_worker("ours", checkout_root(), config))
        if baseline is not None:
            sides.append(start_worker("baseline", baseline, config))
        checks = _check_all(sides, kernels)
        bandwidths = _time_rounds(sides, kernels, args.rounds)
    finally:
        for side in sides:
            side.close()
    iterations = sinkhorn_iterations_run(args.batch, args.length, args.seed) if "neuralndcg" in kernels else 0
    table, targets = _render(args, sides, kernels, checks, max(bandwidths), iterations, load_start, threads)
    print(table)
    write_text(args.out, table)
    print(f"wrote {args.out}")
    mismatch = any(not ok for _, _, ok in checks.values())
    return SuiteResult("kernels", table, targets, 1 if mismatch else 0, [Path(args.out)])


def _render(args, sides: list[Side], kernels: list[str], checks, bandwidth: float, iterations: int,
            load_start: str, threads: int) -> tuple[str, list[Target]]:
    ours = sides[0]
    base = sides[1] if len(sides) > 1 else None
    rows, targets = [], []
    for name in kernels:
        o = ours.times[name]
        row = [name, fmt(min(o)), fmt(statistics.median(o))]
        limit = GOALS.get(name)  # None: a loss timed without a goal
        goal = "none" if limit is None else f"<= {limit:g}x"
        if base is None:
            row += ["", "", "needs --baseline", goal, "", ""]
        else:
            b = base.times[name]
            ratio = statistics.median(x / y for x, y in zip(o, b))
            v_diff, g_diff, ok = checks[name]
            verdict = "" if limit is None else ("met" if ratio <= limit else "MISSED")
            row += [fmt(min(b)), fmt(statistics.median(b)), f"{ratio:.3f}x", goal, verdict,
                    f"{v_diff:.1e} / {g_diff:.1e}: {'ok' if ok else 'MISMATCH'}"]
            if limit is not None:
                targets.append(Target(f"{name} time vs baseline (B={args.batch}, L={args.length})", f"{ratio:.3f}x",
                                      goal, verdict == "met"))
        rows.append(row)
    columns = ["kernel", "ours min (s)", "ours median (s)", "baseline min (s)", "baseline median (s)",
               "ours / baseline (median of rounds)", "goal", "goal met", "value / grad diff vs baseline"]
    lines = [
        "# Loss kernels against a previous checkout: forward + backward",
        "",
        f"- generated {now_utc()} by `ltr-bench perf kernels"
        + (f" --baseline {args.baseline}`" if base is not None else "`"),
        f"- {machine_line(torch.device('cpu'))}; both workers {threads} torch threads",
        f"- ours: bench from `{ours.ready['bench']}`"
        + (f"; baseline: bench from `{base.ready['bench']}`" if base is not None else "; no baseline given "
           "(`--baseline DIR`, a checkout of the previous main): the ratio column needs one"),
        f"- float32, B = {args.batch} full lists of L = {args.length}, scores ~ N(0, 1), labels uniform on 0..4, "
        f"seed {args.seed}, default hyperparameters; the same tensors on both sides",
        f"- one warm-up call per kernel and side, then {args.rounds} rounds of one call per kernel and side back "
        "to back (first side alternating); ratio = median over rounds of the paired ours / baseline",
        f"- same quantity: value within {VALUE_RTOL:g} relative, every gradient entry within {GRAD_TOL:g} of the "
        "largest |gradient| (float32 rounding; columns: value rel. diff / gradient diff)",
        f"- load average at start {load_start}, at end {loadavg()} (1/5/15 min; the machine is shared)",
        "",
        md_table(columns, rows),
    ]
    if "neuralndcg" in kernels:
        nbytes = SWEEPS_PER_ITERATION * iterations * args.batch * args.length**2 * 4
        floor = nbytes / bandwidth
        measured = min(ours.times["neuralndcg"])
        lines += [
            "",
            "## NeuralNDCG against its memory-traffic floor",
            "",
            f"- Sinkhorn iterations run on these inputs: {iterations} (default max_iter 30, tol 1e-6)",
            f"- bytes streamed from memory if every pass read K from there: {SWEEPS_PER_ITERATION} reads of the "
            "B x L x L float32 kernel per iteration "
            f"(K v and K^T u forward, K a and K^T c backward) = {SWEEPS_PER_ITERATION} x {iterations} x {args.batch} x "
            f"{args.length}^2 x 4 B = {nbytes / 1e9:.3f} GB",
            f"- memory bandwidth (a.add_(b), 2 x {BANDWIDTH_MIB} MiB float32, 3 streams, best of {args.rounds} "
            f"rounds): {bandwidth / 1e9:.2f} GB/s",
            f"- floor = {fmt(floor)} s; NeuralNDCG ours min {fmt(measured)} s = {measured / floor:.2f}x the floor "
            f"(goal <= {FLOOR_GOAL:g}x)",
            "- the iterations run chunk by chunk of lists whose K fits a quarter of the largest CPU cache, so "
            "their passes read K from cache: the floor is a yardstick for the whole kernel (NeuralSort, softmax, "
            "iterations, gradient assembly), not a bound on the iterations",
        ]
        targets.append(Target(f"neuralndcg time / Sinkhorn memory-traffic floor (B={args.batch}, L={args.length})",
                              f"{measured / floor:.2f}x ({fmt(measured)} s / {fmt(floor)} s)", f"<= {FLOOR_GOAL:g}x",
                              measured / floor <= FLOOR_GOAL))
    return "\n".join(lines + targets_section(targets)) + "\n", targets


def add_kernels_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                   help="another checkout of the repository to time side by side (e.g. the previous main)")
    p.add_argument("--batch", type=int, default=16, help="lists per call B")
    p.add_argument("--length", type=int, default=1000, help="list length L")
    p.add_argument("--rounds", type=int, default=9, help="timed rounds (one call per kernel and side each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads of both workers (default: this process's)")
    p.add_argument("--kernels", default=",".join(GOALS),
                   help="comma-separated registered losses (default: the four with goals)")
    p.add_argument("--out", type=Path, default=Path("reports/perf/kernels.md"))
