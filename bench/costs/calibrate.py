"""Taking the measurements a plan lacks: cheapest kinds first, one progress line each with an ETA.

:func:`calibrate` measures every entry a plan lacks (:func:`bench.costs.plan.missing`) on the
calibration's device with :func:`bench.costs.measure.measure_many` and saves the cache after
each, so an interrupted calibration keeps what it measured and the same command resumes
where it stopped. Losses are measured :data:`LOSS_BATCH` at a time in one child.

Progress: after each measurement one line, e.g.::

    calibrating 14/61 (23%), 0:42 elapsed, ETA 1:51: model_step MLP 1024-512-256, batch 16 x 200 in 2.4 s

A measurement that runs longer than :data:`HEARTBEAT_S` says so every :data:`HEARTBEAT_S`
seconds until it ends, e.g. ``calibrating 169/182: still measuring gbdt xgboost rank:ndcg,
2:00 so far`` (a paper-scale GBDT or model measurement can take minutes; the plan is never
silent longer than that).

The ETA is the time left of every remaining measurement at :data:`PRIOR_SECONDS` (each kind's
cost on the 2-core reference machine, idle) scaled by how the measurements so far compared
with theirs: a loaded or faster machine corrects it as it goes.

On the CPU with one thread per job, where measurements time CPU seconds, as many batches run
side by side as there are cores (:func:`side_by_side`): on 2 cores the calibration takes half
the time. An interrupt (Ctrl-C, ``SIGINT``) stops the measurements under way at once: their
processes are killed and reaped (:class:`bench.perf.process.Child`), the generated data
removed, what was measured before kept; ``ltr-bench plan`` prints one line saying so.
"""

from __future__ import annotations

import functools
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.costs.calibration import Calibration, Device, cpu_timed
from bench.costs.fakedata import Workspace
from bench.errors import CalibrationFailed
from bench.perf.process import Child, start_child

#: the order kinds are measured in (cheap and widely shared first, so that an interrupted
#: calibration has projected the most jobs), and each one's seconds on the reference machine
#: (the paper profile's calibration, CPU seconds per measurement)
PRIOR_SECONDS: dict[str, float] = {
    "process": 6.8, "loss_step": 0.41, "model_step": 1.0, "neural_eval": 0.5, "summary": 2.6,
    "neural_data": 0.53, "evaluate": 1.1, "linear": 1.1, "prepare": 7.2, "gbdt": 6.6,
}
LOSS_BATCH = 24  # losses measured in one child (one progress line)
HEARTBEAT_S = 30.0  # the longest silence while a measurement runs

Needed = dict[str, tuple[str, dict[str, Any]]]  # entry key -> (kind, spec)
MeasureMany = Callable[..., list[dict[str, Any]]]


def batches(needed: Needed) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """``(kind, [(key, spec), ...])`` in the order they are measured: by :data:`PRIOR_SECONDS`'
    order of kinds, then by key; batched kinds in groups of :data:`LOSS_BATCH`, others alone."""
    from bench.costs.measure import BATCHED

    order = {kind: i for i, kind in enumerate(PRIOR_SECONDS)}
    items = sorted(needed.items(), key=lambda kv: (order.get(kv[1][0], len(order)), kv[0]))
    out: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = []
    for key, (kind, spec) in items:
        if out and out[-1][0] == kind and kind in BATCHED and len(out[-1][1]) < LOSS_BATCH:
            out[-1][1].append((key, spec))
        else:
            out.append((kind, [(key, spec)]))
    return out


