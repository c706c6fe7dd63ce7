"""``ltr-bench perf soft-ops`` at tiny sizes: the table with and without a peer, the equality check
(which must catch a peer that computes something else) and the refusals. No wall-time
assertions: times are only checked to be positive numbers.

The peer is torchsort when it is installed (``pip install -e .[perf-peers]``); the tests that
need it are skipped otherwise. The protocol is tested everywhere with a stand-in peer built
from our own operators in torchsort's ascending convention (so it must agree), and with one
whose soft sort is off by 1e-3 (so it must not).
"""

from __future__ import annotations

import types

import pytest
import torch

from bench.errors import UsageError
from bench.losses.permutahedron import soft_rank, soft_sort
from bench.perf import soft_ops
from bench.perf.suites import SUITES, suite_namespace

TINY = ["--lengths", "40,1000", "--batch", "2", "--rounds", "1"]


def _table(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and line[2].isdigit()]


def _peer(shift: float = 0.0) -> types.SimpleNamespace:
    """torchsort's API (ascending, 2-d, positional regularization and strength) from our operators."""

    def rank(values, regularization="l2", regularization_strength=1.0):
        mask = torch.ones_like(values, dtype=torch.bool)
        return soft_rank(-values, mask, epsilon=regularization_strength, regularization=regularization)

    def sort(values, regularization="l2", regularization_strength=1.0):
        mask = torch.ones_like(values, dtype=torch.bool)
        out = -soft_sort(-values, mask, epsilon=regularization_strength, regularization=regularization)
        return out + shift

    return types.SimpleNamespace(soft_rank=rank, soft_sort=sort, __version__="stand-in")


def _run(tmp_path, monkeypatch, peer):
    monkeypatch.setattr(soft_ops, "torchsort_module", lambda: peer)
    out = tmp_path / "soft_ops.md"
    result = SUITES["soft-ops"].report(suite_namespace("soft-ops", [*TINY, "--out", str(out)]))
    assert out.read_text(encoding="utf-8") == result.markdown
    return result


def test_registered_lazily():
    assert SUITES["soft-ops"].module == "bench.perf.soft_ops"


def test_without_a_peer_times_ours_alone_and_says_so(tmp_path, monkeypatch, capsys):
    result = _run(tmp_path, monkeypatch, None)
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == "torchsort is not installed (pip install -e .[perf-peers]): timing ours alone"
    rows = _table(result.markdown)
    assert [(r[0], r[1], r[2]) for r in rows] == [(n, reg, op) for n in ("40", "1000") for reg in ("l2", "kl")
                                                  for op in ("rank", "sort")]
    assert all(float(r[4]) > 0 and r[5:] == ["", "", "", ""] for r in rows)
    assert result.rc == 0 and result.targets == []


def test_with_an_agreeing_peer_reports_ratios_and_targets(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch, _peer())
    rows = _table(result.markdown)
    assert len(rows) == 8 and result.rc == 0
    for r in rows:
        assert float(r[4]) > 0 and float(r[5]) > 0 and float(r[6]) > 0
        assert float(r[7]) <= 1e-6 and float(r[8]) == 0.0  # the same operators, float32 vs float64
    goals = sorted({(t.what.split(", ")[1], t.goal) for t in result.targets})
    assert len(result.targets) == 8 and goals == [("n = 1000", "<= 0.8"), ("n = 40", "<= 1.0")]


def test_a_peer_that_computes_something_else_is_a_mismatch(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch, _peer(shift=1e-3))
    rows = _table(result.markdown)
    assert result.rc == 1
    assert [r[2] for r in rows if "MISMATCH" in r[8]] == ["sort"] * 4  # only the soft sort was shifted


def test_tied_entries():
    x = torch.tensor([[0.5, -1.0, 0.5, 2.0, -1.0, 3.0]])
    assert soft_ops.tied(x).tolist() == [[True, True, True, False, True, False]]


def test_refusals():
    with pytest.raises(UsageError):
        soft_ops.report_soft_ops(suite_namespace("soft-ops", ["--batch", "0"]))
    with pytest.raises(UsageError):
        soft_ops.report_soft_ops(suite_namespace("soft-ops", ["--lengths", "1"]))


@pytest.mark.skipif(soft_ops.torchsort_module() is None, reason="torchsort is the optional extra perf-peers")
def test_against_torchsort(tmp_path):
    out = tmp_path / "soft_ops.md"
    result = SUITES["soft-ops"].report(suite_namespace("soft-ops", [*TINY, "--out", str(out)]))
    rows = _table(result.markdown)
    assert len(rows) == 8 and result.rc == 0
    assert all(float(r[7]) <= soft_ops.VALUE_TOL and float(r[8]) <= soft_ops.MAX_OFF for r in rows)
