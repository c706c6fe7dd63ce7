"""Fixtures shared by the training tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module's runs: on a shared 2-core box extra threads only add
    contention, and subprocesses (a resumed run) inherit the same count (bit-identity needs
    equal threads). Restored after the module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
