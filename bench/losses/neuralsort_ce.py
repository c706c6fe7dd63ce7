r"""NeuralSort cross-entropy baseline (the "NeuralSort" method of the PiRank and ARF papers).

Target: the true sort's permutation matrix with uniform mass over tied labels,
:math:`T[i, j] = \mathbb 1(y_j = y_{(i)}) / c_i` with :math:`c_i = \#\{l : y_l = y_{(i)}\}`
and :math:`y_{(i)}` the :math:`i`-th largest label. Prediction: :math:`\hat P(s, \tau)`
(NeuralSort, rows = ranks). The per-list loss is the row-wise cross entropy averaged over
the list's ``n`` rows (TF-Ranking's ``neural_sort_cross_entropy_loss`` averages over rows
too):

.. math::

    \ell = -\frac{1}{n} \sum_{i \le n} \sum_j T[i, j] \log \hat P[i, j].

Computed without forming :math:`T` or :math:`\log \hat P`: with logits
:math:`z_{ij} = c^{NS}_i s_j + b_j` (:func:`~bench.losses.neuralsort.neuralsort_parts`),
:math:`\sum_j T_{ij} \log \hat P_{ij} = c^{NS}_i \bar s_{G(i)} + \bar b_{G(i)} - \mathrm{LSE}_j z_{ij}`,
where :math:`\bar x_{G(i)}` is the mean of :math:`x` over the items whose label equals
:math:`y_{(i)}` (prefix sums over the items sorted by label). Exact, in the log domain (no
clamp), with one :math:`n \times n` logit matrix. A list contributes when it has at least 2
real items; the batch value is the mean of per-list losses over contributing lists.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, masked_mean_over_lists
from bench.losses.neuralsort import neuralsort_parts, outer_logits


def sort_target(labels: Tensor, mask: Tensor) -> Tensor:
    """True descending-sort permutation matrix with tied labels sharing mass, ``[B, L, L]``.

    (Dense; for inspection and tests. The loss never forms it.)

    >>> T = sort_target(torch.tensor([[1.0, 2.0, 1.0]]), torch.ones(1, 3, dtype=torch.bool))
    >>> T[0].tolist()
    [[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.5, 0.0, 0.5]]
    """
    low = torch.full((), float("-inf"), dtype=labels.dtype, device=labels.device)
    ranked = torch.sort(torch.where(mask, labels, low), dim=-1, descending=True).values
    row_ok = torch.arange(labels.shape[-1], device=labels.device)[None, :] < mask.sum(-1, keepdim=True)
    hit = (labels[:, None, :] == ranked[:, :, None]) & mask[:, None, :] & row_ok[:, :, None]
    hit = hit.to(labels.dtype)
    return hit / hit.sum(-1, keepdim=True).clamp(min=1)


def _tie_group_means(labels: Tensor, mask: Tensor, values: Tensor) -> Tensor:
    """``[T values]_i``: mean of each column of ``values`` ([B, L, C]) over rank i's label group."""
    low = torch.full((), float("-inf"), dtype=labels.dtype, device=labels.device)
    order = torch.argsort(torch.where(mask, labels, low), dim=-1, descending=True, stable=True)
    neg = (-torch.where(mask, labels, low).gather(1, order)).contiguous()  # ascending, padding = +inf
    lo = torch.searchsorted(neg, neg, right=False)
    hi = torch.searchsorted(neg, neg, right=True)
    srt = values.gather(1, order[:, :, None].expand_as(values))
    prefix = torch.nn.functional.pad(torch.cumsum(srt, dim=1), (0, 0, 1, 0))
    c = values.shape[-1]
    total = prefix.gather(1, hi[:, :, None].expand(-1, -1, c)) - prefix.gather(1, lo[:, :, None].expand(-1, -1, c))
    return total / (hi - lo).clamp(min=1)[:, :, None].to(values.dtype)


def neuralsort_ce(scores: Tensor, labels: Tensor, mask: Tensor, *, tau: float = 1.0) -> Tensor:
    r"""Mean row-wise cross entropy between the tie-aware true sort matrix and :math:`\hat P(s,\tau)`.

    Batch value: mean over lists with >= 2 real items.

    >>> y = torch.tensor([[2.0, 1.0, 0.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(neuralsort_ce(torch.tensor([[30.0, 20.0, 10.0]]), y, m).item(), 3)  # confident and right
    0.0
    >>> bool(neuralsort_ce(torch.tensor([[1.0, 2.0, 3.0]]), y, m) > 1.0)
    True
    """
    labels = check_inputs(scores, labels, mask)
    coef, s, bias, row_valid, _ = neuralsort_parts(scores, mask, tau)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    z = outer_logits(coef, s, bias)
    lse = torch.logsumexp(z, dim=-1)  # [B, L]
    means = _tie_group_means(labels, mask, torch.stack([s, torch.where(mask, bias, zero)], -1))
    row_ce = lse - (coef * means[..., 0] + means[..., 1])
    n = mask.sum(-1)
    per_list = torch.where(row_valid, row_ce, zero).sum(-1) / n.clamp(min=1).to(scores.dtype)
    return masked_mean_over_lists(per_list, n >= 2, scores)
