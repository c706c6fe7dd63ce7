"""The calibration cache: what was measured on which device, and what each job needs measured.

A device's measurements live in one JSON file, ``results/calibration/<device>.json``
(:func:`device_slug`: ``cpu-<model>-t<threads>`` or ``cuda-<gpu name>``)::

    {"format": 1, "device": {"kind": "cpu", "name": "...", "threads": 1},
     "entries": {"<kind>:<hash of spec>": {"kind": ..., "spec": {...}, "result": {...},
                 "measured_at": "...", "seconds": ...}}}

An entry is keyed by what it measured (:func:`entry_key`: the measurement kind and the hash of
its spec), so the same model, loss and batch shape on the same data shape is measured once and
reused by every job, table and later plan that needs it. ``ltr-bench plan`` adds the entries
a plan lacks (:mod:`bench.costs.measure` measures them); the workflow's cluster requests
read the file of the device their jobs run on (:func:`find_calibration`). Reading checks the
format and the device; a file that does not parse is reported, never silently replaced.

Which file a workflow run uses: ``$LTR_BENCH_CALIBRATION`` (a path; ``off``: none, every job
gets :data:`bench.cluster.SIZES`) when set, else the newest
file under ``results/calibration/`` of the device kind the jobs run on (``cuda`` when the
config says ``gpu: true``, else ``cpu``) with the config's ``threads``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.atomic import write_json
from bench.errors import UsageError
from bench.provenance import canonical_json

FORMAT = 1
CALIBRATION_DIR = Path("results/calibration")
ENV_FILE = "LTR_BENCH_CALIBRATION"


@dataclass(frozen=True)
class Device:
    """Where jobs run: ``cpu`` with a thread count, or ``cuda`` (one GPU)."""

    kind: str
    name: str
    threads: int

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "threads": self.threads}


def cpu_timed(kind: str, threads: int) -> bool:
    """Whether a calibration of ``kind`` with ``threads`` per job times CPU seconds (one thread on
    the CPU: :func:`bench.costs.measure.clock_for` says why) rather than wall-clock seconds."""
    return kind == "cpu" and int(threads) == 1


def device_slug(device: Device) -> str:
    """File name stem of a device's calibration.

    >>> device_slug(Device("cpu", "AMD EPYC 9B14 (2 logical cores)", 1))
    'cpu-amd-epyc-9b14-2-logical-cores-t1'
    """
    name = re.sub(r"[^a-z0-9]+", "-", device.name.lower()).strip("-")
    return f"{device.kind}-{name}" + (f"-t{device.threads}" if device.kind == "cpu" else "")


def entry_key(kind: str, spec: dict[str, Any]) -> str:
    """``<kind>:<first 16 hex digits of sha256(canonical spec)>``."""
    return f"{kind}:{hashlib.sha256(canonical_json(spec).encode()).hexdigest()[:16]}"


@dataclass
class Calibration:
    """One device's measurements (see the module docstring); ``path`` None: not saved."""

    device: Device
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path | None = None

    def get(self, kind: str, spec: dict[str, Any]) -> dict[str, Any] | None:
        entry = self.entries.get(entry_key(kind, spec))
        return None if entry is None else entry["result"]

    def put(self, kind: str, spec: dict[str, Any], result: dict[str, Any], seconds: float) -> None:
        self.entries[entry_key(kind, spec)] = {
            "kind": kind, "spec": spec, "result": result, "seconds": round(seconds, 3),
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}

    def save(self) -> None:
        if self.path is None:
            raise ValueError("this calibration has no file")
        write_json(self.path, {"format": FORMAT, "device": self.device.as_dict(), "entries": self.entries})


def load_calibration(path: str | os.PathLike) -> Calibration:
    """Read a calibration file; errors name the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        device = Device(**data["device"])
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, this code reads {FORMAT}")
        return Calibration(device, dict(data["entries"]), path)
    except FileNotFoundError:
        raise UsageError(f"{path}: calibration file not found") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a calibration file ({exc}); delete it to measure again") from exc


def open_calibration(device: Device, folder: str | os.PathLike = CALIBRATION_DIR) -> Calibration:
    """The device's calibration under ``folder`` (empty when it has none yet)."""
    path = Path(folder) / f"{device_slug(device)}.json"
    if path.exists():
        cal = load_calibration(path)
        if cal.device.kind != device.kind or cal.device.name != device.name:
            raise UsageError(f"{path}: measured on {cal.device.name}, not {device.name}")
        return cal
    return Calibration(device, {}, path)


def find_calibration(kind: str, threads: int, folder: str | os.PathLike = CALIBRATION_DIR,
                     environ: dict[str, str] | None = None) -> Calibration | None:
    """The calibration a workflow run sizes its ``kind`` jobs from (module docstring); None if none."""
    env = os.environ if environ is None else environ
    if env.get(ENV_FILE) == "off":
        return None
    if env.get(ENV_FILE):
        return load_calibration(env[ENV_FILE])
    candidates = []
    for path in Path(folder).glob(f"{kind}-*.json"):
        try:
            cal = load_calibration(path)
        except UsageError:
            continue
        if cal.device.kind == kind and (kind != "cpu" or cal.device.threads == threads):
            candidates.append((path.stat().st_mtime, str(path), cal))
    return max(candidates)[2] if candidates else None
