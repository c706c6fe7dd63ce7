"""Data layer: dataset registry, fetch/verify/extract, SVMlight parsing, synthetic data, prepare."""
from bench.data.svmlight import SvmlightFormatError, read_svmlight
