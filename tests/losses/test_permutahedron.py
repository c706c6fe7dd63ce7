"""Fast soft rank / soft sort (bench/losses/permutahedron.py) and the losses built on them.

Oracles:

- torchsort 0.1.10 (a PyTorch port of the authors' fast-soft-sort): values and vector-Jacobian
  products of seeded inputs, L2 and KL, n = 2..64, eps = 0.1..10, from the committed fixture
  that ``scripts/torchsort_oracle.py`` writes (torchsort compiles a C++ extension against the
  installed torch, so it is not a test dependency). Tolerance 1e-9 absolute (measured: 3e-13).
- scikit-learn's ``IsotonicRegression(increasing=False)`` for the L2 isotonic fit (1e-12).
- The limits: eps -> 0 gives the hard ranks and the sorted scores exactly; eps -> infinity
  gives (n + 1)/2 and the mean (L2, 1e-6 at eps = 1e7).
- torchsort's README example (ranks of [8, 0, 5, 3, 2, 1, 6, 7, 9] at eps = 1 are the hard ones).
- ``torch.autograd.gradcheck`` (float64, torch's default tolerances) through masked batches.
- ``bench.metrics`` NDCG and ``scipy.stats`` (Spearman's rho, average ranks) for the losses' limits.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.isotonic import IsotonicRegression

from bench import metrics
from bench.losses.permutahedron import isotonic_blocks, soft_rank, soft_sort
from bench.losses.softrank import fractional_ranks, softrank_ndcg, softrank_spearman
from helpers import ROOT

F64 = torch.float64
FIXTURE = ROOT / "tests" / "fixtures" / "torchsort" / "soft_ops.json"
OPS = {"rank": soft_rank, "sort": soft_sort}


def _cases():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("op", list(OPS))
def test_values_and_gradients_match_torchsort(op):
    cases = _cases()
    assert len(cases) == 24
    for case in cases:
        theta = torch.tensor(case["theta"], dtype=F64, requires_grad=True)
        mask = torch.ones(theta.shape, dtype=torch.bool)
        out = OPS[op](theta, mask, epsilon=case["epsilon"], regularization=case["regularization"])
        (out * torch.tensor(case["cotangent"], dtype=F64)).sum().backward()
        where = f"{op} n={case['n']} eps={case['epsilon']} {case['regularization']}"
        assert torch.allclose(out, torch.tensor(case[op], dtype=F64), rtol=0, atol=1e-9), where
        assert torch.allclose(theta.grad, torch.tensor(case[f"{op}_vjp"], dtype=F64), rtol=0, atol=1e-9), where


def test_l2_isotonic_fit_matches_scikit_learn():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 50, 300):
        y = rng.normal(size=n) + np.linspace(0, 3, n)  # rising trend: long pooled blocks
        blocks = isotonic_blocks(torch.tensor(y[None, :]), None, torch.tensor([n]))[0].numpy()
        ours = np.array([y[blocks == b].mean() for b in blocks])
        expected = IsotonicRegression(increasing=False).fit_transform(np.arange(n), y)
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)


def test_hard_limit_is_exact_and_large_epsilon_tends_to_the_centre():
    rng = np.random.default_rng(1)
    theta = torch.tensor(rng.normal(size=(3, 9)), dtype=F64)
    mask = torch.ones_like(theta, dtype=torch.bool)
    hard_ranks = torch.tensor(stats.rankdata(-theta.numpy(), axis=1), dtype=F64)
    assert torch.equal(soft_rank(theta, mask, epsilon=1e-4), hard_ranks)  # L2: exactly
    # KL: exp(s - v) with |s| ~ 1e4, exact up to that subtraction's rounding
    assert torch.allclose(soft_rank(theta, mask, epsilon=1e-4, regularization="kl"), hard_ranks, rtol=0, atol=1e-9)
    sorted_desc = torch.sort(theta, descending=True).values
    for reg in ("l2", "kl"):
        assert torch.allclose(soft_sort(theta, mask, epsilon=1e-4, regularization=reg), sorted_desc, atol=1e-12)
    centre = soft_rank(theta, mask, epsilon=1e7)
    assert torch.allclose(centre, torch.full_like(theta, 5.0), atol=1e-6)
    assert torch.allclose(soft_sort(theta, mask, epsilon=1e7), theta.mean(-1, keepdim=True).expand_as(theta), atol=1e-6)


def test_torchsort_readme_example():
    x = torch.tensor([[8.0, 0, 5, 3, 2, 1, 6, 7, 9]])
    mask = torch.ones_like(x, dtype=torch.bool)
    # the README's ascending ranks of x are our descending ranks of -x
    assert soft_rank(-x, mask, epsilon=1.0).tolist() == [[8.0, 1, 5, 4, 3, 2, 6, 7, 9]]
    # the README's ascending soft sort at 0.1, [0, 1, 2, 3, 5, 6, 7, 8, 9], is minus our descending sort of -x
    assert (-soft_sort(-x, mask, epsilon=0.1)).tolist() == [[0.0, 1, 2, 3, 5, 6, 7, 8, 9]]


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("reg", ["l2", "kl"])
def test_operators_are_masked_padding_invariant_and_pass_gradcheck(op, reg):
    rng = np.random.default_rng(2)
    lengths = [6, 3, 1, 0, 5]
    width = 8
    theta = torch.tensor(rng.normal(size=(len(lengths), width)) * 3, dtype=F64)
    mask = torch.tensor([[i < n for i in range(width)] for n in lengths])
    fn = OPS[op]
    out = fn(theta, mask, epsilon=0.7, regularization=reg)
    for row, n in enumerate(lengths):
        alone = fn(theta[row : row + 1, :n], mask[row : row + 1, :n], epsilon=0.7, regularization=reg)
        assert torch.allclose(out[row : row + 1, :n], alone, rtol=1e-12, atol=1e-12)
        assert torch.all(out[row, n:] == 0)
    x = theta.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: fn(t, mask, epsilon=0.7, regularization=reg), (x,), eps=1e-6)
    fn(x, mask, epsilon=0.7, regularization=reg).sum().backward()
    assert torch.all(x.grad[~mask] == 0)


def test_soft_ranks_lie_in_the_permutahedron():
    rng = np.random.default_rng(3)
    theta = torch.tensor(rng.normal(size=(4, 12)), dtype=F64)
    mask = torch.ones_like(theta, dtype=torch.bool)
    for reg in ("l2", "kl"):
        r = soft_rank(theta, mask, epsilon=0.5, regularization=reg)
        assert torch.allclose(r.sum(-1), torch.full((4,), 78.0, dtype=F64), atol=1e-9)  # sum of 1..12
        top = torch.sort(r, dim=-1).values.cumsum(-1)  # the j smallest sum to at least 1 + ... + j
        assert torch.all(top >= torch.arange(1, 13, dtype=F64).cumsum(0) - 1e-9)


def test_fractional_ranks_match_scipy_average_ranks():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 4, size=(5, 11)).astype(float)
    ranks = fractional_ranks(torch.tensor(y), torch.ones(5, 11, dtype=torch.bool)).numpy()
    np.testing.assert_array_equal(ranks, stats.rankdata(-y, method="average", axis=1))


def test_softrank_ndcg_hard_limit_is_minus_ndcg():
    rng = np.random.default_rng(5)
    s = rng.normal(size=(4, 10))
    y = rng.integers(0, 5, size=(4, 10)).astype(float)
    y[:, 0] = 4  # every list has a relevant item
    frame = metrics.evaluate(s.ravel(), y.ravel(), np.arange(0, 41, 10), ["ndcg@max"])
    mask = torch.ones(4, 10, dtype=torch.bool)
    for reg in ("l2", "kl"):
        value = softrank_ndcg(torch.tensor(s), torch.tensor(y), mask, epsilon=1e-6, regularization=reg).item()
        assert value == pytest.approx(-frame["ndcg@max"].mean(), rel=1e-10)  # KL: exp(log rank) rounding


def test_softrank_spearman_hard_limit_is_one_minus_rho():
    rng = np.random.default_rng(6)
    s = rng.normal(size=(3, 15))
    y = np.stack([rng.permutation(15) for _ in range(3)]).astype(float)  # no ties
    rho = [stats.spearmanr(s[i], y[i]).statistic for i in range(3)]
    value = softrank_spearman(torch.tensor(s), torch.tensor(y), torch.ones(3, 15, dtype=torch.bool), epsilon=1e-6)
    assert value.item() == pytest.approx(1 - float(np.mean(rho)), rel=1e-12)
