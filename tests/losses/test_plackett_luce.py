"""PL-Rank (bench/losses/plackett_luce.py) against independent oracles.

1. The exact expectation: for lists of n <= 5 items, E_PL[NDCG@k] and its gradient by
   enumerating all n! rankings (``helpers.exact_pl_expected_ndcg``, autograd through the PL
   probabilities). The loss's value and gradient, averaged over many independent draws (copies
   of the list in one batch, each with its own noise), must be within 5 standard errors of it
   (the standard error measured from the copies themselves; the draws are seeded, so the test
   is deterministic).
2. The 2021 paper's PL-Rank-2 formula, written as a plain loop over samples, items and ranks
   (O(N K n), with e^s / D_k computed directly), on the same sampled rankings: equal to the
   O(N (n log n + K)) log-domain computation within 1e-12 relative.
3. The sampler: ranking frequencies from Gumbel-max sampling against the PL probabilities
   (5 standard errors per ranking).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from bench.losses._common import discounts, gain, max_dcg
from bench.losses.plackett_luce import plrank_gradient, plrank_ndcg, sample_rankings
from helpers import exact_pl_expected_ndcg

F64 = torch.float64

CASES = [  # scores, labels, k
    ([0.3, -0.5, 1.2], [2, 0, 1], None),
    ([0.0, 0.4, -0.2, 0.9], [1, 1, 0, 3], 2),
    ([1.0, -1.0, 0.5, 0.0, -0.3], [0, 2, 4, 1, 0], 3),
    ([2.0, 0.1, -0.7, 0.4, 1.1], [3, 0, 1, 2, 1], None),
]


def _replicated(scores, labels, copies, pad=0):
    s = torch.tensor(scores, dtype=F64).repeat(copies, 1)
    y = torch.tensor(labels, dtype=F64).repeat(copies, 1)
    m = torch.ones_like(s, dtype=torch.bool)
    if pad:
        s = torch.cat([s, torch.full((copies, pad), 7.0, dtype=F64)], 1)
        y = torch.cat([y, torch.full((copies, pad), 4.0, dtype=F64)], 1)
        m = torch.cat([m, torch.zeros(copies, pad, dtype=torch.bool)], 1)
    return s, y, m


@pytest.mark.parametrize("case", range(len(CASES)))
def test_mean_of_the_estimates_converges_to_the_exact_expected_ndcg_and_its_gradient(case):
    scores, labels, k = CASES[case]
    copies, n_samples = 4000, 25
    s, y, m = _replicated(scores, labels, copies, pad=2)
    s.requires_grad_(True)
    value = plrank_ndcg(s, y, m, k=k, n_samples=n_samples, generator=torch.Generator().manual_seed(case))
    value.backward()
    # the batch value is the mean over copies: each copy's gradient is copies * its share
    per_copy = -copies * s.grad[:, : len(scores)]
    exact_s = torch.tensor(scores, dtype=F64, requires_grad=True)
    exact = exact_pl_expected_ndcg(exact_s, labels, k)
    exact.backward()
    mean, se = per_copy.mean(0), per_copy.std(0) / math.sqrt(copies)
    assert torch.all((mean - exact_s.grad).abs() <= 5 * se + 1e-12), (mean, exact_s.grad, se)
    assert torch.all(s.grad[:, len(scores):] == 0)
    # the value: minus the mean sampled NDCG, over 100,000 rankings (bounded in [0, 1]: se <= 0.5/sqrt(N))
    assert abs(-value.item() - exact.item()) <= 5 * 0.5 / math.sqrt(copies * n_samples)


def _naive_plrank2(scores, gains, theta, order):
    """The 2021 paper's PL-Rank-2 estimate, loop by loop (one list; theta [K], order [N, n])."""
    n_samples, n = order.shape
    cut = len(theta)
    e = np.exp(scores)
    out = np.zeros(n)
    for y in order:
        rank = {int(item): r for r, item in enumerate(y)}  # 0-based
        rewards = [theta[r] * gains[y[r]] for r in range(cut)]
        after = [sum(rewards[r:]) for r in range(cut)] + [0.0]
        for i in range(n):
            r_i = rank[i]
            out[i] += after[r_i + 1] if r_i < cut else 0.0
            for r in range(min(r_i, cut - 1) + 1):
                d_r = sum(e[int(j)] for j in y[r:])
                out[i] += e[i] / d_r * (theta[r] * gains[i] - after[r])
    return out / n_samples


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_the_prefix_sum_computation_equals_the_papers_plrank2_formula_on_the_same_rankings(scale):
    rng = np.random.default_rng(3)
    lengths, width, k = [6, 4, 5], 7, 3
    s = torch.tensor(rng.normal(size=(3, width)) * scale, dtype=F64)
    y = torch.tensor(rng.integers(0, 4, size=(3, width)), dtype=F64)
    m = torch.zeros(3, width, dtype=torch.bool)
    for b, n in enumerate(lengths):
        m[b, :n] = True
    order = sample_rankings(s, m, 9, torch.Generator().manual_seed(1))
    g = torch.where(m, gain(y), torch.zeros((), dtype=F64))
    ideal = max_dcg(y, m, k)
    theta = discounts(k, like=s)[None, :] / ideal[:, None]
    metric, grad = plrank_gradient(s, g, theta, m, order)
    for b, n in enumerate(lengths):
        want = _naive_plrank2(s[b, :n].numpy(), g[b, :n].numpy(), theta[b].numpy(), order[b, :, :n].numpy())
        np.testing.assert_allclose(grad[b, :n].numpy(), want, rtol=1e-12, atol=1e-14)
        for t in range(order.shape[1]):
            dcg = sum(theta[b, r].item() * g[b, order[b, t, r]].item() for r in range(k))
            assert metric[b, t].item() == pytest.approx(dcg, rel=1e-12)
    assert torch.all(grad[~m] == 0)


