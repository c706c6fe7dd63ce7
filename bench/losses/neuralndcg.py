r"""NeuralNDCG and NeuralNDCG-Transposed (Pobrotyn & Bialobrzeski 2021).

With :math:`\hat P` the NeuralSort matrix of the scores (rows = ranks, columns = items; see
:mod:`bench.losses.neuralsort`), gains :math:`g = 2^y - 1`, discounts
:math:`d_j = 1/\log_2(1+j)` for :math:`j \le k` and 0 beyond:

.. math::

    \mathrm{NeuralNDCG@k} = \frac{\sum_{j \le k} [\tilde P g]_j\, d_j}{\mathrm{maxDCG@k}},
    \quad \tilde P = \mathrm{Sinkhorn}(\hat P),
    \qquad
    \mathrm{NeuralNDCG^T@k} = \frac{\sum_i g_i [\tilde P_T d]_i}{\mathrm{maxDCG@k}},
    \quad \tilde P_T = \mathrm{Sinkhorn}(\hat P^\top).

The losses are the negatives. Sinkhorn runs on each list's real block (``n`` ranks by ``n``
items), alternating row then column normalisation until every row and column sums to 1
within ``tol`` or ``max_iter`` iterations (the paper's footnote 2: 1e-6 and 30); for
:math:`\hat P^\top` the first normalisation is over its rows, i.e. the columns of
:math:`\hat P`. Both values are bilinear forms :math:`a^\top \tilde P b`, evaluated from the
scaling vectors without materialising :math:`\tilde P`, with the softmax of the NeuralSort logits
fused in (:func:`~bench.losses.sinkhorn.softmax_sinkhorn_bilinear`).

``k=None`` is @max (each list's own length). A list contributes when it has at least 2 real
items and ``maxDCG@k > 0``; the batch value is the mean of the per-list losses over
contributing lists (not a ratio of batch sums).
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, check_k, discounts, gain, masked_mean_over_lists, max_dcg
from bench.losses.neuralsort import neuralsort_parts
from bench.losses.sinkhorn import softmax_sinkhorn_bilinear


def _parts(scores: Tensor, labels: Tensor, mask: Tensor, tau: float, k: int | None):
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    length = scores.shape[-1]
    # The logits' factors, z_ij = coef_i s_j + bias_j: the softmax (padded columns exactly 0;
    # rows i > n ignored) is taken in place inside the Sinkhorn function.
    coef, s, bias, row_valid, _ = neuralsort_parts(scores, mask, tau)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    g = torch.where(mask, gain(labels), zero)
    kk = length if k is None else min(k, length)
    ranks = torch.arange(length, device=scores.device)
    dvec = torch.where(row_valid & (ranks < kk)[None, :], discounts(length, like=scores)[None, :], zero)
    ideal = max_dcg(labels, mask, k)
    contributes = (mask.sum(-1) >= 2) & (ideal > 0)
    return (coef, s, bias), row_valid, g, dvec, torch.where(ideal > 0, ideal, torch.ones_like(ideal)), contributes


def neuralndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, tau: float = 1.0, k: int | None = None,
               max_iter: int = 30, tol: float = 1e-6) -> Tensor:
    r"""NeuralNDCG@k loss, :math:`-\sum_{j\le k} [\mathrm{Sinkhorn}(\hat P) g]_j d_j / \mathrm{maxDCG@k}`.

    Batch value: mean over contributing lists (>= 2 real items and maxDCG@k > 0).

    >>> s = torch.tensor([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])
    >>> y = torch.tensor([[2.0, 1.0, 0.0], [2.0, 1.0, 0.0]])
    >>> m = torch.ones(2, 3, dtype=torch.bool)
    >>> good = neuralndcg(s[:1], y[:1], m[:1], tau=0.01); bad = neuralndcg(s[1:], y[1:], m[1:], tau=0.01)
    >>> round(good.item(), 4), round(bad.item(), 4)  # -NDCG of the ideal and reversed order
    (-1.0, -0.5869)
    """
    (coef, s, bias), row_valid, g, dvec, ideal, contributes = _parts(scores, labels, mask, tau, k)
    dcg = softmax_sinkhorn_bilinear(coef, s, bias, dvec, g, row_valid, mask, max_iter, tol)
    return masked_mean_over_lists(-dcg / ideal, contributes, scores)


def neuralndcg_transposed(scores: Tensor, labels: Tensor, mask: Tensor, *, tau: float = 1.0,
                          k: int | None = None, max_iter: int = 30, tol: float = 1e-6) -> Tensor:
    r"""NeuralNDCG-Transposed@k loss, :math:`-\sum_i g_i [\mathrm{Sinkhorn}(\hat P^\top) d]_i / \mathrm{maxDCG@k}`.

    Batch value: mean over contributing lists (>= 2 real items and maxDCG@k > 0).

    >>> s = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3]], dtype=torch.float64)
    >>> y = torch.tensor([[2.0, 4, 1, 0, 4, 3]], dtype=torch.float64)
    >>> m = torch.ones(1, 6, dtype=torch.bool)
    >>> # tau -> 0: the hard NDCG@3, (15 + 3/log2(3) + 7/2) / (15 + 15/log2(3) + 7/2)
    >>> round(neuralndcg_transposed(s, y, m, tau=1e-3, k=3).item(), 6)
    -0.729253
    """
    (coef, s, bias), row_valid, g, dvec, ideal, contributes = _parts(scores, labels, mask, tau, k)
    dcg = softmax_sinkhorn_bilinear(coef, s, bias, g, dvec, mask, row_valid, max_iter, tol, transpose=True)
    return masked_mean_over_lists(-dcg / ideal, contributes, scores)
