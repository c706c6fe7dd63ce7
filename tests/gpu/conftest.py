"""The CUDA tests: marked ``cuda`` and skipped, with the reason, where torch sees no GPU.

They run on a GPU machine through ``scripts/gpu-check.sh`` (``python -m pytest -m cuda
tests/gpu``); CI has no GPU, so there every test here is collected and skipped, and a broken
import still fails the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
NO_CUDA = ("needs a CUDA device (torch.cuda.is_available() is False here); "
           "run on a GPU machine: bash scripts/gpu-check.sh")


def pytest_collection_modifyitems(config, items):
    skip = None if torch.cuda.is_available() else pytest.mark.skip(reason=NO_CUDA)
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.cuda)
            if skip is not None:
                item.add_marker(skip)
