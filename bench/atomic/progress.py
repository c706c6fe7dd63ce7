"""A running job's progress: the log line and the record ``ltr-bench status`` reads.

A run that takes hours must say how far it is and when it will end, in two places:

- **a line on stderr** (the job's log in the workflow), at least every
  :func:`interval_seconds` (:data:`INTERVAL_S`, 30 s; the environment variable
  :data:`INTERVAL_ENV` ``LTR_BENCH_PROGRESS_SECONDS`` overrides it, the tests set it small)
  from the job's start, and, for a neural run, after every validation; :func:`format_line`
  writes it;
- **a record file** next to the run directory, :func:`progress_path` ``(run_dir)`` =
  ``.<run dir name>.progress.json`` (outside the run directory, which is written atomically
  at the end), rewritten (:func:`write_progress`, atomic) with every line. The trainer
  removes it (:func:`clear_progress`) once the run directory is written; a record that
  stays behind names a run that failed or was killed. :func:`read_progress` is the reader.

The record (one JSON object)::

    {"kind": "neural" | "gbdt" | "linear" | "sinkprop_protocol", "pid": int, "host": str,
     "started": unix time, "updated": unix time, "unit": "step" | "round" | "penalty",
     "done": int, "total": int, "epoch": int | null, "epochs": int | null,
     "elapsed_s": float, "eta_s": float | null, "eta_is_upper_bound": bool, "docs_per_s": float | null,
     "vali": {"metric": str, "value": float, "best": float, "best_at": int} | null, "phase": str | null}

``started`` is when this process started the run (a resumed run restarts it), ``elapsed_s``
counts every process segment of the run; ``epoch`` is the 1-based epoch being trained or just
validated (null for GBDT); ``eta_s`` is null until a rate is measured, and for a neural run
leaves out the validation and test passes until the first validation has been timed (its
line says so); ``eta_is_upper_bound`` is true when early stopping may end the run sooner; ``best_at`` is the epoch (neural) or the
1-based round (GBDT) of the best validation value. ``total`` is 0 while it is not known yet
(a neural run's steps, before its fold is loaded). ``phase`` is what the job does outside
its counted steps or rounds (``loading the fold``, ``building XGBoost's matrices``,
``scoring the test split``, ...), null while it counts them. The trainers' bookkeeping (what
is recent, what is left) lives with them (:mod:`bench.training.loop`,
:mod:`bench.training.gbdt`); :class:`Reporter` is what both share: when a line is due, the
line, the file.

**From the start, whatever the job does.** A trainer opens its :class:`Reporter` as the job
starts (``with Reporter(...) as reporter:``), before it loads the fold: the first line and
record come at once (the phase ``loading the fold``), and a heartbeat thread writes a line
whenever the interval has passed without one, with the counts of the last line brought up to
date (elapsed, ETA less the time since) and the phase of the moment. So a job says where it is
at least every interval even while a library call runs for minutes (XGBoost building its
matrices from a large fold, LightGBM binning inside its first round), which no callback of
ours could report. The thread sleeps until the next line is due (the interval after the last
line, whoever wrote it), and takes the GIL only for that line: the libraries' long calls
release it (ctypes, torch, NumPy). With an interval of 0 (a line at every step or round) the
heartbeat is off. Nothing here imports torch, and writing the record is cheap (once per
line), so none of it can change a run's results.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.atomic import write_json
from bench.errors import BenchError

INTERVAL_S = 30.0
INTERVAL_ENV = "LTR_BENCH_PROGRESS_SECONDS"
KINDS = ("neural", "gbdt", "linear", "sinkprop_protocol", "fetch", "prepare")  # the last two: lines only


def interval_seconds() -> float:
    """Seconds between two progress lines: ``$LTR_BENCH_PROGRESS_SECONDS``, else :data:`INTERVAL_S`.

    A value that is not a number >= 0 is ignored (the default applies): a typo in an
    environment variable must not stop a run.
    """
    raw = os.environ.get(INTERVAL_ENV)
    try:
        value = float(raw) if raw is not None else INTERVAL_S
    except ValueError:
        return INTERVAL_S
    return value if math.isfinite(value) and value >= 0 else INTERVAL_S


def progress_path(run_dir: str | os.PathLike) -> Path:
    """The record of ``run_dir``: the sibling ``.<name>.progress.json``.

    >>> progress_path("results/runs/x/seed0").as_posix()
    'results/runs/x/.seed0.progress.json'
    """
    out_dir = Path(run_dir)
    return out_dir.with_name(f".{out_dir.name}.progress.json")


def write_progress(run_dir: str | os.PathLike, record: dict[str, Any]) -> None:
    """(Re)write the record of ``run_dir`` atomically (a reader never sees half a file)."""
    write_json(progress_path(run_dir), record)


def read_progress(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The record of ``run_dir``; None when there is none, or when it is not a JSON object.

    A corrupt record (which the atomic writer does not produce, but a full disk or a hand
    edit might) reads as None rather than raising: ``status`` shows what it can.
    """
    try:
        record = json.loads(progress_path(run_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def clear_progress(run_dir: str | os.PathLike) -> None:
    """Remove the record of ``run_dir`` (the run directory has been written)."""
    progress_path(run_dir).unlink(missing_ok=True)


def format_duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``12.3s``; ``?`` when unknown.

    >>> format_duration(3725), format_duration(185), format_duration(12.34), format_duration(None)
    ('1h02m', '3m05s', '12.3s', '?')
    """
    if seconds is None or not math.isfinite(seconds):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def format_line(record: dict[str, Any], *, label: str = "", unit_s: float | None = None,
                extra: str = "") -> str:
    """The log line of a record (``unit_s``: recent seconds per step or round, when known).

    >>> rec = {"unit": "round", "done": 40, "total": 500, "epoch": None, "epochs": None,
    ...        "elapsed_s": 61.0, "eta_s": 700.0, "eta_is_upper_bound": True, "docs_per_s": None,
    ...        "vali": {"metric": "ndcg@10", "value": 0.41, "best": 0.42, "best_at": 35}}
    >>> format_line(rec, label="xgboost", unit_s=1.52)  # doctest: +NORMALIZE_WHITESPACE
    'progress xgboost: round 40/500 (8.0%), 1.52 s/round, elapsed 1m01s,
     ETA <= 11m40s (upper bound: early stopping may end sooner), vali ndcg@10 0.41000 (best 0.42000 @ round 35)'

    Before the first step or round, a phase is all there is to say:

    >>> format_line({"unit": "round", "done": 0, "total": 500, "elapsed_s": 30.2, "phase": "loading the fold"},
    ...             label="xgboost")
    'progress xgboost: loading the fold, elapsed 30.2s'
    """
    head = f"progress {label}: " if label else "progress: "
    phase = record.get("phase")
    if phase and not record["done"]:
        return head + f"{phase}, elapsed {format_duration(record['elapsed_s'])}" + (f", {extra}" if extra else "")
    unit, done, total = record["unit"], record["done"], record["total"]
    parts = [f"{unit} {done}/{total} ({100.0 * done / max(total, 1):.1f}%)"]
    if record.get("epoch") is not None:
        parts.append(f"epoch {record['epoch']}/{record['epochs']}")
    if unit_s is not None:
        parts.append(f"{unit_s:.3g} s/{unit}")
    if record.get("docs_per_s") is not None:
        parts.append(f"{record['docs_per_s']:,.0f} docs/s")
    parts.append(f"elapsed {format_duration(record['elapsed_s'])}")
    if record["eta_is_upper_bound"]:
        parts.append(f"ETA <= {format_duration(record['eta_s'])} (upper bound: early stopping may end sooner)")
    else:
        parts.append(f"ETA {format_duration(record['eta_s'])}")
    vali = record.get("vali")
    if vali is not None:
        at = "epoch" if unit == "step" else "round"
        parts.append(f"vali {vali['metric']} {vali['value']:.5f} (best {vali['best']:.5f} @ {at} {vali['best_at']})")
    if phase:
        parts.append(phase)
    return head + ", ".join(parts) + (f", {extra}" if extra else "")


class Reporter:
    """When a line is due, and writing it: the record file always, the stderr line when ``echo``.

    ``run_dir`` None writes no file (a caller that only wants lines). ``clock`` is the
    monotonic clock the interval is measured on (the tests may pass their own). ``total``:
    the steps or rounds the job will count, 0 while unknown. ``phase``: what the job does
    first (see the module docstring). As a context manager (``with Reporter(...) as r:``) it
    writes the first line and record at once (``opening``; else the first comes one interval
    in: a job that is often quick, e.g. ``fetch`` of a verified archive, then says nothing
    more than before, its one-line errors included) and runs the heartbeat until the block ends.
    """

    def __init__(self, run_dir: str | os.PathLike | None, *, kind: str, unit: str, label: str = "",
                 echo: bool = True, clock: Callable[[], float] = time.perf_counter, total: int = 0,
                 phase: str | None = None, opening: bool = True) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.kind, self.unit, self.label, self.echo, self.clock = kind, unit, label, echo, clock
        self.total, self.phase, self.opening = total, phase, opening
        self.interval = interval_seconds()
        self.started = time.time()
        self.t0 = clock()  # the job's start on ``clock``
        self.last_line = -math.inf  # clock time of the last line
        self.last: dict[str, Any] | None = None  # the counted fields and unit_s of the last line
        self._lock = threading.RLock()  # the heartbeat thread and the trainer both write lines
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def due(self) -> bool:
        """Whether the interval has passed since the last line (always true before the first)."""
        return self.clock() - self.last_line >= self.interval

    def emit(self, *, unit_s: float | None = None, extra: str = "", **fields: Any) -> dict[str, Any]:
        """Write the record (``fields`` + who/when + the phase) and, with ``echo``, its line; return it."""
        with self._lock:
            record = {"kind": self.kind, "pid": os.getpid(), "host": socket.gethostname(), "started": self.started,
                      "updated": time.time(), "unit": self.unit, **fields, "phase": self.phase}
            if self.run_dir is not None:
                write_progress(self.run_dir, record)
            if self.echo:
                print(format_line(record, label=self.label, unit_s=unit_s, extra=extra), file=sys.stderr, flush=True)
            self.last_line = self.clock()
            self.last = {"fields": fields, "unit_s": unit_s, "at": self.last_line}
            return record

    def beat(self) -> dict[str, Any] | None:
        """A line when the interval has passed without one: the last line's counts brought up to
        date (elapsed plus, ETA less, the time since; the phase of the moment); None when not due."""
        with self._lock:
            if not self.due():
                return None
            now = self.clock()
            if self.last is None:
                return self.emit(done=0, total=self.total, epoch=None, epochs=None, elapsed_s=now - self.t0,
                                 eta_s=None, eta_is_upper_bound=False, docs_per_s=None, vali=None)
            fields, since = dict(self.last["fields"]), now - self.last["at"]
            fields["elapsed_s"] = fields["elapsed_s"] + since
            if fields["eta_s"] is not None:
                fields["eta_s"] = max(0.0, fields["eta_s"] - since)
            return self.emit(unit_s=self.last["unit_s"], **fields)

    def heartbeat(self, wait: Callable[[float], bool]) -> None:
        """The heartbeat's loop: sleep until a line is due, :meth:`beat`, again, until ``wait``
        (sleeping for its argument, in seconds) returns True (stop)."""
        while True:
            with self._lock:
                left = self.interval - (self.clock() - self.last_line)
            if wait(max(left, 0.0)):
                return
            try:
                self.beat()
            except BenchError as exc:  # the record cannot be written (a full disk): the trainer will say so too
                print(f"progress {self.label}: no more heartbeat lines: {exc}", file=sys.stderr, flush=True)
                return

    def __enter__(self) -> Reporter:
        if self.opening:
            self.beat()  # the first line, at the job's start
        else:
            self.last_line = self.clock()  # the first line one interval in: a quick job stays silent
        if self.interval > 0:
            self._thread = threading.Thread(target=self.heartbeat, args=(self._stop.wait,), daemon=True,
                                            name="progress-heartbeat")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def clear(self) -> None:
        """Remove the record (the run directory has been written)."""
        if self.run_dir is not None:
            clear_progress(self.run_dir)
