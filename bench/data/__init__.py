"""Data layer: dataset registry, fetch/verify/extract, SVMlight parsing, synthetic data, prepare.

Public interface (see the team contract): :func:`read_svmlight`, :class:`SvmlightFormatError`,
:func:`download`, :func:`generate_synthetic`, :func:`prepare_fold`,
:func:`load_prepared` (-> :class:`PreparedFold` with ``.meta``, ``.fingerprint``, ``.splits``).

Names resolve lazily (PEP 562), as the loss registry does: a job that only reads a prepared
fold imports :mod:`bench.data.prepared` and not the numba parser or SciPy behind ``prepare``.
The ``fetch`` function is ``bench.data.fetch.fetch``: ``bench.data.fetch`` is its module.
"""

from __future__ import annotations

import importlib

# public name -> the module that defines it
_EXPORTS = {
    "ChecksumError": "fetch", "DownloadError": "fetch", "ManualDownloadRequired": "fetch",
    "download": "fetch",
    "PreparedFold": "prepared", "Split": "prepared", "load_prepared": "prepared",
    "prepare_fold": "prepare",
    "REGISTRY": "registry", "Dataset": "registry", "load_registry": "registry",
    "SvmlightFormatError": "svmlight", "read_svmlight": "svmlight",
    "generate_synthetic": "synthetic",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"bench.data.{module}"), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
