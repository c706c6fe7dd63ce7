"""SinkProp's test-time ranking (Sec. 2.3): bench.losses.sinkprop.shortcut_hungarian.

Oracles: :math:`D` from a plain NumPy loop (the smoothed indicator entry by entry, then
``n_iter`` row and column normalisations; 1e-12); expected ranks by a loop over rows; the
exact assignment by brute force over every permutation (n <= 6) and by SciPy's solver on the
full :math:`-\\log D`; the short cut by brute force over the permutations of the top K items
(by the reference expected ranks) with the rest of the order fixed. Log likelihoods compared
within 1e-9; the permutations themselves exactly (the scores are continuous draws, so the
optimum is unique).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import linear_sum_assignment

from bench.losses.sinkprop import expected_ranks, shortcut_hungarian, sinkprop_marginals


def reference_d(s: np.ndarray, sigma: float, eps: float, n_iter: int) -> np.ndarray:
    n = s.size
    centres = np.sort(s)[::-1]
    m = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            m[i, j] = np.exp(-((s[i] - centres[j]) ** 2) / sigma) + eps
    for _ in range(n_iter):
        m = m / m.sum(1, keepdims=True)
        m = m / m.sum(0, keepdims=True)
    return m


def reference_ranks(d: np.ndarray) -> np.ndarray:
    return np.array([sum((j + 1) * d[i, j] for j in range(d.shape[1])) / d[i].sum() for i in range(d.shape[0])])


def loglik(d: np.ndarray, order) -> float:
    """Eq. (5) for the permutation that puts ``order[p]`` at rank ``p + 1``."""
    return float(sum(np.log(d[item, p]) for p, item in enumerate(order)))


def brute_force(d: np.ndarray, fixed_tail, head_items) -> tuple[int, ...]:
    """The best order among those that put ``head_items`` (any order) first and ``fixed_tail`` after."""
    return max((tuple(p) + tuple(fixed_tail) for p in itertools.permutations(head_items)), key=lambda o: loglik(d, o))


def one(s, **kw) -> list[int]:
    t = torch.as_tensor(np.asarray(s, dtype=np.float64))[None, :]
    return shortcut_hungarian(t, torch.ones_like(t, dtype=torch.bool), **kw)[0].tolist()


@pytest.mark.parametrize("n_iter", [0, 1, 5])
def test_marginals_and_expected_ranks_match_a_plain_loop(n_iter):
    rng = np.random.default_rng(0)
    s = rng.normal(size=7)
    t = torch.from_numpy(s)[None, :]
    mask = torch.ones_like(t, dtype=torch.bool)
    d = sinkprop_marginals(t, mask, sigma=0.7, n_iter=n_iter, eps=1e-3)
    ref = reference_d(s, 0.7, 1e-3, n_iter)
    np.testing.assert_allclose(d[0].numpy(), ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(expected_ranks(d, mask)[0].numpy(), reference_ranks(ref), rtol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_top_covering_the_list_is_the_exact_assignment(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    s = rng.normal(size=n) * rng.uniform(0.5, 3.0)
    sigma, eps = float(rng.uniform(0.2, 2.0)), 1e-3
    d = reference_d(s, sigma, eps, 5)
    best = brute_force(d, (), range(n))
    r, c = linear_sum_assignment(-np.log(d))
    full = [int(r[list(c).index(p)]) for p in range(n)]
    assert tuple(full) == best
    for top in (None, n, n + 3):
        got = one(s, sigma=sigma, top=top, eps=eps)
        assert tuple(got) == best
        assert loglik(d, got) == pytest.approx(loglik(d, best), abs=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_short_cut_is_the_best_reordering_of_the_top_k_by_expected_rank(seed):
    rng = np.random.default_rng(100 + seed)
    n, top = 8, int(rng.integers(1, 5))
    s = rng.normal(size=n) * rng.uniform(0.3, 3.0)
    sigma, eps = float(rng.uniform(0.2, 4.0)), float(rng.choice([1e-3, 1e-6]))
    d = reference_d(s, sigma, eps, 5)
    by_rank = list(np.argsort(reference_ranks(d), kind="stable"))
    expect = brute_force(d, by_rank[top:], by_rank[:top])
    assert tuple(one(s, sigma=sigma, top=top, eps=eps)) == expect


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_assignment_is_the_score_order(seed):
    """Under Sec. 4.2's matrix every item sitting on its own centre minimises every term of
    the cost at once, so the exact assignment is the score order, for any sigma and eps."""
    rng = np.random.default_rng(200 + seed)
    s = rng.standard_cauchy(size=int(rng.integers(2, 30)))
    sigma, eps = float(rng.choice([0.01, 1.0, 100.0])), float(rng.choice([0.0, 1e-3, 0.1]))
    assert one(s, sigma=sigma, top=None, eps=eps) == list(np.argsort(-s, kind="stable"))


def test_the_short_cut_leaves_the_exact_assignment_only_where_expected_ranks_misorder():
    """A large eps flattens the rows of isolated items: the expected ranks of the two lowest
    scores swap, the short cut keeps that tail order, the exact assignment does not."""
    s = np.array([-3.7, 0.5, 2.6, -3.5, 2.2, 2.4, -2.8, -1.6, -0.6, 1.1, -0.9, 3.3, 2.3])
    d = reference_d(s, 1.0, 0.1, 5)
    ranks = reference_ranks(d)
    assert ranks[0] < ranks[3] and s[0] < s[3]  # the misorder, by the reference loop
    exact = one(s, sigma=1.0, top=None, eps=0.1)
    short = one(s, sigma=1.0, top=3, eps=0.1)
    assert exact == list(np.argsort(-s)) and short == exact[:-2] + [0, 3]
    assert loglik(d, short) < loglik(d, exact)


@pytest.mark.parametrize("seed", range(6))
def test_tied_scores_keep_document_order(seed):
    """Equal scores are equal rows of D: Eq. (5) cannot order them, the ranking keeps document
    order (as ranking by the scores with ties="stable" does), at the top and in the tail."""
    rng = np.random.default_rng(300 + seed)
    s = rng.choice(rng.normal(size=4), size=int(rng.integers(10, 40)))
    sigma = float(rng.choice([0.1, 1.0, 10.0]))
    assert one(s, sigma=sigma, top=None) == list(np.argsort(-s, kind="stable"))
    for top in (1, 3, 10):
        order = one(s, sigma=sigma, top=top, eps=0.1)
        for value in np.unique(s):
            tied = [i for i in order if s[i] == value]
            assert tied == sorted(tied)


def test_batched_padded_lists_equal_one_list_at_a_time():
    rng = np.random.default_rng(3)
    lengths = [1, 2, 5, 9, 12, 3, 7]
    width = max(lengths)
    s = torch.zeros(len(lengths), width, dtype=torch.float64)
    mask = torch.zeros(len(lengths), width, dtype=torch.bool)
    singles = []
    for b, n in enumerate(lengths):
        x = rng.normal(size=n) if b < 6 else np.array([0.0, 1.0, 0.0, -1.0, 1.0, 0.0, 0.0])  # ties, zeros
        s[b, :n], mask[b, :n] = torch.from_numpy(x), True
        s[b, n:] = 0.0 if b == 6 else 1e6  # the padding's value must not matter
        singles.append(one(x, sigma=0.8, top=4))
    order = shortcut_hungarian(s, mask, sigma=0.8, top=4)
    for b, n in enumerate(lengths):
        assert order[b, :n].tolist() == singles[b]
        assert sorted(order[b, n:].tolist()) == list(range(n, width))  # padding last


def test_underflowing_marginals_stay_finite_and_keep_the_score_order():
    """eps = 0 and scores far apart: D has exact zeros, the log-domain cost does not."""
    s = np.array([0.0, 40.0, -25.0, 12.0, 3.0])
    d = sinkprop_marginals(torch.from_numpy(s)[None, :], torch.ones(1, 5, dtype=torch.bool), sigma=0.5, eps=0.0)
    assert (d == 0).any()
    assert one(s, sigma=0.5, top=None, eps=0.0) == list(np.argsort(-s))
    assert one(s, sigma=0.5, top=3, eps=0.0) == list(np.argsort(-s))


def test_bad_top_is_refused():
    with pytest.raises(ValueError, match="top must be a positive integer or None"):
        one([0.0, 1.0], sigma=1.0, top=0)
