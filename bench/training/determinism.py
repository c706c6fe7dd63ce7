"""Pinned kernels: CPU runs whose bits do not depend on the machine's instruction set.

A CPU run computes with kernels that its libraries pick from the CPU at run time: torch's own
(ATen: a scalar build and AVX2 / AVX-512 builds of every vectorised kernel) and MKL's matrix
products (one branch per instruction set, and on AMD CPUs another path than on Intel ones).
Another CPU, or another thread count, gives other bits (docs/compare.md, "Pinned kernels",
for the measurements). **Pinned**, a run computes with ATen's scalar build
(``ATEN_CPU_CAPABILITY=default``) and MKL's SSE2 branch ``COMPATIBLE`` (``MKL_CBWR``: the one
branch Intel documents as giving the same bits on Intel and compatible CPUs; ``MKL_CBWR=AVX2``
falls back to MKL's run-time choice on AMD CPUs, measured), with the study's fixed thread count.
The frozen baselines' runs and the compare runs train pinned; the rest of the study keeps the
native (faster) kernels.

Both libraries read their variable the first time they compute, not when torch is imported, so
the variables work when set in a process's environment before its first kernel: a fresh
``ltr-bench`` process, or a job server child, which takes on its client's environment before
it runs anything (``bench/jobserver.py``; ``tests/test_determinism.py`` checks both). A process
that computed before the variables were set keeps its kernels: :func:`check_pinned` (called by
every neural run, :func:`bench.training.device.deterministic`) then refuses the run instead of
training it with other bits than the ones asked for.

>>> env_assignments()
'ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE'
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.errors import TrainingFailed

#: the environment of a pinned run
PINNED_ENV: dict[str, str] = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
#: what torch and MKL report when the pinned variables took effect
PINNED_KERNELS: dict[str, str] = {"aten": "DEFAULT", "mkl_cbwr": "COMPATIBLE"}
#: MKL's code-branch numbers (mkl_cbwr.h) as MKL_CBWR names them; 1 = CNR off (MKL's own choice)
_MKL_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
                 10: "AVX2", 12: "AVX512", 14: "AVX512_E1"}
_MKL_CBWR_BRANCH = 1  # mkl_cbwr_get's argument: the branch setting
_MKL_STRICT = 0x10000


def env_assignments(env: Mapping[str, str] = PINNED_ENV) -> str:
    """The pinned variables as a shell prefix (``VAR=value VAR=value``)."""
    return " ".join(f"{key}={value}" for key, value in env.items())


def requests_pinned(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``env`` (default: this process's) sets every pinned variable to its pinned value."""
    env = os.environ if env is None else env
    return all(env.get(key) == value for key, value in PINNED_ENV.items())


@functools.lru_cache(maxsize=1)
def _mkl_cbwr_get():
    """MKL's ``cbwr_get`` inside torch's library (MKL is linked into it), or None without it."""
    try:
        import torch

        lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
        func = lib.mkl_serv_cbwr_get
    except (ImportError, OSError, AttributeError):  # another platform, or torch built without MKL
        return None
    func.restype, func.argtypes = ctypes.c_int, [ctypes.c_int]
    return func


def mkl_branch() -> str:
    """MKL's code branch in this process (``OFF``: MKL picks by CPU; ``n/a``: no MKL found).

    Calling it makes MKL read ``MKL_CBWR`` if it has not yet, as its first matrix product would.
    """
    func = _mkl_cbwr_get()
    if func is None:
        return "n/a"
    value = int(func(_MKL_CBWR_BRANCH))
    name = _MKL_BRANCHES.get(value & ~_MKL_STRICT, f"branch {value & ~_MKL_STRICT}")
    return name + (",STRICT" if value & _MKL_STRICT else "")


def kernel_facts() -> dict[str, Any]:
    """The kernels this process computes with: ATen's capability, MKL's branch, whether pinned."""
    import torch

    facts: dict[str, Any] = {"aten": str(torch.backends.cpu.get_cpu_capability()), "mkl_cbwr": mkl_branch()}
    facts["pinned"] = not _unpinned(facts)
    return facts


def _unpinned(facts: dict[str, Any]) -> list[str]:
    """The kernels of ``facts`` that are not the pinned ones (no MKL at all pins nothing there)."""
    return [f"{key} {facts[key]} (pinned: {value})" for key, value in PINNED_KERNELS.items()
            if facts[key] != value and not (key == "mkl_cbwr" and facts[key] == "n/a")]


def check_pinned() -> None:
    """Refuse (:class:`bench.errors.TrainingFailed`, one line) when the environment asks for pinned kernels
    and torch or MKL computes with others (they chose before the variable was set); a no-op
    when it does not ask."""
    if not requests_pinned():
        return
    wrong = _unpinned(kernel_facts())
    if wrong:
        raise TrainingFailed(
            f"{env_assignments()} is set but this process computes with {', '.join(wrong)}: the library chose its "
            "kernels before the variable was set; set it in the environment the process starts with")


def trains_pinned(config: Mapping[str, Any], experiment: str, dataset: str, method: str) -> bool:
    """Whether the workflow trains this run with pinned kernels: every compare run, and every
    run of a frozen method under the freeze protocol on a frozen dataset -- its tuning
    configurations' runs too, since which one is chosen is part of the baseline."""
    from bench.config import plan, tuning

    if experiment == plan.COMPARE_EXPERIMENT:
        return True
    freeze = config.get("freeze")
    if not freeze or experiment != freeze["protocol"] or dataset not in plan.freeze_datasets(dict(config)):
        return False
    parsed = tuning.parse_name(method)
    base = parsed[0] if parsed else tuning.base_of_tuned(method) or method
    return base in plan.freeze_methods(dict(config))
