"""Every registered loss on CUDA against the CPU in float64: value, gradient, padding.

The inputs and hyperparameters are the CPU contract's (``tests/losses/test_contract.py``), so a
loss is checked on the GPU exactly as the contract checks it on the CPU, and a loss registered
later is checked here the moment it is registered.

Oracle: the same loss on the CPU in float64. Tolerances (value: relative; gradient: max |diff|
over the largest |gradient| of the list batch):

- CUDA float64: 1e-6 (summation order differs between devices; Sinkhorn's stopping test at
  ``tol=1e-6`` may stop one iteration apart, so no tighter bound holds for every loss);
- CUDA float32, lists of <= 40 items: value 1e-5, gradient 1e-4; lists of up to 1,000 items:
  value 1e-5, gradient 1e-3. These are at least 9x the float32 error measured on the CPU on
  the same inputs (2026-11-26: worst value 2.4e-7; worst gradient 3.4e-6 at <= 40 items,
  1.1e-4 at 1,000 items, ``arf_relax``), so a CUDA kernel may round differently from the CPU
  but not be wrong.

Stochastic losses draw their noise from a CPU generator with the same seed on both sides,
so both see the same draw.
"""

from __future__ import annotations

import pytest
import torch
from losses.test_contract import call, lists, make  # tests/losses: the CPU contract's inputs

from bench.losses import info, names

CUDA = torch.device("cuda")
SHORT = ([40, 25, 33, 7], 40)
LONG = ([1000, 600, 999, 37], 1000)
TOLERANCE = {  # (dtype, case) -> (value, gradient)
    (torch.float64, "short"): (1e-6, 1e-6),
    (torch.float32, "short"): (1e-5, 1e-4),
    (torch.float32, "long"): (1e-5, 1e-3),
}


def _value_and_grad(name, loss, scores, labels, mask):
    s = scores.clone().requires_grad_(True)
    value = call(name, loss, s, labels, mask)
    value.backward()
    return value.detach().double().cpu(), s.grad.double().cpu()


@pytest.mark.parametrize("case", [(torch.float64, "short"), (torch.float32, "short"), (torch.float32, "long")],
                         ids=["f64-short", "f32-short", "f32-long"])
@pytest.mark.parametrize("name", names())
def test_cuda_matches_the_cpu_in_float64(name, case):
    dtype, size = case
    lengths, width = SHORT if size == "short" else LONG
    s, y, m = lists(lengths, width, seed=11, distinct_labels=info(name).stochastic)
    want_v, want_g = _value_and_grad(name, make(name), s, y, m)
    loss = make(name, dtype)
    if isinstance(loss, torch.nn.Module):
        loss = loss.to(CUDA)
    got_v, got_g = _value_and_grad(name, loss, s.to(CUDA, dtype), y.to(CUDA, dtype), m.to(CUDA))
    tol_v, tol_g = TOLERANCE[case]
    assert abs(got_v.item() - want_v.item()) <= tol_v * max(abs(want_v.item()), 1e-12), (got_v, want_v)
    scale = want_g.abs().max().clamp_min(1e-30)
    assert ((got_g - want_g).abs().max() / scale).item() <= tol_g
    assert torch.all(got_g[~m] == 0)


@pytest.mark.parametrize("name", names())
def test_padding_invariance_on_cuda(name):
    """The contract's first test on the GPU: extra padding changes neither value nor gradient."""
    stochastic = info(name).stochastic
    s, y, m = lists([6, 4, 5], 6, seed=1, distinct_labels=stochastic)
    extra_s, extra_y, _ = lists([0, 0, 0], 5, seed=2)
    sp, yp = torch.cat([s, extra_s], dim=1), torch.cat([y, extra_y], dim=1)
    mp = torch.cat([m, torch.zeros(3, 5, dtype=torch.bool)], dim=1)

    def on_cuda(*tensors):
        return [t.to(CUDA) for t in tensors]

    def module(loss):
        return loss.to(CUDA) if isinstance(loss, torch.nn.Module) else loss

    v, g = _value_and_grad(name, module(make(name)), *on_cuda(s, y, m))
    vp, gp = _value_and_grad(name, module(make(name)), *on_cuda(sp, yp, mp))
    assert abs(vp.item() - v.item()) <= 1e-9 * abs(v.item())
    assert torch.allclose(gp[:, :6][m], g[m], rtol=1e-9, atol=1e-12 * g.abs().max().item())
    assert torch.all(gp[~mp] == 0)
