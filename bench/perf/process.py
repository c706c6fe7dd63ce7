"""Process-level measurement: resident size, its peak, and a function run in a forked child.

Torch-free, so that what plans a study (:mod:`bench.costs`, which the Snakefile imports) can
use it as the suites do. Linux only (``/proc``, ``fork``).

- :func:`rss_bytes` / :func:`peak_bytes`: the kernel's ``VmRSS`` and ``VmHWM`` of this process;
- :func:`reset_peak`: write ``5`` to ``/proc/self/clear_refs``, which resets ``VmHWM`` to the
  current resident size, so that a peak measured afterwards is that of the code measured;
- :func:`trim_heap`: hand freed heap pages back to the kernel (glibc ``malloc_trim``), so that
  pages a previous measurement freed are not already resident (and uncounted) in the next;
- :func:`in_child`: run a function in a forked child and return its JSON-able result: a
  measurement's peak starts from the child's resident size at fork and cannot inflate the next.
  The child is always reaped, also when the parent is interrupted (``KeyboardInterrupt``):
  it is killed first, so that no measurement outlives the command that started it.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def status_kib(field: str) -> int | None:
    """A field of ``/proc/self/status`` in KiB (``VmRSS``, ``VmHWM``), None where there is none."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _status_bytes(field: str) -> int:
    kib = status_kib(field)
    if kib is None:
        raise RuntimeError(f"/proc/self/status has no {field} (process memory is measured on Linux only)")
    return kib * 1024


def rss_bytes() -> int:
    """Resident size of this process now."""
    return _status_bytes("VmRSS")


def peak_bytes() -> int:
    """Peak resident size of this process since it started or :func:`reset_peak`."""
    return _status_bytes("VmHWM")


def reset_peak() -> None:
    """Reset the kernel's peak resident size (``VmHWM``) to the current resident size."""
    Path("/proc/self/clear_refs").write_text("5")


def trim_heap() -> None:
    """Return freed heap memory to the kernel (a no-op without glibc)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def in_child(fn: Callable[[], Any], *, before: Callable[[], None] | None = None) -> Any:
    """Run ``fn`` in a forked child; its JSON-able result, or RuntimeError with its traceback.

    ``before`` runs first in the child (e.g. setting its compute threads). The child's stdout
    and stderr go to ``/dev/null`` (the code measured may log progress). A ``KeyboardInterrupt``
    (or any exception) in the parent while it waits kills the child and reaps it before it
    propagates.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's stack
        os.close(r)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it kills this child
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        try:
            if before is not None:
                before()
            payload = {"ok": fn()}
        except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
            payload = {"error": traceback.format_exc()}
        with os.fdopen(w, "w") as out:
            json.dump(payload, out)
        os._exit(0)
    os.close(w)
    reaped = False
    try:
        with os.fdopen(r) as inp:
            text = inp.read()
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        if not reaped:
            _kill(pid)
    if not text:
        raise RuntimeError(f"measurement child died (wait status {status}) before reporting")
    payload = json.loads(text)
    if "error" in payload:
        raise RuntimeError("measurement failed in the child process:\n" + payload["error"])
    return payload["ok"]


def _kill(pid: int) -> None:
    """Kill and reap a child (it may already be gone)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
