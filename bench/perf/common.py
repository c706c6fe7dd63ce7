"""Shared pieces of the ``ltr-bench perf`` suites: peak memory, devices, tables, targets.

Every suite returns a :class:`SuiteResult` (its markdown, the performance targets it could
evaluate, an exit status); targets are printed as met / MISSED with the measured number and
never asserted.

Peak memory on CPU is the kernel's resident-set high-water mark: :meth:`PeakMemory.start`
hands freed heap pages back (``malloc_trim``), resets ``VmHWM`` by writing ``5`` to
``/proc/self/clear_refs`` and reads ``VmRSS``; :meth:`PeakMemory.stop` reads ``VmHWM``.
Peak = HWM - RSS before: the extra resident memory the measured code needed at its high
point (page granular, torch or not). On CUDA it is ``max_memory_allocated`` minus the
allocation before.

>>> md_table(["a", "b"], [["1", "x|y"]])
'| a | b |\\n|---|---|\\n| 1 | x\\\\|y |'
>>> Target("metrics on a fold", "0.4 s", "<= 1 s", True).line()
'- metrics on a fold: 0.4 s (target <= 1 s): met'
"""

from __future__ import annotations

import gc
import os
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

from bench.errors import UsageError
from bench.perf.process import status_kib, trim_heap

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Target:
    """One performance target: what, the measured value, the goal, and whether it is met."""

    what: str
    measured: str
    goal: str
    met: bool

    def line(self) -> str:
        return f"- {self.what}: {self.measured} (target {self.goal}): {'met' if self.met else 'MISSED'}"


@dataclass
class SuiteResult:
    """What a suite run produced: markdown (already written to ``outputs``), targets, status."""

    suite: str
    markdown: str
    targets: list[Target] = field(default_factory=list)
    rc: int = 0
    outputs: list[Path] = field(default_factory=list)


def targets_section(targets: list[Target]) -> list[str]:
    """Markdown lines of a ``## Targets`` section (empty when nothing was evaluated)."""
    return ["", "## Targets", "", *(t.line() for t in targets)] if targets else []


# --------------------------------------------------------------------------- memory


class PeakMemory:
    """Peak extra memory of the code between :meth:`start` and :meth:`stop`."""

    def __init__(self, device: torch.device):
        self.device = device
        self.method = "cuda max_memory_allocated" if device.type == "cuda" else "RSS high-water mark (/proc VmHWM)"
        self._base: int | None = None

    def start(self) -> None:
        gc.collect(0)  # a full collection costs ~0.2 s with torch loaded; young cycles suffice
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return
        trim_heap()
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
                fh.write("5")
            self._base = status_kib("VmRSS")
        except OSError:
            self._base = None

    def stop(self) -> float | None:
        """Peak in MiB (``None`` when the platform cannot tell)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return (torch.cuda.max_memory_allocated(self.device) - self._base) / 2**20
        peak = status_kib("VmHWM")
        if self._base is None or peak is None:
            return None
        return max(peak - self._base, 0) / 1024


def sync(device: torch.device) -> None:
    """Wait for queued CUDA work (timings must include it); a no-op on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- arguments


def parse_int_list(text: str, option: str, minimum: int) -> list[int]:
    """Comma-separated integers ``>= minimum``; a clear :class:`UsageError` otherwise.

    >>> parse_int_list("125, 1000", "--lengths", 2)
    [125, 1000]
    """
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise UsageError(f"{option} must be comma-separated integers, got {text!r}") from exc
    if not values or min(values) < minimum:
        raise UsageError(f"{option} needs values >= {minimum}, got {text!r}")
    return values


# --------------------------------------------------------------------------- formatting


def loadavg() -> str:
    """``/proc/loadavg``'s 1/5/15-minute load averages (``n/a`` elsewhere)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "n/a"


def fmt(x: float | None, digits: int = 4) -> str:
    """Compact number for tables: ``n/a`` for unknown, 4 significant digits.

    >>> fmt(0.000123456), fmt(None), fmt(123456.0)
    ('0.0001235', 'n/a', '1.235e+05')
    """
    if x is None:
        return "n/a"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.3e}"


def md_table(columns: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table (``|`` inside cells escaped)."""
    head = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    body = ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(head + body)


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def machine_line(device: torch.device) -> str:
    """Device, CPU, core count, torch version and threads, for table headers."""
    cpu = platform.processor() or platform.machine()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu
    return (f"device {device} ({name}), {os.cpu_count()} CPU cores visible, torch {torch.__version__}, "
            f"{torch.get_num_threads()} torch threads, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")


__all__ = ["PeakMemory", "SuiteResult", "Target", "fmt", "loadavg", "machine_line", "md_table", "now_utc",
           "parse_int_list", "sync", "targets_section"]
