"""The linter and the type checker are part of the tests: ``ruff check`` and ``mypy`` (rules and files in
pyproject.toml) find nothing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is in the test extras: pip install -e '.[test]'")
def test_ruff_finds_nothing():
    proc = subprocess.run(["ruff", "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("mypy") is None, reason="mypy is in the test extras: pip install -e '.[test]'")
def test_mypy_finds_nothing():
    proc = subprocess.run(["mypy", "--no-error-summary"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
