"""Provenance: canonical JSON, protocol hashes, and the facts a result depends on.

The **protocol** is what two runs must share for their per-query metrics to be compared:
preprocessing options, dataset and fold, list sizes, model, optimisation schedule, seed,
metric conventions. It excludes the method itself (loss name, loss hyperparameters and
temperature schedule; for GBDT the library, objective and its parameters), so a new loss
trained under the frozen protocol of the baselines gets the same hash. Its hash is the
sha256 of :func:`canonical_json`.

:func:`run_header` is the part of a run's ``run.json`` every run kind shares (identity,
resolved config, protocol and its hash, dataset fingerprint, git commit, library versions,
finish time); :mod:`bench.frozen` records the same git and library facts in its manifest.

>>> protocol_hash({"b": [1, 2.5], "a": "x"}) == protocol_hash({"a": "x", "b": (1, 2.5)})
True
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

_LIBRARIES = ("numpy", "scipy", "pandas", "pyarrow", "torch", "lightgbm", "xgboost", "ltr-bench")


def plain(obj: Any) -> Any:
    """Recursively turn tuples, numpy scalars and arrays into plain JSON types."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free, ASCII JSON; NaN/inf rejected (they have no canonical form).

    >>> canonical_json({"z": 1, "a": [True, None, 0.1]})
    '{"a":[true,null,0.1],"z":1}'
    """
    return json.dumps(plain(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def protocol_hash(protocol: dict[str, Any]) -> str:
    """sha256 hex digest of :func:`canonical_json` of ``protocol``."""
    return hashlib.sha256(canonical_json(protocol).encode("ascii")).hexdigest()


def git_commit(outside: str | Path | None = None) -> tuple[str, bool | None]:
    """``(commit, dirty)`` of the checkout holding this package, or ``("unknown", None)``;
    changes under ``outside`` (a folder the caller is about to rewrite: Snakemake deletes a job's
    old outputs before it runs, the committed frozen baselines among them) do not count."""
    root = Path(__file__).resolve().parent.parent
    spec = []
    if outside is not None:
        rel = os.path.relpath(Path(outside).resolve(), root)
        spec = [] if rel.startswith("..") else ["--", ".", f":(exclude){rel}"]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", *spec],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    return (head or "unknown"), bool(status.strip())


def library_versions() -> dict[str, str]:
    """Python, platform and the versions of the libraries a result depends on."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in _LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    if "torch" in sys.modules:
        import torch

        out["torch_cuda"] = str(torch.version.cuda)
    return out


def cpu_name() -> str:
    """CPU model name (from /proc/cpuinfo when available) and the logical core count."""
    return f"{_cpu_info()[0]} ({os.cpu_count()} logical cores)"


#: environment variables that pick the instruction set of torch's (ATen), MKL's and oneDNN's CPU
#: kernels: each changes the bits of a CPU training run (docs/compare.md, "What the bits depend on")
ISA_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
#: the libraries whose kernels compute a run (the others only read and write files)
_COMPUTING = ("python", "numpy", "scipy", "torch", "lightgbm", "xgboost")


def _cpu_info() -> tuple[str, list[str]]:
    """The CPU's model name and its SIMD instruction-set flags (``/proc/cpuinfo``; no flags elsewhere)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())  # the first processor's
    except OSError:
        pass
    flags = sorted(f for f in fields.get("flags", "").split() if f.startswith(("sse", "ssse", "avx", "amx", "fma", "f16c")))
    return fields.get("model name") or platform.processor() or platform.machine(), flags


def platform_facts(threads: int) -> dict[str, Any]:
    """What the bits of a CPU training run depend on besides the code, the protocol and the data.

    Measured on the default study (docs/compare.md, "What the bits depend on"): the same commit,
    libraries and data give bit-identical runs on one machine, and different bits when the
    instruction set of the floating-point kernels changes -- another CPU, or the same CPU told
    by :data:`ISA_VARIABLES` to use AVX2 kernels. So: the CPU model and its SIMD flags (which
    pick MKL's and ATen's kernels), ATen's chosen capability, the ISA variables set, the
    versions of the computing libraries, and torch's thread count (reduction order). The
    kernel version of ``platform.platform()`` is left out: it picks no kernel.
    """
    name, flags = _cpu_info()
    versions = library_versions()
    facts: dict[str, Any] = {
        "machine": platform.machine(),
        "cpu": name,
        "cpu_isa": flags,
        "isa_variables": {v: os.environ[v] for v in ISA_VARIABLES if v in os.environ},
        "libraries": {k: versions[k] for k in _COMPUTING},
        "torch_threads": int(threads),
    }
    try:
        import torch

        facts["torch_cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    except ImportError:  # torch is a dependency; without it nothing trains
        facts["torch_cpu_capability"] = "torch not installed"
    return facts


def host_peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def run_header(*, kind: str, identity: dict[str, Any], config: dict[str, Any], device_requested: str,
               protocol: dict[str, Any], fingerprint: str, prepared_dir) -> dict[str, Any]:
    """The part of ``run.json`` every run kind shares: identity (``dataset, fold, method,
    seed``), resolved config, protocol and its hash, dataset fingerprint, code and library
    versions, finish time. Trainers add their device, wall time, peak memory and result."""
    commit, dirty = git_commit()
    return {
        "kind": kind,
        "dataset": identity["dataset"],
        "fold": identity["fold"],
        "method": identity["method"],
        "seed": int(identity["seed"]),
        "config": {**config, "device_requested": device_requested},
        "protocol": protocol,
        "protocol_hash": protocol_hash(protocol),
        "dataset_fingerprint": fingerprint,
        "prepared_dir": str(Path(prepared_dir).resolve()),
        "git_commit": commit,
        "git_dirty": dirty,
        "versions": library_versions(),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
