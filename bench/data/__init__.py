"""Data layer: dataset registry, fetch/verify/extract, SVMlight parsing, synthetic data, prepare.

Public interface (see the team contract): :func:`read_svmlight`, :class:`SvmlightFormatError`,
:func:`download`, :func:`fetch`, :func:`generate_synthetic`, :func:`prepare_fold`,
:func:`load_prepared` (-> :class:`PreparedFold` with ``.meta``, ``.fingerprint``, ``.splits``).
"""

from bench.data.fetch import ChecksumError, DownloadError, ManualDownloadRequired, download, fetch
from bench.data.prepare import PreparedFold, Split, load_prepared, prepare_fold
from bench.data.registry import REGISTRY, Dataset, load_registry
from bench.data.svmlight import SvmlightFormatError, read_svmlight
from bench.data.synthetic import generate_synthetic

__all__ = ["REGISTRY", "ChecksumError", "Dataset", "DownloadError", "ManualDownloadRequired",
           "PreparedFold", "Split", "SvmlightFormatError", "download", "fetch",
           "generate_synthetic", "load_prepared", "load_registry", "prepare_fold", "read_svmlight"]
