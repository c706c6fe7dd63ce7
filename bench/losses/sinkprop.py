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
the batch value is the mean of per-list losses over contributing lists.

Test-time ranking (Sec. 2.3, "Choosing a Single Permutation"): :func:`shortcut_hungarian`
turns :math:`D` into one permutation by the paper's short-cut Hungarian method (expected
ranks, then an exact assignment on the top documents); ranking by the scores instead is the
other choice of the SinkProp protocol (``sinkprop_protocol.test_ranking``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from bench.losses._common import (
    check_count,
    check_inputs,
    check_k,
    check_positive,
    discounts,
    gain,
    masked_mean_over_lists,
    max_dcg,
)
from bench.losses.sinkhorn import sinkhorn, sinkhorn_bilinear


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
    n_iter = check_count(n_iter, "n_iter", minimum=0)
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


# ----------------------------------------------------------------------------- test-time ranking (Sec. 2.3)


def sinkprop_marginals(scores: Tensor, mask: Tensor, *, sigma: float, n_iter: int = 5, eps: float = 1e-3) -> Tensor:
    r""":math:`D`, ``n_iter`` incomplete Sinkhorn normalisations of :func:`sinkprop_matrix`, ``[B, L, L]``.

    Rows are items, columns ranks; zero outside each list's real block (its items x its first
    ``n`` ranks). :math:`D_{ij}` is read as the marginal probability that item ``i`` is at rank
    ``j`` (the same matrix the loss takes its expectation under).

    >>> D = sinkprop_marginals(torch.tensor([[0.0, 2.0]]), torch.ones(1, 2, dtype=torch.bool), sigma=1.0, eps=0.0)
    >>> [[round(x, 4) for x in row] for row in D[0].tolist()]  # after one full iteration the columns sum to 1
    [[0.018, 0.982], [0.982, 0.018]]
    """
    n_iter = check_count(n_iter, "n_iter", minimum=0)
    m = sinkprop_matrix(scores, mask, sigma, eps)
    ranks_ok = torch.arange(scores.shape[-1], device=scores.device)[None, :] < mask.sum(-1, keepdim=True)
    return sinkhorn(m, mask, ranks_ok, max_iter=int(n_iter), tol=-1.0)


def expected_ranks(d: Tensor, mask: Tensor) -> Tensor:
    r"""Each item's expected 1-based rank under its row of :math:`D`, ``+inf`` on padding:

    .. math:: \bar r_i = \sum_j j\, D_{ij} \Big/ \sum_j D_{ij}.

    The division makes each row a distribution: an incomplete normalisation leaves the row
    sums near, not at, 1 (the paper's :math:`\sum_j j D_{ij}` when :math:`D` is doubly stochastic).

    >>> expected_ranks(torch.tensor([[[0.5, 0.5], [0.5, 0.5]]]), torch.tensor([[True, True]])).tolist()
    [[1.5, 1.5]]
    """
    ranks = torch.arange(1, d.shape[-1] + 1, dtype=d.dtype, device=d.device)
    total = d.sum(-1)
    mean = (d * ranks).sum(-1) / torch.where(total > 0, total, torch.ones_like(total))
    return torch.where(mask, mean, torch.full_like(mean, float("inf")))


def shortcut_hungarian(scores: Tensor, mask: Tensor, *, sigma: float, top: int | None = 10, n_iter: int = 5,
                       eps: float = 1e-3) -> np.ndarray:
    r"""The short-cut Hungarian permutation of Sec. 2.3: ``order[b, p]`` is the item at rank ``p + 1``.

    Eq. (5) chooses the permutation :math:`\pi` (item :math:`i` at rank :math:`\pi(i)`) of
    maximal log likelihood :math:`\sum_i \log D_{i\pi(i)}` under :math:`D` =
    :func:`sinkprop_marginals`; an exact assignment costs :math:`O(n^3)`. The short cut:

    1. sort the items by their expected rank (:func:`expected_ranks`; ties: document order);
    2. solve the assignment exactly on the top :math:`K = \min(\text{top}, n)` items of that
       order and the first :math:`K` ranks (``scipy.optimize.linear_sum_assignment`` on the
       cost :math:`-\log D` of that :math:`K \times K` submatrix); ranks :math:`K+1 .. n`
       keep the expected-rank order.

    ``top=None`` (or ``top >= n``) is the exact assignment over the whole list. Time
    :math:`O(n^2)` per normalisation plus :math:`O(K^3)`.

    The submatrix's cost is computed from :math:`M`, not :math:`D`: every Sinkhorn iterate is
    :math:`D = \mathrm{diag}(u) M \mathrm{diag}(v)`, so on any square submatrix
    :math:`\sum_i \log D_{i\pi(i)} = \sum_i \log u_i + \sum_j \log v_j + \sum_i \log M_{i\pi(i)}`,
    the first two sums fixed by the submatrix's rows and columns: the maximiser is the same,
    and :math:`\log M_{ij} = \mathrm{logaddexp}(-(s_i - s_{(j)})^2/\sigma, \log\epsilon)` stays
    finite where :math:`D_{ij}` underflows to 0. (So :math:`D`'s iterations move only step 1.)

    Tied scores (identical rows, equally likely under Eq. (5)) keep document order, as the
    suite's ``ties="stable"`` ranking by the scores does. The loop over lists is the solver's:
    SciPy's solver takes one matrix per call (a :math:`K \times K` one, a few microseconds
    each); everything else is batched.

    >>> s = torch.tensor([[0.1, 3.0, 2.0, -1.0]], dtype=torch.float64)
    >>> shortcut_hungarian(s, torch.ones(1, 4, dtype=torch.bool), sigma=1.0, top=2).tolist()
    [[1, 2, 0, 3]]
    """
    from scipy.optimize import linear_sum_assignment

    top = check_k(top, "top")
    with torch.no_grad():
        ranks = expected_ranks(sinkprop_marginals(scores, mask, sigma=sigma, n_iter=n_iter, eps=eps), mask)
    real = mask.cpu().numpy()
    s = np.where(real, scores.detach().cpu().numpy().astype(np.float64), 0.0)
    order = np.argsort(_tied_items_share_a_rank(ranks.cpu().numpy(), s, real), axis=-1, kind="stable")
    n = real.sum(-1)
    kk = n if top is None else np.minimum(n, int(top))
    k_max = max(int(kk.max()), 1) if kk.size else 1
    top_rows = order[:, :k_max]
    centres = -np.sort(np.where(real, -s, np.inf), axis=-1)[:, :k_max]  # s_(j), padding -inf
    si = np.take_along_axis(s, top_rows, axis=1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        cost = -np.logaddexp(-((si[:, :, None] - centres[:, None, :]) ** 2) / sigma, np.log(eps) if eps > 0 else -np.inf)
    for b in np.flatnonzero(kk >= 2):
        k = int(kk[b])
        r, c = linear_sum_assignment(cost[b, :k, :k])
        order[b, c] = top_rows[b, r]
    _ties_in_document_order(order, s, kk)
    return order


def _tied_items_share_a_rank(ranks: np.ndarray, scores: np.ndarray, real: np.ndarray) -> np.ndarray:
    """Expected ranks with every group of equal scores in a list given the group's smallest: equal
    rows of :math:`D` have equal expected ranks, but a matrix product may round them apart in
    the last bit, which would split the group in the sorted order. Padding stays ``+inf``."""
    lists = np.repeat(np.arange(scores.shape[0]), scores.shape[1])
    _, group = np.unique(np.stack([lists, scores.ravel()], axis=1), axis=0, return_inverse=True)
    group = group.ravel()
    low = np.full(group.max() + 1 if group.size else 0, np.inf)
    np.minimum.at(low, group, np.where(real.ravel(), ranks.ravel(), np.inf))
    return np.where(real, low[group].reshape(ranks.shape), np.inf)


def _ties_in_document_order(order: np.ndarray, scores: np.ndarray, kk: np.ndarray) -> None:
    """Equal scores give equal rows of :math:`M` and :math:`D`, so Eq. (5) cannot tell those items
    apart and the solver may place them in any order: among the first ``kk[b]`` ranks of each
    list, tied items are put back in document order over the ranks they hold (in place,
    vectorised). The expected-rank tail is in document order already
    (:func:`_tied_items_share_a_rank` and a stable sort)."""
    lists, ranks = np.nonzero(np.arange(order.shape[1])[None, :] < kk[:, None])
    items = order[lists, ranks]
    value = scores[lists, items]
    slots = np.lexsort((ranks, value, lists))  # ranks grouped by (list, score), in rank order
    fill = np.lexsort((items, value, lists))  # the items grouped the same way, in document order
    order[lists[slots], ranks[slots]] = items[fill]
