"""Shared loss helpers (``bench.losses._common``): the ideal DCG with padding and negative labels.

Labels may be any real values (docs/losses.md, "Common contract"), so a label can be negative
and its gain ``2^y - 1`` lies in ``(-1, 0)``. The ideal DCG sorts the *real* items only:
padding must never take a place in the ideal ranking (padding-invariance, 1e-9 relative).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.losses import _common, get, info, names

F64 = torch.float64
# @k/@m losses on short lists (as in test_contract.py)
SMALL_LIST_HYPER = {"lambda_recall": {"k": 2, "m": 3}, "arf": {"k": 2, "m": 3}, "arf_relax": {"k": 2, "m": 3},
                    "pirank_ndcg": {"k": 3}, "pirank_arp": {"k": 3}}


def call(name, loss, scores, labels, mask):
    if info(name).stochastic:  # a fresh generator in a fixed state (ListMLE)
        return loss(scores, labels, mask, generator=torch.Generator().manual_seed(0))
    return loss(scores, labels, mask)


def test_max_dcg_of_negative_labels_is_the_sorted_real_items_only():
    # hand-worked: labels (1, -1, -2), gains (1, -0.5, -0.75), ideal order 1, -1, -2
    y = torch.tensor([[1.0, -1.0, -2.0]], dtype=F64)
    m = torch.ones_like(y, dtype=torch.bool)
    expected = 1.0 - 0.5 / math.log2(3) - 0.75 / math.log2(4)
    assert _common.max_dcg(y, m).item() == pytest.approx(expected, rel=1e-15)
    # the same list padded with 3 masked items (garbage labels): same ideal DCG, at every k
    yp = torch.cat([y, torch.tensor([[5.0, 0.0, -7.0]], dtype=F64)], dim=1)
    mp = torch.cat([m, torch.zeros(1, 3, dtype=torch.bool)], dim=1)
    for k in (None, 1, 2, 3, 5):
        assert _common.max_dcg(yp, mp, k).item() == pytest.approx(_common.max_dcg(y, m, k).item(), rel=1e-15), k
    assert _common.max_dcg(yp, mp, 5).item() == pytest.approx(expected, rel=1e-15)


def test_max_dcg_of_an_empty_list_is_zero():
    y = torch.tensor([[3.0, -1.0]], dtype=F64)
    assert _common.max_dcg(y, torch.zeros_like(y, dtype=torch.bool)).item() == 0.0


@pytest.mark.parametrize("name", [n for n in names() if info(n).outputs == "scores"])
def test_padding_invariance_with_negative_labels(name):
    """Every loss: lists with labels in {-2, -1, 0, 1, 2} give the same value and gradient
    with and without 4 extra padded items (float64, 1e-9 relative)."""
    loss = get(name, **SMALL_LIST_HYPER.get(name, {}))
    rng = np.random.default_rng(11)
    lengths = [6, 5, 4]
    s = torch.tensor(rng.normal(size=(3, 6)), dtype=F64)
    if info(name).stochastic:  # ListMLE samples among label ties: keep labels distinct
        y = torch.tensor(np.stack([rng.permutation(6) - 3.0 for _ in lengths]), dtype=F64)
    else:
        y = torch.tensor(rng.integers(-2, 3, size=(3, 6)), dtype=F64)
        y[:, 0], y[:, 1] = 2.0, -2.0  # positive ideal DCG, negative gains present
    m = torch.tensor([[j < n for j in range(6)] for n in lengths])
    sp = torch.cat([s, torch.tensor(rng.normal(size=(3, 4)) * 50, dtype=F64)], dim=1)
    yp = torch.cat([y, torch.tensor(rng.integers(-3, 4, size=(3, 4)), dtype=F64)], dim=1)
    mp = torch.cat([m, torch.zeros(3, 4, dtype=torch.bool)], dim=1)
    a = s.clone().requires_grad_(True)
    b = sp.clone().requires_grad_(True)
    va, vb = call(name, loss, a, y, m), call(name, get(name, **SMALL_LIST_HYPER.get(name, {})), b, yp, mp)
    va.backward()
    vb.backward()
    assert torch.isfinite(va)
    assert vb.item() == pytest.approx(va.item(), rel=1e-9, abs=1e-12)
    assert torch.allclose(b.grad[:, :6][m], a.grad[m], rtol=1e-9, atol=1e-12)
    assert torch.all(b.grad[~mp] == 0)
