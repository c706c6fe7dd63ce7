"""Gumbel-sampled losses (bench/losses/gumbel.py) against independent oracles.

- The no-noise limit: with zero noise the sampled loss is the deterministic loss on the
  (log-softmax of the) scores, exactly (1e-12 relative; ApproxNDCG and the NeuralSort cross
  entropy are shift-invariant, so the log-softmax changes nothing without smoothing's floor).
- TF-Ranking's test expectations, re-derived: its ``gumbel_neural_sort`` test lists the
  Gumbel-perturbed logits it drew (seed 1, sample_size 2) and the hard permutation matrices
  NeuralSort gives them at temperature 0.001; the same perturbed logits through this suite's
  sampler transformation and NeuralSort give the same matrices (1e-3 absolute, TF-Ranking's
  own tolerance). Its ``GumbelSampler`` test's sampled scores are log-probabilities: the
  transformation maps them to themselves (1e-3 relative).
- The expectation: at a sharp ApproxNDCG (alpha = 1e4) the Gumbel loss averaged over many
  draws is minus the expected NDCG of the Plackett-Luce ranking distribution, by enumeration
  (``helpers.exact_pl_expected_ndcg``), within 5 standard errors.
- Finite differences for a fixed draw and padding invariance are checked for every loss by
  ``tests/losses/test_contract.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.losses.approxndcg import approxndcg
from bench.losses.gumbel import gumbel_approxndcg, gumbel_neuralsort_ce, gumbel_noise, on_samples, perturbed_scores
from bench.losses.neuralsort import neuralsort
from bench.losses.neuralsort_ce import neuralsort_ce
from helpers import exact_pl_expected_ndcg

F64 = torch.float64


def _lists(seed=0):
    rng = np.random.default_rng(seed)
    s = torch.tensor(rng.normal(size=(3, 6)), dtype=F64)
    y = torch.tensor(rng.integers(0, 5, size=(3, 6)), dtype=F64)
    m = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 5 + [False]])
    return s, y, m


@pytest.mark.parametrize("loss, hyper", [(approxndcg, {"alpha": 10.0}), (neuralsort_ce, {"tau": 0.5})])
@pytest.mark.parametrize("temperature", [1.0, 0.5])
@pytest.mark.parametrize("smoothing", [None, 1e-20])
def test_without_noise_the_sampled_loss_is_the_deterministic_one(loss, hyper, temperature, smoothing):
    s, y, m = _lists()
    zero = torch.zeros(3, 4, 6, dtype=F64)
    got = on_samples(loss, s, y, m, zero, temperature=temperature, smoothing=smoothing, **hyper)
    assert got.item() == pytest.approx(loss(s / temperature, y, m, **hyper).item(), rel=1e-12)


def test_the_noise_is_standard_gumbel():
    """Mean (Euler's gamma) and variance (pi^2 / 6) of 600,000 draws, within 5 standard errors."""
    g = gumbel_noise(torch.ones(100, 60, dtype=torch.bool), 100, F64, torch.Generator().manual_seed(0)).flatten()
    n = g.numel()
    assert abs(g.mean().item() - 0.5772156649) <= 5 * math.sqrt(math.pi**2 / 6 / n)
    assert abs(g.var().item() - math.pi**2 / 6) <= 5 * math.sqrt(2.4 * math.pi**4 / 36 / n)  # excess kurtosis 2.4


def test_float32_and_float64_calls_see_the_same_noise():
    """The draws are made in float64 and rounded: the same generator state gives one noise."""
    m = torch.ones(3, 7, dtype=torch.bool)
    single = gumbel_noise(m, 5, torch.float32, torch.Generator().manual_seed(4))
    double = gumbel_noise(m, 5, F64, torch.Generator().manual_seed(4))
    assert single.dtype == torch.float32 and torch.equal(single, double.float())
    s, y, mm = _lists()
    values = [gumbel_approxndcg(s.to(dt), y.to(dt), mm, generator=torch.Generator().manual_seed(1)).item()
              for dt in (torch.float32, F64)]
    assert values[0] == pytest.approx(values[1], rel=1e-5)


def test_tf_ranking_gumbel_neural_sort_expectations_rederived():
    scores = torch.tensor([[1.4, -2.8, -0.4], [0.0, 1.8, 10.2], [1.0, 1.2, -3.2]], dtype=F64)
    # tensorflow_ranking losses_impl_test.test_gumbel_neural_sort: the perturbed logits it drew
    sampled = torch.tensor([[[-0.291, -1.643, -2.826], [-0.0866, -2.924, -3.530]],
                            [[-12.42, -9.492, -7.939e-5], [-8.859, -6.830, -1.223e-3]],
                            [[-0.8930, -0.5266, -45.80183], [-0.6650, -0.7220, -45.94149]]], dtype=F64)
    expected = torch.tensor([[[[1, 0, 0], [0, 1, 0], [0, 0, 1]], [[1, 0, 0], [0, 1, 0], [0, 0, 1]]],
                             [[[0, 0, 1], [0, 1, 0], [1, 0, 0]], [[0, 0, 1], [0, 1, 0], [1, 0, 0]]],
                             [[[0, 1, 0], [1, 0, 0], [0, 0, 1]], [[1, 0, 0], [0, 1, 0], [0, 0, 1]]]], dtype=F64)
    m = torch.ones(3, 3, dtype=torch.bool)
    x = perturbed_scores(scores, m, sampled - scores[:, None, :], 1.0, 1e-20)
    p = neuralsort(x, m[:, None, :].expand(3, 2, 3), tau=0.001)
    torch.testing.assert_close(p, expected, atol=1e-3, rtol=0)


def test_tf_ranking_gumbel_sampler_scores_are_log_probabilities_it_keeps():
    scores = torch.tensor([[1.4, -2.8, -0.4], [0.0, 1.8, 10.2]], dtype=F64)
    # tensorflow_ranking losses_impl_test.test_gumbel_softmax_sample (its valid lists)
    sampled = torch.tensor([[[-1.7508768e-1, -4.6947412, -1.887345], [-3.6629683e-1, -3.4472363, -1.2914587]],
                            [[-7.654705, -8.3514204, -7.1014347e-4], [-10.080214, -8.7212124, -2.0500139e-4]]],
                           dtype=F64)
    m = torch.ones(2, 3, dtype=torch.bool)
    x = perturbed_scores(scores, m, sampled - scores[:, None, :], 1.0, 1e-20)
    torch.testing.assert_close(x, sampled, rtol=1e-3, atol=1e-6)


def test_sharp_gumbel_approxndcg_averages_to_minus_the_expected_ndcg_of_the_plackett_luce_policy():
    """40 groups of 200 copies of one list, 8 draws each: the group means' mean against the
    enumerated expectation, within 5 standard errors (from the groups' spread)."""
    scores, labels = [0.4, -0.3, 1.0, 0.0], [2, 0, 3, 1]
    s = torch.tensor(scores, dtype=F64).repeat(200, 1)
    y = torch.tensor(labels, dtype=F64).repeat(200, 1)
    m = torch.ones_like(s, dtype=torch.bool)
    groups = np.array([gumbel_approxndcg(s, y, m, alpha=1e4, smoothing=None, generator=torch.Generator().manual_seed(g)).item()
                       for g in range(40)])
    exact = exact_pl_expected_ndcg(torch.tensor(scores, dtype=F64), labels).item()
    assert abs(-groups.mean() - exact) <= 5 * groups.std(ddof=1) / math.sqrt(len(groups))
    assert groups.std() > 0  # the draws differ between groups


@pytest.mark.parametrize("loss", [gumbel_approxndcg, gumbel_neuralsort_ce])
def test_bad_sampling_hyperparameters_are_refused(loss):
    s, y, m = _lists()
    with pytest.raises(ValueError, match="^gumbel_temperature must be > 0, got 0.0$"):
        loss(s, y, m, gumbel_temperature=0.0)
    with pytest.raises(ValueError, match="^smoothing must be > 0, got -1.0$"):
        loss(s, y, m, smoothing=-1.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("loss", [gumbel_approxndcg, gumbel_neuralsort_ce])
def test_cuda_with_the_same_noise_gives_the_cpu_value(loss):
    s, y, m = _lists()
    noise = gumbel_noise(m, 8, F64, torch.Generator().manual_seed(0))
    base = {gumbel_approxndcg: approxndcg, gumbel_neuralsort_ce: neuralsort_ce}[loss]
    cpu = on_samples(base, s, y, m, noise, temperature=1.0, smoothing=1e-20)
    gpu = on_samples(base, s.cuda(), y.cuda(), m.cuda(), noise.cuda(), temperature=1.0, smoothing=1e-20)
    assert gpu.item() == pytest.approx(cpu.item(), rel=1e-10)
    sc = s.cuda().requires_grad_(True)
    loss(sc, y.cuda(), m.cuda(), generator=torch.Generator(device="cuda").manual_seed(0)).backward()
    assert torch.all(torch.isfinite(sc.grad))
