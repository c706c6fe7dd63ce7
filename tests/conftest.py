"""Shared pytest configuration: deterministic torch, one thread budget for 2-core CI.

The tests mirror the package (``tests/training/`` for ``bench/training/``, ...); helpers
they share live in ``tests/helpers.py``, importable as ``helpers`` from every test module.
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed NumPy generator so every test draws the same data on every run."""
    return np.random.default_rng(20261121)
