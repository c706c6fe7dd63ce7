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

Straight-through (``straight_through=True``; PiRank's Table 2 trains its NeuralSort baseline
this way): the forward value is the loss of the *hard* sort and the gradient is the relaxed
loss's, ``hard + (relaxed - relaxed.detach())`` per list (:func:`bench.losses.pirank._combine`,
as for ``pirank_ndcg``). The default is ``False``: the relaxed loss above.

*The hard value.* :math:`P` is the permutation matrix of the exact descending sort of the
scores, :math:`P[i, j] = \mathbb 1(j = \pi(i))`, ties in the scores broken by position as
``bench.metrics.evaluate(ties="stable")`` ranks them (the hard value of ``pirank_ndcg``). The
cross entropy :math:`-\sum_j T_{ij} \log P_{ij}` against it is infinite whenever the hard sort
puts an item of the wrong label at rank :math:`i`. PiRank's public code (ermongroup/pirank,
``pirank_simple.py``, ``neuralsort_permutation_loss`` with ``--ste``, its default) keeps it
finite: it feeds the straight-through matrix (value NeuralSort at temperature ``1e-10``, i.e.
the hard sort) into a softmax cross entropy whose logits are :math:`\log(P + \epsilon)`,
:math:`\epsilon = 10^{-10}`, so row :math:`i` costs
:math:`-\sum_j T_{ij} \log\big((P_{ij} + \epsilon) / \sum_k (P_{ik} + \epsilon)\big)`, and
averages the rows. Its target is NeuralSort of the labels at that temperature, which is
:math:`T` (tied labels share a row's mass; tested). The same value here, in closed form: with
:math:`t_i = T[i, \pi(i)] = \mathbb 1(y_{\pi(i)} = y_{(i)}) / c_i` the target mass the hard
sort gets right in row :math:`i`,

.. math::

    \ell^{hard} = \frac{1}{n} \sum_{i \le n} \Big( \log(1 + n\epsilon) - t_i \log(1 + \epsilon)
                  - (1 - t_i) \log \epsilon \Big),

about :math:`23.03\,(1 - t_i)` per row: zero for a hard sort that agrees with distinct labels,
:math:`23.03 (1 - 1/c_i)` per row of a tie group even when the sort is right (the target spreads
what a hard row cannot). Two choices differ from that code: the row normaliser counts the
list's ``n`` real items, not the padded width (padding invariance), and tied *scores* are
broken by position, where NeuralSort at ``1e-10`` would split the row among them (tied scores
have probability 0 in training; a permutation keeps the value a function of one ranking).

*The gradient* is the relaxed loss's, exactly (this suite's straight-through rule, as for
``pirank_ndcg``: value hard, gradient soft; tested against ``straight_through=False``). Here
this suite differs from PiRank's code, which applies the estimator to the matrix
(:math:`P_{st} = P_{soft} + \mathrm{sg}(P_{hard} - P_{soft})` inside the loss): its gradient is
the cross entropy's derivative *at the hard matrix*,
:math:`-T_{ij}/(P_{ij} + \epsilon) + 1/(1 + n\epsilon)`, chained through
:math:`\partial \hat P / \partial s`, which weighs every entry the hard sort misses by
:math:`1/\epsilon = 10^{10}` rather than by :math:`1/\hat P_{ij}`. For ``pirank_ndcg`` the two
estimators coincide (its loss is linear in :math:`\hat P`); for this loss they do not.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, logsumexp, masked_mean_over_lists
from bench.losses.neuralsort import neuralsort_parts, outer_logits
from bench.losses.pirank import _combine, hard_order

#: PiRank's floor under the hard matrix's zeros, its ``log(P_hat + 1e-10)`` (module docstring)
HARD_EPS = 1e-10


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


