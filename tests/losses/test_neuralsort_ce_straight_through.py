"""``neuralsort_ce(..., straight_through=True)``: PiRank's NeuralSort baseline (its Table 2).

Oracles (the math: ``bench/losses/neuralsort_ce.py``'s module docstring):

* the forward value equals the hard version built here independently, twice: with explicit
  Python loops (the hard permutation from a sort by ``(-score, position)``, the tie-aware target
  by counting labels, PiRank's row cost ``-sum_j T_ij log((P_ij + eps) / sum_k (P_ik + eps))``
  in ``math.log``), and densely in torch (``one_hot`` of a stable ``argsort`` as ``P``,
  ``sort_target`` as ``T``, ``log_softmax(log(P + eps))`` as PiRank's code computes it);
* the gradient is the relaxed loss's: bit for bit equal to ``straight_through=False``'s, and
  equal to central finite differences of the relaxed value;
* masks, padding garbage and lists of fewer than 2 items leave the value and gradient finite.

Tolerances are stated at each assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.losses import registry
from bench.losses.hyperparameters import from_source
from bench.losses.neuralsort import neuralsort
from bench.losses.neuralsort_ce import HARD_EPS, neuralsort_ce, sort_target

F64 = torch.float64


def lists(lengths, width, seed, *, ties=True, dtype=F64):
    """Scores with ties (rounded to one decimal) or distinct, labels 0-3, NaN/inf garbage in the padding."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(len(lengths), width))
    if ties:
        s = np.round(s, 1)
    y = rng.integers(0, 4, size=(len(lengths), width)).astype(float)
    m = np.zeros((len(lengths), width), dtype=bool)
    for row, n in enumerate(lengths):
        m[row, :n] = True
    s[~m] = np.where(rng.random(size=(~m).sum()) < 0.5, np.nan, np.inf)
    y[~m] = 7.0
    return torch.tensor(s, dtype=dtype), torch.tensor(y, dtype=dtype), torch.tensor(m)


def hard_by_loops(s, y, m, eps=HARD_EPS) -> float:
    """The straight-through forward value, from its definition, one list and one row at a time."""
    per_list = []
    for row in range(s.shape[0]):
        sc = [float(v) for v, ok in zip(s[row], m[row]) if ok]
        lab = [float(v) for v, ok in zip(y[row], m[row]) if ok]
        n = len(sc)
        if n < 2:
            continue  # a list with fewer than 2 real items does not contribute
        order = sorted(range(n), key=lambda i: (-sc[i], i))  # hard sort, ties by position
        ranked = sorted(lab, reverse=True)
        total = 0.0
        for i in range(n):
            count = sum(1 for v in lab if v == ranked[i])
            target = [(1.0 if lab[j] == ranked[i] else 0.0) / count for j in range(n)]
            hard = [1.0 if j == order[i] else 0.0 for j in range(n)]
            norm = sum(p + eps for p in hard)
            total -= sum(t * math.log((p + eps) / norm) for t, p in zip(target, hard) if t > 0)
        per_list.append(total / n)
    return sum(per_list) / len(per_list) if per_list else 0.0


def hard_dense(s, y, m, eps=HARD_EPS) -> torch.Tensor:
    """The same value as PiRank's code computes it: softmax cross entropy against log(P_hard + eps)."""
    low = torch.tensor(float("-inf"), dtype=s.dtype)
    order = torch.argsort(torch.where(m, s, low), dim=-1, descending=True, stable=True)
    p = torch.nn.functional.one_hot(order, s.shape[1]).to(s.dtype)  # row i: the item at rank i
    logits = torch.where(m[:, None, :], torch.log(p + eps), low)  # padded columns leave the softmax
    logp = torch.where(m[:, None, :], torch.log_softmax(logits, dim=-1), torch.zeros((), dtype=s.dtype))
    rows = -(sort_target(y.masked_fill(~m, 0.0), m) * logp).sum(-1)  # [B, L]; rows >= n have T = 0
    n = m.sum(-1)
    per_list = rows.sum(-1) / n.clamp(min=1)
    keep = n >= 2
    return per_list[keep].mean() if keep.any() else torch.zeros((), dtype=s.dtype)


