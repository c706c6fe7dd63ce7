"""Differentiable sorting networks and SoftSort (bench/losses/sorting_networks.py, softsort.py), and
the ``relaxation`` keyword of PiRank and ARF.

Oracles:

- ``diffsort`` 0.2.0 (the authors' package; a pure-Python wheel in the test extra): the relaxed
  matrix of every network and sigmoid for n = 2..16 (and 33 for Cauchy; powers of two and not), and its gradient,
  float64, 1e-12 absolute (``optimal``: 1e-9, diffsort adds 1e-10 to a denominator).
- SoftSort: the paper's formula written out with NumPy, entry by entry (1e-12).
- The hard limits (steepness -> infinity, tau -> 0): the permutation matrix of the descending
  sort and ``1 - NDCG@k`` (``bench.metrics``), 1e-9.
- Doubly stochastic network matrices (1e-12); ``gradcheck`` in float64.
- ARF's generic log-domain path (any softmax-of-logits matrix) against its factored NeuralSort
  path, by handing the generic path NeuralSort's logits (1e-12 relative).
"""

from __future__ import annotations

import diffsort
import numpy as np
import pytest
import torch

from bench import metrics
from bench.losses import arf, get, relaxations
from bench.losses.pirank import pirank_ndcg
from bench.losses.relaxed_ndcg import diffsort_ndcg, softsort_ndcg
from bench.losses.softsort import softsort
from bench.losses.sorting_networks import NETWORKS, SIGMOIDS, network_matrix, network_sort

F64 = torch.float64


def _diffsort_matrix(x: torch.Tensor, network: str, sigmoid: str, steepness: float) -> torch.Tensor:
    """diffsort's matrix for the descending sort: its ascending sort of -x, transposed to rows = ranks."""
    net = diffsort.DiffSortNet(network, x.shape[1], steepness=steepness, distribution=sigmoid)
    net.sorting_network = [[m.to(F64) for m in layer] for layer in net.sorting_network]
    _, matrix = net(-x)
    return matrix.transpose(1, 2)


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("sigmoid", list(SIGMOIDS))
def test_network_matrix_and_gradient_match_diffsort(network, sigmoid):
    rng = np.random.default_rng(0)
    tol = 1e-9 if sigmoid == "optimal" else 1e-12
    for n in (2, 3, 5, 8, 13, 16) + ((33,) if sigmoid == "cauchy" else ()):  # 33: one sigmoid, the test is slow
        x = torch.tensor(rng.normal(size=(3, n)), dtype=F64)
        weights = torch.tensor(rng.normal(size=(3, n, n)), dtype=F64)
        ours_x, theirs_x = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ours = network_matrix(ours_x, torch.ones(3, n, dtype=torch.bool), network=network, sigmoid=sigmoid, steepness=3.0)
        theirs = _diffsort_matrix(theirs_x, network, sigmoid, 3.0)
        assert torch.allclose(ours, theirs, rtol=0, atol=tol), n
        (ours * weights).sum().backward()
        (theirs * weights).sum().backward()
        assert torch.allclose(ours_x.grad, theirs_x.grad, rtol=0, atol=tol * 100), n


@pytest.mark.parametrize("network", NETWORKS)
def test_mixed_lengths_doubly_stochastic_hard_limit_and_gradcheck(network):
    rng = np.random.default_rng(1)
    lengths = [7, 3, 1, 0, 5, 2]
    width = 9
    x = torch.tensor(rng.normal(size=(len(lengths), width)) * 40, dtype=F64)  # garbage in the padding
    mask = torch.tensor([[i < n for i in range(width)] for n in lengths])
    for i, n in enumerate(lengths):
        x[i, :n] = torch.tensor(rng.normal(size=n))
    p = network_matrix(x, mask, network=network, steepness=4.0)
    for row, n in enumerate(lengths):  # each list alone: the same matrix (the network of its own n)
        alone = network_matrix(x[row : row + 1, :n], mask[row : row + 1, :n], network=network, steepness=4.0)
        assert torch.allclose(p[row, :n, :n], alone[0], rtol=0, atol=1e-14)
        assert torch.all(p[row, n:] == 0) and torch.all(p[row, :, n:] == 0)
        if n:
            assert torch.allclose(p[row, :n, :n].sum(0), torch.ones(n, dtype=F64), atol=1e-12)
            assert torch.allclose(p[row, :n, :n].sum(1), torch.ones(n, dtype=F64), atol=1e-12)
    hard = network_matrix(x, mask, network=network, sigmoid="logistic", steepness=1e9)
    order = torch.argsort(torch.where(mask, x, torch.tensor(float("-inf"), dtype=F64)), dim=-1, descending=True)
    expected = torch.nn.functional.one_hot(order, width).to(F64) * mask.sum(-1)[:, None, None].gt(
        torch.arange(width)[None, :, None]).to(F64)
    assert torch.equal(hard, expected)
    values = torch.tensor(rng.normal(size=(len(lengths), width, 2)), dtype=F64)
    carried = network_sort(x, mask, values, network=network, steepness=4.0)
    assert torch.allclose(carried, p @ torch.where(mask[:, :, None], values, torch.zeros((), dtype=F64)), atol=1e-12)
    xg = x.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: network_sort(t, mask, values, network=network, steepness=4.0), (xg,))


