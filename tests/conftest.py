"""Shared pytest configuration: deterministic torch, one thread budget for 2-core CI."""

import os

import numpy as np
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed NumPy generator so every test draws the same data on every run."""
    return np.random.default_rng(20261121)
