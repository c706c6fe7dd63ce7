r"""NeuralSort cross-entropy baseline (the "NeuralSort" method of the PiRank and ARF papers).

Target: the true sort's permutation matrix with uniform mass over tied labels,
:math:`T[i, j] = \mathbb 1(y_j = y_{(i)}) / \#\{l : y_l = y_{(i)}\}` where :math:`y_{(i)}`
is the :math:`i`-th largest label. Prediction: :math:`\hat P(s, \tau)` (NeuralSort, rows =
ranks). The per-list loss is the row-wise cross entropy averaged over the list's ``n`` rows
(TF-Ranking's ``neural_sort_cross_entropy_loss`` averages over rows too):

.. math::

    \ell = -\frac{1}{n} \sum_{i \le n} \sum_j T[i, j] \log \hat P[i, j],

with :math:`\log \hat P` a log-softmax (exact, no clamp). A list contributes when it has at
least 2 real items; the batch value is the mean of per-list losses over contributing lists.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import masked_mean_over_lists
from bench.losses.neuralsort import check_loss_inputs, neuralsort_log


def sort_target(labels: Tensor, mask: Tensor) -> Tensor:
    """True descending-sort permutation matrix with tied labels sharing mass, ``[B, L, L]``.

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


def neuralsort_ce(scores: Tensor, labels: Tensor, mask: Tensor, tau: float = 1.0) -> Tensor:
    r"""Mean row-wise cross entropy between the tie-aware true sort matrix and :math:`\hat P(s,\tau)`.

    Batch value: mean over lists with >= 2 real items.

    >>> y = torch.tensor([[2.0, 1.0, 0.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(neuralsort_ce(torch.tensor([[30.0, 20.0, 10.0]]), y, m).item(), 3)  # confident and right
    0.0
    >>> bool(neuralsort_ce(torch.tensor([[1.0, 2.0, 3.0]]), y, m) > 1.0)
    True
    """
    labels = check_loss_inputs(scores, labels, mask)
    logp = neuralsort_log(scores, mask, tau)
    target = sort_target(labels, mask)
    n = mask.sum(-1)
    per_list = -(target * logp).sum((1, 2)) / n.clamp(min=1).to(scores.dtype)
    return masked_mean_over_lists(per_list, n >= 2, scores)