class Progress:
    """Counts measurements and projects the time left (module docstring)."""

    def __init__(self, needed: Needed, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = len(needed)
        self.prior_left = sum(PRIOR_SECONDS.get(kind, 5.0) for kind, _ in needed.values())
        self.prior_done = 0.0
        self.done = 0
        self.clock = clock
        self.started = clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def advance(self, kinds: list[str]) -> None:
        prior = sum(PRIOR_SECONDS.get(kind, 5.0) for kind in kinds)
        self.done += len(kinds)
        self.prior_done += prior
        self.prior_left -= prior

    def eta(self) -> float:
        """Seconds left: the remaining priors at the pace measured so far."""
        pace = self.elapsed() / self.prior_done if self.prior_done > 0 else 1.0
        return max(0.0, self.prior_left * pace)

    def line(self, what: str, seconds: float) -> str:
        return (f"calibrating {self.done}/{self.total} ({100 * self.done / max(self.total, 1):.0f}%), "
                f"{clock_text(self.elapsed())} elapsed, ETA {clock_text(self.eta())}: {what} in {seconds:.1f} s")


class Heartbeat:
    """While measurements run, one line per :data:`HEARTBEAT_S` for each that has run that long
    (a thread: the measurements run in children or, with one worker, in this thread)."""

    def __init__(self, progress: Progress, log: Callable[[str], None], every: float = HEARTBEAT_S) -> None:
        self.progress, self.log, self.every = progress, log, every
        self.running: dict[int, tuple[Callable[[], str], float]] = {}  # id -> (what, started on progress.clock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="calibration-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            now = self.progress.clock()
            for what, started in list(self.running.values()):
                if now - started >= self.every:
                    self.log(f"calibrating {self.progress.done}/{self.progress.total}: still measuring {what()}, "
                             f"{clock_text(now - started)} so far")


def clock_text(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour).

    >>> clock_text(61.4), clock_text(3725)
    ('1:01', '1:02:05')
    """
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def side_by_side(device: Device) -> int:
    """How many measurements run at once: one per usable core for a calibration that times
    CPU seconds (:func:`~bench.costs.calibration.cpu_timed`: a measurement's CPU seconds hardly
    change with another beside it, its peak memory is its own process's), else one (wall-clock
    times would include the other's)."""
    if not cpu_timed(device.kind, device.threads):
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def calibrate(calibration: Calibration, needed: Needed, *, log: Callable[[str], None],
              measure_many: MeasureMany | None = None, clock: Callable[[], float] = time.monotonic,
              workers: int | None = None, heartbeat_s: float = HEARTBEAT_S) -> Progress:
    """Measure every needed entry on the calibration's device, saving after each batch.

    ``workers`` batches run side by side (default :func:`side_by_side`), each in a forked
    process that leads its own process group (its measurements' children are in it), so an
    interrupt kills them all. ``measure_many`` defaults to
    :func:`bench.costs.measure.measure_many` (tests pass a fake; with one worker it runs in
    this process). Returns the progress (measurements taken, time); an interrupt propagates
    after the measurements under way are stopped (module docstring). A measurement running
    longer than ``heartbeat_s`` says so every ``heartbeat_s`` (:class:`Heartbeat`)."""
    if measure_many is None:
        from bench.costs import measure

        measure_many = measure.measure_many
    dev = calibration.device
    workers = side_by_side(dev) if workers is None else workers
    progress = Progress(needed, clock)
    queue = batches(needed)
    running: dict[int, tuple[Child, str, list[tuple[str, dict[str, Any]]], float]] = {}

    def failed(kind: str, group: list[tuple[str, dict[str, Any]]], exc: RuntimeError) -> CalibrationFailed:
        last = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), type(exc).__name__)
        kept = f"kept in {calibration.path}" if calibration.path is not None else "not saved (no cache file)"
        return CalibrationFailed(f"measuring {describe(kind, [spec for _, spec in group])} failed: {last} "
                                 f"({len(calibration.entries)} measurement(s) {kept}; the same command resumes)")

    def finished(kind: str, group: list[tuple[str, dict[str, Any]]], results: list, started: float) -> None:
        seconds = clock() - started
        for (_, spec), result in zip(group, results):
            calibration.put(kind, spec, result, seconds / len(group))
        calibration.save()
        progress.advance([kind] * len(group))
        log(progress.line(describe(kind, [spec for _, spec in group]), seconds))

    def what(kind: str, group: list[tuple[str, dict[str, Any]]]) -> Callable[[], str]:
        return lambda: describe(kind, [spec for _, spec in group])  # only said of a long one

    with Workspace() as workspace, Heartbeat(progress, log, heartbeat_s) as beat:
        try:
            while queue or running:
                if workers == 1:  # in this process: one batch after the other
                    kind, group = queue.pop(0)
                    started = clock()
                    beat.running[0] = (what(kind, group), started)
                    try:
                        results = measure_many(kind, [s for _, s in group], device=dev.kind, threads=dev.threads,
                                               workspace=workspace)
                    except RuntimeError as exc:
                        raise failed(kind, group, exc) from exc
                    finally:
                        beat.running.pop(0, None)
                    finished(kind, group, results, started)
                    continue
                while queue and len(running) < workers:
                    kind, group = queue.pop(0)
                    child = start_child(functools.partial(measure_many, kind, [s for _, s in group], device=dev.kind,
                                                          threads=dev.threads, workspace=workspace), group=True)
                    running[child.fd] = (child, kind, group, clock())
                    beat.running[child.fd] = (what(kind, group), running[child.fd][3])
                ready, _, _ = select.select(list(running), [], [])
                for fd in ready:
                    child, kind, group, started = running[fd]
                    if child.read_some():
                        del running[fd]
                        beat.running.pop(fd, None)
                        try:
                            results = child.result()
                        except RuntimeError as exc:
                            raise failed(kind, group, exc) from exc
                        finished(kind, group, results, started)
        finally:
            for child, *_ in running.values():
                child.kill()
    return progress


def describe(kind: str, specs: list[dict[str, Any]]) -> str:
    """What a batch measured, in a few words."""
    spec = specs[0]
    if kind == "loss_step":
        names = sorted({s["loss"] for s in specs})
        return f"loss_step x{len(specs)} ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"
    if kind == "model_step":
        return f"model_step {_model(spec['model'])}, batch {spec['batch_size']} x {spec['list_size']}"
    if kind == "neural_eval":
        return f"neural_eval {_model(spec['model'])}, lists of {spec['width']}"
    if kind == "gbdt":
        return f"gbdt {spec['method'].get('gbdt')} {spec['method'].get('objective')}"
    if "sizes" in spec:
        unit = "queries" if kind == "summary" else "documents"
        return f"{kind} at {' and '.join(f'{n:,}' for n in spec['sizes'])} {unit}"
    return kind


def _model(model: dict[str, Any]) -> str:
    if model.get("type", "mlp") == "mlp":
        return "MLP " + ("-".join(map(str, model.get("hidden", []))) or "linear")
    return f"context-aware {model.get('input_proj')}/{model.get('hidden')}"
