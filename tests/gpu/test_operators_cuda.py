"""The fast soft rank and soft sort on CUDA: the isotonic regression (PAV) runs on the host, so a
CUDA call copies its inputs to the host and its result back, each way, forward and backward.

Oracle: the same operator on the CPU in float64, on the same inputs (ties, padded lists, strengths
from 0.01 to 10). Tolerances: the CUDA result in float64 equals the CPU's to 1e-12 (the same host
code computes both; only the device copies differ, which are exact), in float32 to 1e-5 relative
(the CPU float64 reference rounded once to float32 and back); gradients likewise. The outputs
and gradients stay on the input's device, in its dtype.
"""

from __future__ import annotations

import pytest
import torch

from bench.losses.permutahedron import soft_rank, soft_sort

CUDA = torch.device("cuda")


def _inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    scores = torch.randn(6, 300, generator=gen, dtype=torch.float64)
    scores[0, :40] = scores[0, 0]  # a run of ties
    scores[1] = torch.round(scores[1] * 2) / 2  # many ties
    lengths = torch.tensor([300, 299, 150, 37, 2, 1])
    mask = torch.arange(300)[None, :] < lengths[:, None]
    return scores.to(dtype), mask


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("regularization", ["l2", "kl"])
@pytest.mark.parametrize("epsilon", [0.01, 1.0, 10.0])
@pytest.mark.parametrize("operator", [soft_rank, soft_sort], ids=["soft_rank", "soft_sort"])
def test_the_host_round_trip_on_cuda_equals_the_cpu(operator, epsilon, regularization, dtype):
    scores, mask = _inputs(torch.float64)
    cotangent = torch.randn(scores.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    cpu = scores.clone().requires_grad_(True)
    ref = operator(cpu, mask, epsilon=epsilon, regularization=regularization)
    (ref * cotangent).sum().backward()
    dev = scores.to(CUDA, dtype).requires_grad_(True)
    out = operator(dev, mask.to(CUDA), epsilon=epsilon, regularization=regularization)
    (out * cotangent.to(CUDA, dtype)).sum().backward()
    assert out.device.type == "cuda" and out.dtype == dtype and dev.grad.device.type == "cuda"
    rtol, atol = (1e-12, 1e-12) if dtype == torch.float64 else (1e-5, 1e-5)
    torch.testing.assert_close(out.detach().double().cpu(), ref.detach(), rtol=rtol, atol=atol * ref.abs().max().item())
    torch.testing.assert_close(dev.grad.double().cpu(), cpu.grad, rtol=rtol,
                               atol=atol * max(cpu.grad.abs().max().item(), 1.0))
    assert torch.isfinite(dev.grad).all()
