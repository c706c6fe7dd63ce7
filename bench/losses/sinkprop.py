r"""SinkProp (Adams & Zemel 2011): expected NDCG@k under an incomplete Sinkhorn normalisation.

Pre-Sinkhorn matrix from the smoothed indicator of Section 4.2 (after SmoothRank); rows are
items, columns are ranks, and column ``j`` is centred on the ``j``-th largest score:

.. math::

    M_{ij} = \exp\!\big(-(s_i - s_{\pi(j)})^2 / \sigma\big) + \epsilon,
    \qquad \pi = \text{argsort}(s) \text{ descending}.

``n_iter`` incomplete Sinkhorn normalisations (each a row then a column normalisation) give
:math:`D`, and, with gains :math:`g = 2^y - 1` and discounts :math:`d_j = 1/\log_2(1+j)`,

.. math::

    E[\mathrm{NDCG@k}] = \frac{\sum_i \sum_{j \le k} D_{ij}\, g_i\, d_j}{\mathrm{maxDCG@k}}
    \quad \text{(eq. 4)}, \qquad \text{loss} = -E[\mathrm{NDCG@k}].

The gradient flows through every normalisation and through both :math:`s_i` and the sorted
:math:`s_{\pi(j)}` (no detached iterations); it is computed by the vector backward of
:func:`~bench.losses.sinkhorn.sinkhorn_bilinear`, which is the exact gradient of the
unrolled iterations without storing a matrix per iteration. :math:`M` is built on each list's
real ``n x n`` block only (``eps`` is not added to padding). ``k=None`` is the full list, as
in the paper. A list contributes when it has at least 2 real items and ``maxDCG@k > 0``;
the batch value is the mean of per-list losses over contributing lists. Test-time ranking is
by the scores (the mode of each row).
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, check_k, check_positive, discounts, gain, masked_mean_over_lists, max_dcg
from bench.losses.sinkhorn import sinkhorn_bilinear


def sinkprop_matrix(scores: Tensor, mask: Tensor, sigma: float = 1.0, eps: float = 1e-3) -> Tensor:
    r"""The pre-Sinkhorn matrix :math:`M` (items x ranks), zero outside each list's real block.

    >>> M = sinkprop_matrix(torch.tensor([[0.0, 2.0]]), torch.ones(1, 2, dtype=torch.bool), sigma=1.0, eps=0.0)
    >>> [[round(x, 4) for x in row] for row in M[0].tolist()]  # column 1 is centred on 2.0
    [[0.0183, 1.0], [1.0, 0.0183]]
    """
    check_positive(sigma, "sigma")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    low = torch.full((), float("-inf"), dtype=scores.dtype, device=scores.device)
    s = torch.where(mask, scores, zero)
    order = torch.argsort(torch.where(mask, s, low), dim=-1, descending=True, stable=True)
    centres = s.gather(1, order)  # s_pi(j); padding sorts last
    n = mask.sum(-1, keepdim=True)
    rank_ok = torch.arange(s.shape[-1], device=s.device)[None, :] < n
    m = torch.exp(-((s[:, :, None] - centres[:, None, :]) ** 2) / sigma) + eps
    return torch.where(mask[:, :, None] & rank_ok[:, None, :], m, zero)


def sinkprop(scores: Tensor, labels: Tensor, mask: Tensor, *, sigma: float = 1.0, n_iter: int = 5,
             eps: float = 1e-3, k: int | None = None) -> Tensor:
    r"""SinkProp loss :math:`-\sum_i \sum_{j\le k} D_{ij} g_i d_j / \mathrm{maxDCG@k}`.

    Batch value: mean over contributing lists (>= 2 real items and maxDCG@k > 0).

    >>> s = torch.tensor([[3.0, 2.0, 1.0]], dtype=torch.float64)
    >>> y = torch.tensor([[2.0, 1.0, 0.0]], dtype=torch.float64)
    >>> m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(sinkprop(s, y, m, sigma=1e-3, eps=1e-12).item(), 6)  # sigma -> 0: -NDCG
    -1.0
    >>> round(sinkprop(s, y, m).item(), 4)  # smoothed, default hyperparameters
    -0.9381
    """
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    if int(n_iter) < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    length = scores.shape[-1]
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    m = sinkprop_matrix(scores, mask, sigma, eps)
    n = mask.sum(-1, keepdim=True)
    ranks = torch.arange(length, device=scores.device)[None, :]
    rank_ok = ranks < n
    kk = length if k is None else min(k, length)
    dvec = torch.where(rank_ok & (ranks < kk), discounts(length, like=scores)[None, :], zero)
    g = torch.where(mask, gain(labels), zero)
    dcg = sinkhorn_bilinear(m, g, dvec, mask, rank_ok, max_iter=int(n_iter), tol=-1.0, mask_input=False)
    ideal = max_dcg(labels, mask, k)
    contributes = (mask.sum(-1) >= 2) & (ideal > 0)
    return masked_mean_over_lists(-dcg / torch.where(ideal > 0, ideal, torch.ones_like(ideal)), contributes, scores)