def test_gumbel_max_draws_rankings_with_the_plackett_luce_probabilities():
    s = torch.tensor([[0.8, -0.4, 0.0, 1.5]], dtype=F64)
    m = torch.ones_like(s, dtype=torch.bool)
    draws = 200_000
    order = sample_rankings(s, m, draws, torch.Generator().manual_seed(7))[0].numpy()
    counts: dict[tuple[int, ...], int] = {}
    for row in map(tuple, order):
        counts[row] = counts.get(row, 0) + 1
    e = np.exp(s[0].numpy())
    for perm in itertools.permutations(range(4)):
        p = 1.0
        for t in range(4):
            p *= e[perm[t]] / e[list(perm[t:])].sum()
        se = math.sqrt(p * (1 - p) / draws)
        assert abs(counts.get(perm, 0) / draws - p) <= 5 * se, perm


def test_a_ranking_the_scores_make_certain_gives_minus_ndcg_and_a_vanishing_gradient():
    s = torch.tensor([[30.0, 0.0, -30.0, 60.0]], dtype=F64, requires_grad=True)
    y = torch.tensor([[2.0, 1.0, 0.0, 0.0]], dtype=F64)
    v = plrank_ndcg(s, y, torch.ones(1, 4, dtype=torch.bool), k=None, n_samples=20, generator=torch.Generator().manual_seed(0))
    v.backward()
    order_dcg = 0 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4) + 0 / math.log2(5)
    ideal = 3 / math.log2(2) + 1 / math.log2(3)
    assert v.item() == pytest.approx(-order_dcg / ideal, rel=1e-12)
    assert s.grad.abs().max().item() < 1e-10


def test_huge_scores_keep_the_estimate_finite_and_accurate():
    """Scores of 1e4: e^s would overflow; the log-domain sums stay finite. Item 0 is surely first
    and item 1 surely last, so their exact gradient is 0 (enumeration: below 1e-300); the estimate
    for them is 0 within float64 rounding, and within float32's resolution at 1e4 (ulp 2^-10,
    times rewards below 1) in float32."""
    y = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    exact_s = torch.tensor([1e4, -1e4, 0.5, 0.0], dtype=F64, requires_grad=True)
    exact_pl_expected_ndcg(exact_s, [0, 3, 1, 2], 2).backward()
    assert exact_s.grad[:2].abs().max().item() < 1e-300
    for dtype, tol in ((F64, 1e-12), (torch.float32, 2.0**-10)):
        s = exact_s.detach().to(dtype)[None, :].requires_grad_(True)
        v = plrank_ndcg(s, y.to(dtype), torch.ones(1, 4, dtype=torch.bool), k=2, n_samples=50,
                        generator=torch.Generator().manual_seed(0))
        v.backward()
        assert torch.isfinite(v) and torch.all(torch.isfinite(s.grad))
        assert s.grad[0, :2].abs().max().item() <= tol, dtype


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_gives_the_cpu_value_and_gradient_for_the_same_rankings():
    rng = np.random.default_rng(5)
    s = torch.tensor(rng.normal(size=(4, 9)), dtype=F64)
    y = torch.tensor(rng.integers(0, 5, size=(4, 9)), dtype=F64)
    m = torch.ones(4, 9, dtype=torch.bool)
    order = sample_rankings(s, m, 16, torch.Generator().manual_seed(0))
    g, theta = gain(y), discounts(5, like=s)[None, :] / max_dcg(y, m, 5)[:, None]
    cpu = plrank_gradient(s, g, theta, m, order)
    gpu = plrank_gradient(s.cuda(), g.cuda(), theta.cuda(), m.cuda(), order.cuda())
    for a, b in zip(cpu, gpu):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-10, atol=1e-12)
    gen = torch.Generator(device="cuda").manual_seed(0)
    sc = s.cuda().requires_grad_(True)
    plrank_ndcg(sc, y.cuda(), m.cuda(), generator=gen).backward()
    assert torch.all(torch.isfinite(sc.grad))
