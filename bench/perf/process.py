"""Process-level measurement: resident size, its peak, and a function run in a forked child.

Torch-free, so that what plans a study (:mod:`bench.costs`, which the Snakefile imports) can
use it as the suites do. Linux only (``/proc``, ``fork``).

- :func:`rss_bytes` / :func:`peak_bytes`: the kernel's ``VmRSS`` and ``VmHWM`` of this process;
- :func:`reset_peak`: write ``5`` to ``/proc/self/clear_refs``, which resets ``VmHWM`` to the
  current resident size, so that a peak measured afterwards is that of the code measured;
- :func:`trim_heap`: hand freed heap pages back to the kernel (glibc ``malloc_trim``), so that
  pages a previous measurement freed are not already resident (and uncounted) in the next;
- :func:`keep_freed_heap`: let glibc keep freed heap memory instead of handing it back after
  every large free (a training step's temporaries were faulted back in at every step);
- :func:`in_child`: run a function in a forked child and return its JSON-able result: a
  measurement's peak starts from the child's resident size at fork and cannot inflate the next.
  The child is always reaped, also when the parent is interrupted (``KeyboardInterrupt``):
  it is killed first, so that no measurement outlives the command that started it;
  :func:`start_child` starts one without waiting (several side by side), optionally as the
  leader of its own process group, killed with everything it started.
"""

from __future__ import annotations

import contextlib
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


# glibc malloc's thresholds for a process that allocates and frees the same large temporaries at
# every step (keep_freed_heap): blocks up to MMAP_THRESHOLD come from the heap (the most glibc's
# own sliding threshold reaches), and the heap's free top goes back to the kernel only past
# TRIM_THRESHOLD (glibc slides it to twice the mmap threshold: a few MB)
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


def keep_freed_heap() -> bool:
    """Keep freed memory on the heap for reuse instead of giving it back to the kernel at once.

    glibc returns the free top of the heap to the kernel whenever more than its trim threshold
    is free, and that threshold slides to twice the largest block it last freed by ``munmap``
    (a few MB). A training step frees its temporaries when it ends and allocates them again in
    the next, so every step handed the same pages back and faulted them in anew: a PL-Rank run
    of the default study's syn-web protocol took 520,000 page faults and 1.5-1.9 s of system
    time in 6-7 s, Gumbel NeuralSort 390,000 and 1.2 s; with the thresholds fixed here, 7,000
    and 0.03 s. Allocation only: no value changes, and the peak resident size is the same
    (the freed memory was part of the peak already; :func:`trim_heap` still returns it on
    demand). True when set; False without glibc (nothing changed).
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


class Child:
    """A function running in a forked child (:func:`start_child`); :meth:`result` waits for it."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self._chunks: list[bytes] = []

    def read_some(self) -> bool:
        """Read what the child has written; True once it has closed its end (finished)."""
        chunk = os.read(self.fd, 1 << 16)
        if chunk:
            self._chunks.append(chunk)
            return False
        return True

    def result(self) -> Any:
        """Wait for the child and return its result (RuntimeError with its traceback if it failed);
        an exception here (an interrupt) kills the child and its process group first."""
        try:
            while not self.read_some():
                pass
            _, status = os.waitpid(self.pid, 0)
        except BaseException:
            self.kill()
            raise
        finally:
            os.close(self.fd)
        text = b"".join(self._chunks).decode()
        if not text:
            raise RuntimeError(f"measurement child died (wait status {status}) before reporting")
        payload = json.loads(text)
        if "error" in payload:
            raise RuntimeError("measurement failed in the child process:\n" + payload["error"])
        return payload["ok"]

    def kill(self) -> None:
        """Kill the child, and every process it started when it leads its own group; reap it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(self.pid) == self.pid:
                os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def start_child(fn: Callable[[], Any], *, before: Callable[[], None] | None = None, group: bool = False) -> Child:
    """Fork a child running ``fn`` (then ``os._exit``); its JSON-able result comes back through a pipe.

    ``before`` runs first in the child (e.g. setting its compute threads). The child's stdout
    and stderr go to ``/dev/null`` (the code measured may log progress) and it ignores SIGINT
    (the parent decides, and kills it). ``group``: the child leads a new process group, so that
    :meth:`Child.kill` takes the processes it starts with it.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's stack
        os.close(r)
        if group:
            os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
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
    if group:
        with contextlib.suppress(OSError):  # set here too: no race with a kill before the child ran
            os.setpgid(pid, pid)
    return Child(pid, r)


def in_child(fn: Callable[[], Any], *, before: Callable[[], None] | None = None) -> Any:
    """Run ``fn`` in a forked child and wait: its JSON-able result, or RuntimeError with its
    traceback. A ``KeyboardInterrupt`` (or any exception) in the parent while it waits kills
    the child and reaps it before it propagates."""
    return start_child(fn, before=before).result()
