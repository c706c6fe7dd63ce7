"""``bench.losses._common.logsumexp`` against ``torch.logsumexp`` (the oracle): the same bits
for every value, the same gradient except where torch's lies below the exponent floor, and the
losses built on it (NeuralSort cross entropy, its Gumbel version, ARF) bit-identical in value
and gradient to the same losses on ``torch.logsumexp``. Tolerance: none (``torch.equal``)."""

from __future__ import annotations

import math

import pytest
import torch

import bench.losses.arf as arf_module
import bench.losses.neuralsort_ce as neuralsort_ce_module
from bench.losses._common import exp_floor, logsumexp
from bench.losses.arf import ARFLoss, arf_relax
from bench.losses.gumbel import gumbel_neuralsort_ce
from bench.losses.neuralsort import neuralsort_parts, outer_logits
from bench.losses.neuralsort_ce import neuralsort_ce

INF = math.inf


def _cases(dtype):
    g = torch.Generator().manual_seed(0)
    yield torch.randn(5, 7, generator=g, dtype=dtype)
    yield 300 * torch.randn(4, 9, 11, generator=g, dtype=dtype)  # most terms far below the floor
    yield torch.tensor([[0.0, -100.0, -INF], [1.0, 1.0, -200.0], [-INF, -INF, -INF], [INF, 0.0, -5.0],
                        [2.0, 2.0, 2.0], [-1e4, -1e4 - 90, -1e4 - 800]], dtype=dtype)
    s = torch.randn(6, 40, generator=g, dtype=dtype) * 3
    mask = torch.arange(40)[None, :] < torch.tensor([40, 33, 17, 8, 2, 1])[:, None]
    coef, s_, bias, _, _ = neuralsort_parts(s, mask, 0.1)
    yield outer_logits(coef, s_, bias).detach()  # NeuralSort logits: -inf on padding, spread ~1e3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_values_are_torchs_bit_for_bit(dtype, dim):
    for z in _cases(dtype):
        if dim >= z.dim():
            continue
        assert torch.equal(logsumexp(z, dim), torch.logsumexp(z, dim)), z


def test_nan_propagates_as_in_torch():
    z = torch.tensor([[0.0, math.nan, 1.0], [0.0, 1.0, 2.0]])
    ours, theirs = logsumexp(z), torch.logsumexp(z, -1)
    assert torch.isnan(ours[0]) and torch.isnan(theirs[0]) and ours[1] == theirs[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradient_is_torchs_except_below_the_floor(dtype):
    floor = exp_floor(dtype)
    for z in _cases(dtype):
        if not torch.isfinite(torch.logsumexp(z, -1)).all():
            continue
        grad_out = torch.linspace(-2.0, 3.0, z[..., 0].numel(), dtype=dtype).reshape(z.shape[:-1])
        a, b = z.clone().requires_grad_(True), z.clone().requires_grad_(True)
        logsumexp(a, -1).backward(grad_out)
        torch.logsumexp(b, -1).backward(grad_out)
        above = (z - torch.logsumexp(z, -1, keepdim=True)) >= floor
        assert torch.equal(a.grad[above], b.grad[above])
        bound = grad_out[..., None].abs().expand_as(z)[~above] * math.exp(floor)
        # below the floor: e^floor times the incoming gradient here, at most that in torch
        assert torch.allclose(a.grad[~above].abs(), bound, rtol=1e-6, atol=0)
        assert (b.grad[~above].abs() <= bound * (1 + 1e-6)).all()


def test_gradcheck_float64():
    z = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: logsumexp(x, 1), (z,))


def _batch(dtype, length=60, lists=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(lists, length, generator=g, dtype=dtype) * 2
    labels = torch.randint(0, 5, (lists, length), generator=g).to(dtype)
    n = torch.randint(1, length + 1, (lists,), generator=g)
    n[0] = length
    return scores, labels, torch.arange(length)[None, :] < n[:, None]


LOSSES = {
    "neuralsort_ce": (neuralsort_ce_module, lambda s, y, m: neuralsort_ce(s, y, m, tau=0.5)),
    "neuralsort_ce_st": (neuralsort_ce_module, lambda s, y, m: neuralsort_ce(s, y, m, straight_through=True)),
    "gumbel_neuralsort_ce": (neuralsort_ce_module, lambda s, y, m: gumbel_neuralsort_ce(
        s, y, m, generator=torch.Generator().manual_seed(3))),
    "arf": (arf_module, lambda s, y, m: ARFLoss().to(s.dtype)(s, y, m)),
    "arf_small_tau": (arf_module, lambda s, y, m: ARFLoss(tau=0.05).to(s.dtype)(s, y, m)),
    "arf_relax": (arf_module, lambda s, y, m: arf_relax(s, y, m, tau=0.2)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_on_it_are_bit_identical_to_torchs(monkeypatch, name, dtype):
    module, loss = LOSSES[name]
    for seed in range(3):
        scores, labels, mask = _batch(dtype, seed=seed)
        a = scores.clone().requires_grad_(True)
        value = loss(a, labels, mask)
        value.backward()
        with monkeypatch.context() as patched:
            patched.setattr(module, "logsumexp", lambda z, dim=-1: torch.logsumexp(z, dim))
            b = scores.clone().requires_grad_(True)
            reference = loss(b, labels, mask)
            reference.backward()
        assert torch.equal(value, reference), (seed, value, reference)
        assert torch.equal(a.grad, b.grad), (seed, (a.grad - b.grad).abs().max())


def test_other_devices_use_torchs_own():
    z = torch.empty(3, 4, device="meta")
    assert logsumexp(z).shape == (3,) and logsumexp(z).device.type == "meta"
