r"""SoftSort relaxed sort matrix (Prillo & Eisenschlos, ICML 2020), masked and padding-invariant.

For a list :math:`s` of :math:`n` real items and :math:`s_{(i)}` its :math:`i`-th largest
score, row :math:`i` (rank :math:`i`, 1-based) of the relaxed descending-sort matrix is

.. math::

    \hat P[i, :] = \mathrm{softmax}\big(-\lvert s_{(i)} - s \rvert^{d} / \tau\big),

``d = power`` (1 by default: the paper's choice, :math:`d(x, y) = |x - y|`). As
:math:`\tau \to 0` every row puts its mass on the item of rank :math:`i` (for distinct
scores): the permutation matrix of the descending sort. Row :math:`i` is unimodal around that
item, and tied scores share their rows' mass equally.

Conventions fixed here (those of :mod:`bench.losses.neuralsort`, so the two matrices are
interchangeable in PiRank and ARF):

* ``n`` is each list's own number of real items; padded columns get logit ``-inf``
  (probability exactly 0), padded scores are replaced by 0 before any arithmetic (their
  gradient is exactly 0), rows :math:`i > n` are zero rows.
* :math:`s_{(i)}` is ``torch.sort``'s value, so the gradient flows through the sorted scores
  too, as in the paper (``sort`` is differentiable almost everywhere).
* Only the first ``k`` rows are built when ``k`` is given: :math:`O(n \log n + k n)` per list.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bench.losses._common import check_k, check_positive


def softsort_logits(scores: Tensor, mask: Tensor, tau: float, k: int | None = None, *, power: float = 1.0):
    r"""Logits :math:`-|s_{(i)} - s_j|^d / \tau` of the first ``k`` rows, flattened to ``[N, k, L]``.

    Returns ``(z, row_valid, col_ok)`` in the layout of
    :func:`bench.losses.neuralsort.neuralsort_logits`: padded columns ``-inf`` (all columns kept
    for a list with no real item, whose rows are all invalid), ``row_valid[N, k]`` (``i <= n``).
    """
    if scores.shape != mask.shape or scores.dim() < 1:
        raise ValueError(f"scores {tuple(scores.shape)} and mask {tuple(mask.shape)} must have one shape [..., L]")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    check_positive(tau, "tau")
    check_positive(power, "power")
    k = check_k(k)
    length = scores.shape[-1]
    kk = length if k is None else min(k, length)
    dtype, device = scores.dtype, scores.device
    rows = math.prod(scores.shape[:-1])  # not reshape(-1, L): ambiguous for L = 0
    m = mask.reshape(rows, length)
    zero = torch.zeros((), dtype=dtype, device=device)
    s = torch.where(m, scores.reshape(rows, length), zero)
    low = torch.full((), float("-inf"), dtype=dtype, device=device)
    top = torch.sort(torch.where(m, s, low), dim=-1, descending=True).values[:, :kk]  # s_(1..k), padding -inf
    n = m.sum(-1)
    row_valid = torch.arange(kk, device=device)[None, :] < n[:, None]
    top = torch.where(row_valid, top, zero)
    gap = (top[:, :, None] - s[:, None, :]).abs()
    z = -(gap if power == 1.0 else gap**power) / tau
    col_ok = m | (n == 0)[:, None]
    return torch.where(col_ok[:, None, :], z, low), row_valid, col_ok


def softsort(scores: Tensor, mask: Tensor, tau: float = 1.0, k: int | None = None, *, power: float = 1.0) -> Tensor:
    r"""Relaxed descending-sort matrix, first ``k`` rows: shape ``[..., k, L]`` (rows = ranks).

    >>> s = torch.tensor([[1.0, 3.0, 2.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> softsort(s, m, tau=1e-3).tolist()  # tau -> 0: the permutation matrix of the descending sort
    [[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]]
    >>> [round(v, 4) for v in softsort(s, m, tau=1.0, k=1)[0, 0].tolist()]  # softmax(-(2, 0, 1))
    [0.09, 0.6652, 0.2447]
    """
    z, row_valid, _ = softsort_logits(scores, mask, tau, k, power=power)
    p = torch.softmax(z, dim=-1)
    p = torch.where(row_valid[:, :, None], p, torch.zeros((), dtype=p.dtype, device=p.device))
    return p.reshape(*scores.shape[:-1], z.shape[1], scores.shape[-1])