CASES = [([6, 4, 5, 2], 6, 0), ([7, 1, 3, 0, 7], 8, 1), ([9, 9], 9, 2), ([3], 5, 3)]


@pytest.mark.parametrize("lengths, width, seed", CASES)
def test_value_is_the_hard_version(lengths, width, seed):
    s, y, m = lists(lengths, width, seed)
    value = neuralsort_ce(s, y, m, tau=0.7, straight_through=True).item()
    # float64: the loops and the loss sum the same ~23-sized terms in different orders
    assert value == pytest.approx(hard_by_loops(s, y, m), rel=1e-12, abs=1e-12)
    assert value == pytest.approx(hard_dense(s, y, m).item(), rel=1e-12, abs=1e-12)


def test_value_on_hand_cases():
    m = torch.ones(1, 4, dtype=torch.bool)
    y = torch.tensor([[3.0, 2.0, 1.0, 0.0]], dtype=F64)
    right = neuralsort_ce(torch.tensor([[4.0, 3.0, 2.0, 1.0]], dtype=F64), y, m, straight_through=True)
    # every row right: log1p(n eps) - log1p(eps) per row, (n - 1) eps = 3e-10 (to 1e-18 absolute)
    assert right.item() == pytest.approx(3 * HARD_EPS, abs=1e-18)
    swapped = neuralsort_ce(torch.tensor([[3.0, 4.0, 2.0, 1.0]], dtype=F64), y, m, straight_through=True)
    # two rows of four wrong: (2 (-log eps) + 4 log1p(4 eps) - 2 log1p(eps)) / 4, to 1e-13 relative
    expect = (2 * -math.log(HARD_EPS) + 4 * math.log1p(4 * HARD_EPS) - 2 * math.log1p(HARD_EPS)) / 4
    assert swapped.item() == pytest.approx(expect, rel=1e-13)
    # tied labels: a right hard sort still pays (1 - 1/c) (-log eps) per row of a tie group
    tied = torch.tensor([[1.0, 1.0, 0.0, 0.0]], dtype=F64)
    both = neuralsort_ce(torch.tensor([[4.0, 3.0, 2.0, 1.0]], dtype=F64), tied, m, straight_through=True)
    assert both.item() == pytest.approx(hard_by_loops(torch.tensor([[4.0, 3.0, 2.0, 1.0]]), tied, m), rel=1e-12)
    assert both.item() == pytest.approx(0.5 * -math.log(HARD_EPS), rel=1e-9)


def test_tied_scores_are_broken_by_position():
    y = torch.tensor([[0.0, 1.0]], dtype=F64)
    m = torch.ones(1, 2, dtype=torch.bool)
    tie = neuralsort_ce(torch.zeros(1, 2, dtype=F64), y, m, straight_through=True)
    # ranks: item 0 (label 0) first: both rows wrong (what the stable evaluation ranks); 1e-12 relative
    assert tie.item() == pytest.approx(-math.log(HARD_EPS) + math.log1p(2 * HARD_EPS), rel=1e-12)
    flipped = neuralsort_ce(torch.zeros(1, 2, dtype=F64), y.flip(-1), m, straight_through=True)
    assert flipped.item() == pytest.approx(HARD_EPS, abs=1e-18)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("lengths, width, seed", CASES)
def test_gradient_is_the_relaxed_gradient(lengths, width, seed, dtype):
    s, y, m = lists(lengths, width, seed, dtype=dtype)
    a, b = s.clone().requires_grad_(True), s.clone().requires_grad_(True)
    neuralsort_ce(a, y, m, tau=0.7, straight_through=True).backward()
    neuralsort_ce(b, y, m, tau=0.7).backward()
    # the hard value adds a constant: the backward pass is the relaxed one, bit for bit
    assert torch.equal(a.grad, b.grad)
    assert torch.isfinite(a.grad).all() and torch.all(a.grad[~m] == 0)


