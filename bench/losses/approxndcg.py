r"""ApproxNDCG (Qin, Liu & Li, 2010; Bruch et al., 2019)."""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import (
    check_inputs,
    check_positive,
    gain,
    masked_mean_over_lists,
    masked_scores,
    max_dcg,
    n_real,
)


class _ApproxRanks(torch.autograd.Function):
    r"""Fused smooth ranks with a hand-written backward (one ``[B, L, L]`` buffer).

    With :math:`P_{ij} = \sigma(a_j - a_i)`, :math:`a = \alpha s`, real-item mask
    :math:`m` and upstream gradient :math:`c = \partial \ell / \partial \hat\pi`:
    :math:`\partial \ell / \partial a_k = m_k \sum_i c_i P'_{ik} - c_k \sum_j m_j P'_{kj}`
    where :math:`P' = P (1 - P)`. Once differentiable.
    """

    @staticmethod
    def forward(ctx, a: Tensor, m: Tensor) -> Tensor:  # type: ignore[override]
        # One [B, L, L] buffer, every step in place: differences, sigmoid, then P'.
        p = torch.sigmoid_(a.unsqueeze(-2) - a.unsqueeze(-1))  # [b, i, j] = sigmoid(a_j - a_i)
        # sigma(0) = 1/2 exactly, so removing the j = i term this way is exact.
        ranks = 0.5 + torch.bmm(p, m.unsqueeze(-1)).squeeze(-1)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(p.sub_(p * p), m)  # P' = P - P^2 in place (addcmul_ would fuse the multiply: other bits)
        return ranks

    @staticmethod
    def backward(ctx, c: Tensor):  # type: ignore[override]
        if not ctx.needs_input_grad[0]:
            return None, None
        dp, m = ctx.saved_tensors
        col = torch.bmm(c.unsqueeze(-2), dp).squeeze(-2)  # sum_i c_i P'_ik
        row = torch.bmm(dp, m.unsqueeze(-1)).squeeze(-1)  # sum_j m_j P'_kj
        return m * col - c * row, None


def approx_ranks(scores: Tensor, mask: Tensor, alpha: float) -> Tensor:
    r"""Smooth ranks :math:`\hat\pi_i = 1 + \sum_{j \ne i,\ j\ \mathrm{real}} \sigma(\alpha (s_j - s_i))`.

    Padded items are excluded from every sum; their own entries are meaningless (finite).

    >>> r = approx_ranks(torch.tensor([[3.0, 1.0, 2.0]]), torch.ones(1, 3, dtype=torch.bool), 1e3)
    >>> [round(v, 6) for v in r[0].tolist()]
    [1.0, 3.0, 2.0]
    """
    a = alpha * masked_scores(scores, mask)
    return _ApproxRanks.apply(a, mask.to(a.dtype))


def approxndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, alpha: float = 10.0) -> Tensor:
    r"""Negative ApproxNDCG.

    .. math::
        \ell = -\frac{1}{\mathrm{maxDCG}} \sum_i \frac{g(y_i)}{\log_2(1 + \hat\pi_i)},
        \qquad \hat\pi_i = 1 + \sum_{j \ne i} \sigma\bigl(\alpha (s_j - s_i)\bigr)

    over real items; ``alpha = 10`` is TF-Ranking's temperature 0.1 (the NeuralNDCG paper
    used ``alpha = 1``). As ``alpha -> inf`` the loss tends to ``-NDCG`` of the score order.
    A list contributes when it has >= 2 real items and ``maxDCG > 0``; batch value = mean
    of the per-list losses over contributing lists.

    >>> s = torch.tensor([[2.0, 1.0]]); y = torch.tensor([[0.0, 1.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> round(approxndcg(s, y, m, alpha=1e3).item(), 4)  # relevant item at rank 2: -1/log2(3)
    -0.6309
    """
    labels = check_inputs(scores, labels, mask)
    check_positive(alpha, "alpha")
    s = masked_scores(scores, mask)
    ranks = approx_ranks(scores, mask, alpha)
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    g = torch.where(mask, gain(labels), zero)
    ideal = max_dcg(labels, mask)
    contributes = (n_real(mask) >= 2) & (ideal > 0)
    dcg = (g / torch.log2(1.0 + ranks)).sum(dim=-1)
    per_list = -dcg / torch.where(ideal > 0, ideal, 1.0)
    return masked_mean_over_lists(per_list, contributes, s)