def test_softsort_is_the_papers_formula_and_sorts_in_the_limit():
    rng = np.random.default_rng(2)
    s = rng.normal(size=(2, 6))
    for tau, power in ((0.5, 1.0), (2.0, 2.0)):
        p = softsort(torch.tensor(s), torch.ones(2, 6, dtype=torch.bool), tau=tau, power=power).numpy()
        for b in range(2):
            srt = np.sort(s[b])[::-1]
            for i in range(6):
                logits = np.array([-abs(srt[i] - s[b, j]) ** power / tau for j in range(6)])
                np.testing.assert_allclose(p[b, i], np.exp(logits) / np.exp(logits).sum(), rtol=0, atol=1e-12)
    p = softsort(torch.tensor(s), torch.ones(2, 6, dtype=torch.bool), tau=1e-6)
    assert torch.equal(p, torch.nn.functional.one_hot(torch.argsort(torch.tensor(s), descending=True), 6).to(F64))


def test_ndcg_losses_hard_limits_are_one_minus_ndcg_at_k():
    rng = np.random.default_rng(3)
    s = rng.normal(size=(4, 12))
    y = rng.integers(0, 5, size=(4, 12)).astype(float)
    y[:, 0] = 4
    expected = 1 - metrics.evaluate(s.ravel(), y.ravel(), np.arange(0, 49, 12), ["ndcg@5"])["ndcg@5"].mean()
    st, yt, m = torch.tensor(s), torch.tensor(y), torch.ones(4, 12, dtype=torch.bool)
    assert softsort_ndcg(st, yt, m, k=5, tau=1e-6).item() == pytest.approx(expected, rel=1e-9)
    for network in NETWORKS:
        value = diffsort_ndcg(st, yt, m, k=5, network=network, sigmoid="logistic", steepness=1e9).item()
        assert value == pytest.approx(expected, rel=1e-9)
    # PiRank's tree with every relaxation, depth 1 and 2 (networks: Cauchy, steepness 1/tau, tail ~ 1/(pi steepness gap))
    for name in relaxations.SORT_ROWS:
        for depth in (1, 2):
            value = pirank_ndcg(st, yt, m, k=5, tau=1e-13, depth=depth, relaxation=name, straight_through=False).item()
            assert value == pytest.approx(expected, rel=1e-9), (name, depth)


def test_default_relaxation_is_neuralsort_bit_for_bit():
    rng = np.random.default_rng(4)
    s, y = torch.tensor(rng.normal(size=(3, 20))), torch.tensor(rng.integers(0, 5, size=(3, 20)).astype(float))
    m = torch.ones(3, 20, dtype=torch.bool)
    for name in ("pirank_ndcg", "pirank_arp", "arf_relax", "arf"):
        assert torch.equal(get(name)(s, y, m), get(name, relaxation="neuralsort")(s, y, m)), name


def test_arf_generic_logit_path_equals_its_factored_neuralsort_path(monkeypatch):
    rng = np.random.default_rng(5)
    s, y = torch.tensor(rng.normal(size=(3, 9))), torch.tensor(rng.integers(0, 5, size=(3, 9)).astype(float))
    m = torch.tensor([[True] * 9, [True] * 6 + [False] * 3, [True] * 2 + [False] * 7])
    factored = arf._arf_terms(s, y, m, 4, 3, 0.7, 1e-3, with_global=True)
    monkeypatch.setitem(relaxations.SORT_LOGITS, "softsort", relaxations.SORT_LOGITS["neuralsort"])
    generic = arf._arf_terms(s, y, m, 4, 3, 0.7, 1e-3, with_global=True, relaxation="softsort")
    for a, b in zip(factored, generic):
        assert torch.allclose(a, b, rtol=1e-12, atol=0)


def test_arf_refuses_a_sorting_network_and_pirank_an_unknown_relaxation():
    with pytest.raises(ValueError, match="neuralsort, softsort"):
        get("arf", relaxation="bitonic")
    s, y, m = torch.zeros(1, 3), torch.ones(1, 3), torch.ones(1, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="relaxation must be one of neuralsort, softsort, odd_even, bitonic"):
        pirank_ndcg(s, y, m, relaxation="sinkhorn")