def test_gradient_matches_finite_differences_of_the_relaxed_value():
    s, y, m = lists([6, 4, 5], 6, seed=4, ties=False)
    s = torch.where(m, s, torch.zeros((), dtype=F64))
    x = s.clone().requires_grad_(True)
    neuralsort_ce(x, y, m, tau=0.7, straight_through=True).backward()
    h = 1e-6
    for row, col in zip(*torch.nonzero(m, as_tuple=True)):
        up, down = s.clone(), s.clone()
        up[row, col] += h
        down[row, col] -= h
        fd = (neuralsort_ce(up, y, m, tau=0.7) - neuralsort_ce(down, y, m, tau=0.7)).item() / (2 * h)
        # central differences in float64: truncation ~h^2, rounding ~1e-16 / h = 1e-10
        assert x.grad[row, col].item() == pytest.approx(fd, abs=1e-8)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_masks_short_lists_and_padding_stay_finite(dtype):
    s, y, m = lists([0, 1, 2, 5], 7, seed=5, dtype=dtype)
    x = s.clone().requires_grad_(True)
    value = neuralsort_ce(x, y, m, tau=1000.0, straight_through=True)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(x.grad).all() and torch.all(x.grad[~m] == 0)
    # only the lists of 2 and 5 items count: their mean, each computed alone (float32: 1e-6 relative)
    alone = [neuralsort_ce(s[i : i + 1], y[i : i + 1], m[i : i + 1], tau=1000.0, straight_through=True) for i in (2, 3)]
    assert value.item() == pytest.approx((alone[0] + alone[1]).item() / 2, rel=1e-6)
    # padding more columns changes nothing (exactly: the row normaliser counts real items only)
    wide = [torch.cat([t, t[:, :3]], dim=1) for t in (s, y)]
    wide_m = torch.cat([m, torch.zeros(4, 3, dtype=torch.bool)], dim=1)
    assert neuralsort_ce(wide[0], wide[1], wide_m, tau=1000.0, straight_through=True).item() == value.item()
    # nothing contributes: 0 with a zero gradient
    short = s[:2].clone().requires_grad_(True)
    none = neuralsort_ce(short, y[:2], m[:2], straight_through=True)
    none.backward()
    assert none.item() == 0.0 and torch.all(short.grad == 0)


def test_ranking_by_labels_beats_the_reverse():
    s, y, m = lists([8, 6], 8, seed=6, ties=False)
    ideal = torch.where(m, y + 0.01 * torch.arange(8, dtype=F64), torch.zeros((), dtype=F64))
    better = neuralsort_ce(ideal, y, m, straight_through=True)
    worse = neuralsort_ce(-ideal, y, m, straight_through=True)
    assert better.item() < worse.item()


def test_target_is_neuralsort_of_the_labels_at_zero_temperature():
    # PiRank's target is NeuralSort of the labels at tau = 1e-10: T, tied labels sharing rows
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(2, 9))
        y = torch.tensor(rng.integers(0, 3, size=(1, n)), dtype=F64)
        m = torch.ones(1, n, dtype=torch.bool)
        # tau = 1e-3 on integer labels: every off-target softmax weight is below exp(-1000)
        assert torch.allclose(neuralsort(y, m, tau=1e-3), sort_target(y, m), rtol=0, atol=1e-12)


def test_registry_and_config_name_the_option():
    assert registry.info("neuralsort_ce").relaxed == {"straight_through": False}
    sig = from_source("bench.losses.neuralsort_ce:neuralsort_ce")  # the torch-free reading config checks use
    assert sig is not None and sig.defaults()["straight_through"] is False
    s, y, m = lists([5], 5, seed=8)
    loss = registry.get("neuralsort_ce", tau=2.0, straight_through=True)
    assert loss(s, y, m).item() == neuralsort_ce(s, y, m, tau=2.0, straight_through=True).item()