def hard_row_targets(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    r""":math:`t_i = T[i, \pi(i)]`, the target mass of the item the hard sort puts at rank ``i``, ``[B, L]``.

    :math:`\pi` sorts by descending score, ties by position; rows ``i >= n`` are 0. Computed
    from sorts and prefix counts, without forming :math:`T`.

    >>> y = torch.tensor([[1.0, 2.0, 1.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> hard_row_targets(torch.tensor([[0.5, 0.1, 0.9]]), y, m).tolist()  # ranks: item 2, 0, 1
    [[0.0, 0.5, 0.0]]
    """
    low = torch.full((), float("-inf"), dtype=labels.dtype, device=labels.device)
    neg = torch.sort(-torch.where(mask, labels, low), dim=-1).values.contiguous()  # -y_(i); padding +inf
    group = torch.searchsorted(neg, neg, right=True) - torch.searchsorted(neg, neg, right=False)  # c_i
    placed = labels.gather(1, hard_order(scores.detach(), mask))  # y_pi(i)
    row_ok = torch.arange(labels.shape[-1], device=labels.device)[None, :] < mask.sum(-1, keepdim=True)
    hit = (placed == -neg) & row_ok
    return hit.to(labels.dtype) / group.clamp(min=1).to(labels.dtype)


def _hard_per_list(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    r"""The straight-through forward value of each list (module docstring, :math:`\ell^{hard}`), ``[B]``."""
    t = hard_row_targets(scores, labels, mask)
    n = mask.sum(-1, keepdim=True).to(scores.dtype)
    eps = torch.tensor(HARD_EPS, dtype=scores.dtype, device=scores.device)
    # log1p: in float32 log(1 + 1e-10) is 0 and log(1 + n eps) loses every digit
    row = torch.log1p(n * eps) - t * torch.log1p(eps) - (1 - t) * torch.log(eps)
    row_ok = torch.arange(labels.shape[-1], device=labels.device)[None, :] < mask.sum(-1, keepdim=True)
    return torch.where(row_ok, row, torch.zeros((), dtype=row.dtype, device=row.device)).sum(-1) / n.clamp(min=1)[:, 0]


def neuralsort_ce(scores: Tensor, labels: Tensor, mask: Tensor, *, tau: float = 1.0, straight_through: bool = False) -> Tensor:
    r"""Mean row-wise cross entropy between the tie-aware true sort matrix and :math:`\hat P(s,\tau)`.

    ``straight_through=True``: the value is the hard sort's (module docstring,
    :math:`\ell^{hard}`, PiRank's NeuralSort baseline) and the gradient the relaxed loss's.
    Batch value: mean over lists with >= 2 real items.

    >>> y = torch.tensor([[2.0, 1.0, 0.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(neuralsort_ce(torch.tensor([[30.0, 20.0, 10.0]]), y, m).item(), 3)  # confident and right
    0.0
    >>> bool(neuralsort_ce(torch.tensor([[1.0, 2.0, 3.0]]), y, m) > 1.0)
    True
    >>> s = torch.tensor([[2.0, 3.0, 1.0]])  # the hard sort misses ranks 1 and 2: 2 * 23.026 / 3
    >>> round(neuralsort_ce(s, y, m, straight_through=True).item(), 3)
    15.351
    """
    labels = check_inputs(scores, labels, mask)
    coef, s, bias, row_valid, _ = neuralsort_parts(scores, mask, tau)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    z = outer_logits(coef, s, bias)
    lse = logsumexp(z, dim=-1)  # [B, L]
    means = _tie_group_means(labels, mask, torch.stack([s, torch.where(mask, bias, zero)], -1))
    row_ce = lse - (coef * means[..., 0] + means[..., 1])
    n = mask.sum(-1)
    per_list = torch.where(row_valid, row_ce, zero).sum(-1) / n.clamp(min=1).to(scores.dtype)
    if straight_through:
        per_list = _combine(per_list, _hard_per_list(scores, labels, mask), True)
    return masked_mean_over_lists(per_list, n >= 2, scores)
