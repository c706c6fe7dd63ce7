r"""NDCG losses from the newer relaxed sort matrices: SoftSort and differentiable sorting networks.

Both are the NeuralSort-style NDCG loss (PiRank's form) with another relaxed matrix
:math:`\hat P` (rows = ranks, columns = items), gains :math:`g = 2^y - 1` and discounts
:math:`d_j = 1/\log_2(1+j)`:

.. math::

    \ell = 1 - \frac{\sum_{j \le k} [\hat P g]_j\, d_j}{\mathrm{maxDCG@k}}.

* ``softsort_ndcg``: :math:`\hat P` = SoftSort (:mod:`bench.losses.softsort`, temperature
  ``tau``, :math:`d = |\cdot|`); it is ``pirank_ndcg(relaxation="softsort", depth=1)``, so the
  two can never drift apart. Cost :math:`O(n \log n + k n)` per list.
* ``diffsort_ndcg``: :math:`\hat P` = a relaxed sorting network
  (:mod:`bench.losses.sorting_networks`: ``network``, ``sigmoid``, ``steepness``). :math:`\hat P g`
  is computed by carrying the gains through the network, never the matrix: :math:`O(n \log^2 n)`
  per list for ``bitonic`` (the default), :math:`O(n^2)` for ``odd_even``.

The forward value is the relaxed loss (``straight_through=False`` by default: these operators'
papers train on the relaxed value; ``True`` gives PiRank's hard forward value with the
relaxed gradient). As the temperature goes to 0 (steepness to infinity) the value tends to
``1 - NDCG@k`` of the score order for distinct scores. A list contributes when it has >= 2
real items and ``maxDCG@k > 0``; the batch value is the mean over contributing lists.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, check_k, discounts, gain, masked_mean_over_lists, max_dcg
from bench.losses.pirank import _combine, _hard_top, pirank_ndcg
from bench.losses.sorting_networks import network_sort


def softsort_ndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, k: int | None = 10, tau: float = 1.0,
                  straight_through: bool = False) -> Tensor:
    r"""SoftSort-NDCG@k loss :math:`1 - \sum_{j\le k} [\hat P_{SoftSort} g]_j d_j / \mathrm{maxDCG@k}`.

    >>> s = torch.tensor([[0.1, 0.9, 0.5]]); y = torch.tensor([[2.0, 0.0, 1.0]])
    >>> m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(softsort_ndcg(s, y, m, k=2, tau=1e-3).item(), 4)  # hard order y = 0, 1, 2 (as pirank_ndcg)
    0.8262
    """
    check_inputs(scores, labels, mask)
    return pirank_ndcg(scores, labels, mask, k=k, tau=tau, depth=1, straight_through=straight_through,
                       relaxation="softsort")


def diffsort_ndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, k: int | None = 10, network: str = "bitonic",
                  sigmoid: str = "cauchy", steepness: float = 10.0, straight_through: bool = False) -> Tensor:
    r"""Sorting-network NDCG@k loss :math:`1 - \sum_{j\le k} [\hat P_{net} g]_j d_j / \mathrm{maxDCG@k}`.

    >>> s = torch.tensor([[0.1, 0.9, 0.5]]); y = torch.tensor([[2.0, 0.0, 1.0]])
    >>> m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(diffsort_ndcg(s, y, m, k=2, sigmoid="logistic", steepness=1e4).item(), 4)
    0.8262
    """
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    g = torch.where(mask, gain(labels), zero)
    length = scores.shape[-1]
    kk = length if k is None else min(k, length)
    disc = discounts(kk, like=scores)
    ideal = max_dcg(labels, mask, k)
    safe = torch.where(ideal > 0, ideal, torch.ones_like(ideal))
    top = network_sort(scores, mask, g[:, :, None], network=network, sigmoid=sigmoid, steepness=steepness)
    relaxed = 1.0 - (top[:, :kk, 0] * disc).sum(-1) / safe
    hard = 1.0 - (_hard_top(scores, g, mask, kk) * disc).sum(-1) / safe
    contributes = (mask.sum(-1) >= 2) & (ideal > 0)
    return masked_mean_over_lists(_combine(relaxed, hard, straight_through), contributes, scores)
