"""Devices: the one ``--device`` policy, deterministic kernels, autocast, where features live.

**The --device policy** (every command that takes ``--device``: ``train``, ``gbdt``,
``perf``): ``auto`` is CUDA when torch sees a GPU, else the CPU; ``cpu`` is the CPU; ``cuda``
is the GPU. When ``cuda`` is asked for and there is none, the answer depends on what the
command produces, and :func:`resolve_device` is the one place that decides it:

- a **run** (``train``, ``gbdt``) produces results that do not depend on the device, so
  it continues on the CPU with a logged note, and ``run.json`` records the device used
  (``on_missing_cuda`` is the run's log function);
- a **measurement** (``perf``) produces the device's own numbers, so a CPU number under a
  ``cuda`` label would be wrong: it stops with :class:`bench.errors.UsageError` before
  measuring anything (``on_missing_cuda=None``).

GBDT libraries do not go through torch: :mod:`bench.training.gbdt` applies the same policy
with its own GPU check (``nvidia-smi``), since a CPU-only torch may sit beside a CUDA
build of XGBoost.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable

import torch

from bench.errors import UsageError
from bench.training.common import check_device
from bench.training.determinism import check_pinned

NO_CUDA = "CUDA requested but not available (torch built without CUDA or no GPU); using CPU"


def resolve_device(requested: str, *, on_missing_cuda: Callable[[str], None] | None) -> torch.device:
    """The torch device for ``--device requested`` under the policy of the module docstring.

    >>> resolve_device("cpu", on_missing_cuda=None)
    device(type='cpu')
    """
    check_device(requested)
    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if requested == "cuda":
        if on_missing_cuda is None:
            raise UsageError("--device cuda requested but torch.cuda.is_available() is False "
                             "(use --device auto or cpu)")
        on_missing_cuda(NO_CUDA)
    return torch.device("cpu")


def _set_deterministic_kernels(mode: bool, warn_only: bool) -> None:
    """Switch torch's deterministic-kernel flag without importing the compiler stack.

    ``torch.use_deterministic_algorithms`` sets two flags: the kernel flag
    (``torch._C._set_deterministic_algorithms``, the one eager kernels read) and
    ``torch._inductor.config.deterministic`` (read only by ``torch.compile``). Importing
    the latter pulls in inductor and ``torch._dynamo`` (1.3-1.8 s per fresh process on the
    2-core reference machine). The suite never compiles, so unless inductor is already
    loaded (then the public function is called, which keeps both flags in step) only the
    kernel flag is set; ``torch.are_deterministic_algorithms_enabled`` reads it either way.
    """
    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)


@contextlib.contextmanager
def deterministic(device: torch.device):
    """Deterministic kernels and a forked global RNG for the duration of a run; a run whose
    environment asks for pinned kernels (:mod:`bench.training.determinism`) is refused unless
    torch and MKL compute with them."""
    check_pinned()
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    prev = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    prev_bench = torch.backends.cudnn.benchmark
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        _set_deterministic_kernels(True, warn_only=device.type == "cuda")
        torch.backends.cudnn.benchmark = False
        try:
            yield
        finally:
            _set_deterministic_kernels(prev, warn_only=prev_warn)
            torch.backends.cudnn.benchmark = prev_bench


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """Set torch's intra-op threads for the block (None or 0: leave them as they are)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def autocast(device: torch.device, amp: bool, *, on_cpu: bool = False):
    """bfloat16 autocast of the model on CUDA when ``amp``; a no-op context otherwise.

    ``on_cpu`` also autocasts on the CPU (``torch.autocast("cpu", dtype=torch.bfloat16)``).
    Only ``ltr-bench perf train`` sets it, to measure it: on the reference CPU (AVX2, no
    native bfloat16) it was slower than float32, so no config key turns it on
    (docs/performance.md, "bfloat16 on CPU").
    """
    if amp and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if amp and on_cpu and device.type == "cpu":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def feature_store(device: torch.device, n_bytes: int, log: Callable[[str], None]) -> torch.device:
    """Where the splits' features live: on the GPU when they fit in 60 % of its free memory."""
    if device.type == "cuda" and n_bytes > 0.6 * torch.cuda.mem_get_info(device)[0]:
        log(f"features ({n_bytes / 2**30:.1f} GiB) do not fit on the GPU; gathering batches on the host")
        return torch.device("cpu")
    return device
