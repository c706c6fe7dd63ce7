r"""LambdaLoss (Wang et al., 2018), LambdaLoss@k (Jagerman et al., 2022) and the ARF paper's
metric-driven Lambda-framework variants ``lambda_recall`` and ``lambda_opa``.

All three share one pattern: sort every list by its current scores (stable, padding last),
so that a pair's rank-based weight depends only on the two sorted slots and is a single
``[L, L]`` constant for the whole batch; then sum the weighted pairwise logistic costs over
the labelled pairs (:math:`y_i > y_j`). Weights are constants (no gradient flows through
ranks or gains), exactly as in the reference implementations.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from bench.losses._common import (
    check_inputs,
    check_k,
    check_positive,
    gain,
    masked_mean_over_lists,
    masked_scores,
    max_dcg,
    n_real,
)
from bench.losses.pairwise import (
    LN2,
    PairWeights,
    logistic_pair_sum,
    pair_mask,
    sort_by_prediction,
    true_topk_membership,
)

SCHEMES = ("ndcg_loss2", "ndcg_loss2pp", "lambdarank", "ranknet")


def _inv_discount(ranks: Tensor) -> Tensor:
    """``1 / D(r) = 1 / log2(1 + r)``."""
    return 1.0 / torch.log2(1.0 + ranks)


def rank_weights(scheme: str, length: int, k: int | None, mu: float, like: Tensor) -> Tensor:
    r"""The ``[L, L]`` rank factor of each scheme for sorted slots ``p, q`` (ranks ``p+1, q+1``).

    * ``ndcg_loss2``: :math:`\delta_{pq} = 1/D(|p-q|) - 1/D(|p-q|+1)`; with ``k``,
      0 when :math:`\min(r_p, r_q) > k` and multiplied by
      :math:`1 / (1 - 1/D(\max(r_p, r_q)))` when only :math:`\max(r_p, r_q) > k`.
    * ``lambdarank``: :math:`|1/D(r_p) - 1/D(r_q)|` with :math:`1/D(r) := 0` for ``r > k``.
    * ``ndcg_loss2pp``: ``mu * ndcg_loss2 + lambdarank``.
    * ``ranknet``: 1; with ``k``, 0 unless :math:`\min(r_p, r_q) \le k`.

    The table is cached and shared between calls: never modify it in place.

    >>> w = rank_weights("ndcg_loss2", 3, None, 10.0, torch.zeros(0, dtype=torch.float64))
    >>> [round(v, 4) for v in w[0].tolist()]  # 0, 1 - 1/log2(3), 1/log2(3) - 1/2
    [0.0, 0.3691, 0.1309]
    """
    # Built in float64 and cast: 1/D(d) - 1/D(d + 1) cancels badly in float32 for large d.
    # The table is [L, L], shared by the batch, so the extra precision costs nothing per list;
    # it depends only on its arguments, so it is built once per (scheme, L, k, mu, dtype,
    # device) and reused (a dozen float64 passes over L^2 per call otherwise).
    return _cached_rank_weights(scheme, length, k, mu, like.dtype, like.device)


@functools.lru_cache(maxsize=16)
def _cached_rank_weights(scheme: str, length: int, k: int | None, mu: float, dtype: torch.dtype,
                         device: torch.device) -> Tensor:
    table = _rank_weights(scheme, length, k, mu, torch.zeros((), dtype=torch.float64, device=device)).to(dtype)
    return table.requires_grad_(False)


def _rank_weights(scheme: str, length: int, k: int | None, mu: float, like: Tensor) -> Tensor:
    slots = torch.arange(length, dtype=like.dtype, device=like.device)
    ranks = slots + 1.0
    if scheme == "ranknet":
        if k is None:
            return torch.ones(length, length, dtype=like.dtype, device=like.device)
        top = ranks <= k
        return (top.unsqueeze(-1) | top.unsqueeze(-2)).to(like.dtype)
    if scheme in ("ndcg_loss2", "ndcg_loss2pp"):
        dist = (slots.unsqueeze(-1) - slots.unsqueeze(-2)).abs()
        # dist = 0 only on the diagonal (never a pair); clamp keeps it finite there.
        delta = _inv_discount(dist.clamp(min=1.0)) - _inv_discount(dist.clamp(min=1.0) + 1.0)
        delta = torch.where(dist > 0, delta, torch.zeros((), dtype=like.dtype, device=like.device))
        if k is not None:
            r_max = torch.maximum(ranks.unsqueeze(-1), ranks.unsqueeze(-2))
            r_min = torch.minimum(ranks.unsqueeze(-1), ranks.unsqueeze(-2))
            # r_max >= 2 off the diagonal, so 1 - 1/D(r_max) >= 1 - 1/log2(3) > 0.
            boost = 1.0 / (1.0 - _inv_discount(r_max.clamp(min=2.0)))
            one = torch.ones((), dtype=like.dtype, device=like.device)
            factor = torch.where(r_max > k, boost, one)
            # docs/losses.md, "LambdaLoss", decides: pairs with both items below rank k are dropped.
            delta = delta * torch.where(r_min > k, torch.zeros_like(one), factor)
        if scheme == "ndcg_loss2":
            return delta
        return mu * delta + _rank_weights("lambdarank", length, k, mu, like)
    if scheme == "lambdarank":
        inv = _inv_discount(ranks)
        if k is not None:
            inv = torch.where(ranks <= k, inv, torch.zeros((), dtype=like.dtype, device=like.device))
        return (inv.unsqueeze(-1) - inv.unsqueeze(-2)).abs()
    raise ValueError(f"unknown LambdaLoss scheme {scheme!r}; known schemes: {', '.join(SCHEMES)}")


def lambdaloss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    scheme: str = "ndcg_loss2",
    sigma: float = 1.0,
    mu: float = 10.0,
    k: int | None = None,
) -> Tensor:
    r"""LambdaLoss with the weighting schemes of Wang et al. (2018) and the @k weights of
    Jagerman et al. (2022).

    With predicted ranks :math:`r_i` (descending stable sort of the scores),
    :math:`G_i = g(y_i)/\mathrm{maxDCG@k}`, :math:`D(r) = \log_2(1 + r)`:

    .. math::
        \ell = -\sum_{y_i > y_j} w_{ij} \log_2 \sigma\bigl(\sigma_s (s_i - s_j)\bigr)
             = \sum_{y_i > y_j} w_{ij} \log_2\bigl(1 + e^{-\sigma_s (s_i - s_j)}\bigr)

    * ``ndcg_loss2`` (default): :math:`w_{ij} = \delta_{ij} |G_i - G_j|`,
      :math:`\delta_{ij} = |1/D(|r_i - r_j|) - 1/D(|r_i - r_j| + 1)|`.
    * ``lambdarank``: :math:`w_{ij} = |1/D(r_i) - 1/D(r_j)|\,|G_i - G_j|`.
    * ``ndcg_loss2pp``: ``mu * ndcg_loss2 + lambdarank`` weights.
    * ``ranknet``: :math:`w_{ij} = 1`. Relation to :func:`bench.losses.ranknet.ranknet`:
      per list, ``lambdaloss(scheme="ranknet") = ranknet * n_pairs / ln 2`` (a log2 *sum*
      over the pairs here, a natural-log *mean* there).

    **@k** (``k`` given; ``maxDCG@k`` normalises the gains). ``ndcg_loss2`` uses the
    LambdaLoss@K re-weighting of Jagerman et al., "On Optimizing Top-K Metrics for Neural
    Ranking Models", SIGIR 2022 (TF-Ranking's ``DCGLambdaWeightV2``, rax's
    ``dcg2_lambdaweight(topn=k)``) for pairs that straddle ``k``, and drops pairs whose two
    items are both below rank ``k``, as ``docs/losses.md`` ("LambdaLoss") specifies:

    .. math::
        w_{ij} = \delta_{ij}\,|G_i - G_j| \cdot
        \begin{cases} 1 & \max(r_i, r_j) \le k \\
                      1 / \bigl(1 - 1/D(\max(r_i, r_j))\bigr) & \min(r_i, r_j) \le k < \max(r_i, r_j) \\
                      0 & \min(r_i, r_j) > k. \end{cases}

    (The reference implementations keep the last case with the straddling factor too;
    where the spec and the reference disagree the spec decides, and the test suite checks
    the straddling weights against rax's published values.) ``lambdarank`` drops the same
    pairs through its discount, which is 0 beyond ``k`` (rax's ``dcg_lambdaweight(topn=k)``),
    and ``ranknet`` keeps pairs with at least one item in the top ``k`` as RankNet@k does.
    ``ndcg_loss2pp`` combines the two @k weights.
    Unlike TF-Ranking and rax we do not multiply the weights by the list size (that
    heuristic would break padding invariance and is not part of the paper's loss).

    A list contributes when it has a labelled pair (and ``maxDCG@k > 0`` for the NDCG
    schemes); batch value = mean of per-list sums over contributing lists.

    >>> s = torch.tensor([[0.0, 1.0]]); y = torch.tensor([[1.0, 0.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> # G = (1, 0); ranks (2, 1): delta = 1/D(1) - 1/D(2) = 0.36907; cost log2(1 + e^1) = 1.89465
    >>> round(lambdaloss(s, y, m).item(), 5)
    0.69925
    >>> round(lambdaloss(s, y, m, scheme="ranknet").item(), 4)
    1.8946
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown LambdaLoss scheme {scheme!r}; known schemes: {', '.join(SCHEMES)}")
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    check_positive(sigma, "sigma")
    s, mask_s, labels_s = sort_by_prediction(scores, mask, labels)
    rank_w = rank_weights(scheme, s.shape[-1], k, mu, s)
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    weights: Tensor | PairWeights
    with torch.no_grad():
        if scheme == "ranknet":
            weights = pair_mask(labels_s, mask_s).to(s.dtype).mul_(rank_w)
            contributes = weights.flatten(1).amax(dim=-1) > 0
        else:
            ideal = max_dcg(labels_s, mask_s, k)
            g = torch.where(mask_s, gain(labels_s), zero)
            # |G_i - G_j| over pairs with y_i > y_j is relu(G_i - G_j) because the gain is
            # strictly increasing. Shifting the real gains to be >= 0 (differences are
            # unchanged) and padding to 0 makes relu vanish on (padded, real) pairs; the
            # (real, padded) pairs vanish because the column copy of the gains is +inf on
            # padding (relu(G_i - inf) = 0). Three passes and one chunk's [n, L, L] buffer.
            low = torch.where(mask_s, g, torch.full((), float("inf"), dtype=s.dtype, device=s.device)).amin(-1, keepdim=True)
            g = torch.where(mask_s, g - low, zero) / torch.where(ideal > 0, ideal, 1.0).unsqueeze(-1)
            g_col = torch.where(mask_s, g, torch.full((), float("inf"), dtype=s.dtype, device=s.device))

            def gain_weights(c: slice) -> Tensor:  # built chunk by chunk of lists in the pair sum
                return (g[c].unsqueeze(-1) - g_col[c].unsqueeze(-2)).clamp_(min=0.0).mul_(rank_w)

            weights = gain_weights
            real_y = torch.where(mask_s, labels_s, torch.full((), float("nan"), dtype=s.dtype, device=s.device))
            has_pair = torch.nan_to_num(real_y, nan=-float("inf")).amax(-1) > torch.nan_to_num(real_y, nan=float("inf")).amin(-1)
            contributes = has_pair & (ideal > 0)
    per_list = logistic_pair_sum(s, weights, sigma) / LN2
    return masked_mean_over_lists(per_list, contributes, s)


def _arf_pair_mean(s: Tensor, mask: Tensor, weights: Tensor, pairs: Tensor, sigma: float) -> Tensor:
    """ARF eq. 6: weighted log2 pair costs divided by the n(n-1)/2 unordered real pairs."""
    n = n_real(mask).to(s.dtype)
    per_list = logistic_pair_sum(s, weights, sigma) / LN2 / (n * (n - 1) / 2).clamp(min=1.0)
    return masked_mean_over_lists(per_list, pairs.flatten(1).any(dim=-1), s)


def lambda_recall(
    scores: Tensor, labels: Tensor, mask: Tensor, *, k: int = 15, m: int = 30, sigma: float = 1.0
) -> Tensor:
    r"""Lambda-framework surrogate of Recall@m@k (ARF paper, Wang et al. 2024, eqs. 6-7).

    :math:`G_i = 1(i \in \text{true top-}k)`, :math:`1/D_i = 1(r_i \le m)` (predicted
    top-``m``), and per list

    .. math::
        \ell = \frac{\sum_{y_i > y_j} |G_i - G_j|\,|1/D_i - 1/D_j|\,
                     \log_2\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr)}{n (n - 1) / 2}

    with ``n`` real items (the normalisation of eq. 6). Label ties at the top-``k``
    boundary are resolved in expectation: a boundary item has membership
    ``(k - #above) / #tied`` (see :func:`bench.losses.pairwise.true_topk_membership`),
    which equals the expected weight under uniformly random tie-breaking and keeps the
    loss independent of tensor order. Lists with ``n <= m`` get weight 0 on every pair
    (everything is "recalled"); a list contributes when it has a labelled pair.

    >>> s = torch.tensor([[0.0, 1.0, 2.0]]); y = torch.tensor([[2.0, 1.0, 0.0]])
    >>> msk = torch.ones(1, 3, dtype=torch.bool)
    >>> # top-1 truth = item 0 (rank 3); predicted top-2 = items 2, 1: weighted pairs (0,1), (0,2)
    >>> v = (torch.log2(1 + torch.exp(torch.tensor(1.0))) + torch.log2(1 + torch.exp(torch.tensor(2.0)))) / 3
    >>> bool(torch.isclose(lambda_recall(s, y, msk, k=1, m=2), v))
    True
    """
    labels = check_inputs(scores, labels, mask)
    k = check_k(k, optional=False)
    m = check_k(m, "m", optional=False)
    check_positive(sigma, "sigma")
    s, mask_s, labels_s = sort_by_prediction(scores, mask, labels)
    pairs = pair_mask(labels_s, mask_s)
    g = true_topk_membership(labels_s, mask_s, k)
    in_top_m = (torch.arange(s.shape[-1], device=s.device) < m).to(s.dtype)
    weights = (g.unsqueeze(-1) - g.unsqueeze(-2)).abs() * (in_top_m.unsqueeze(-1) - in_top_m.unsqueeze(-2)).abs()
    weights = torch.where(pairs, weights, torch.zeros((), dtype=s.dtype, device=s.device)).detach()
    return _arf_pair_mean(s, mask_s, weights, pairs, sigma)


def lambda_opa(scores: Tensor, labels: Tensor, mask: Tensor, *, sigma: float = 1.0) -> Tensor:
    r"""Lambda-framework surrogate of OPA (ARF paper eq. 6 with :math:`\Delta \equiv 1`).

    .. math::
        \ell = \frac{\sum_{y_i > y_j} \log_2\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr)}{n (n - 1) / 2}

    i.e. ``lambdaloss(scheme="ranknet")`` divided by the number of unordered real pairs.
    A list contributes when it has a labelled pair.

    >>> s = torch.tensor([[0.0, 0.0, 5.0]]); y = torch.tensor([[1.0, 0.0, 0.0]])
    >>> msk = torch.ones(1, 3, dtype=torch.bool)
    >>> v = (1.0 + torch.log2(1 + torch.exp(torch.tensor(5.0)))) / 3  # pairs (0,1), (0,2)
    >>> bool(torch.isclose(lambda_opa(s, y, msk), v))
    True
    """
    labels = check_inputs(scores, labels, mask)
    check_positive(sigma, "sigma")
    s = masked_scores(scores, mask)
    pairs = pair_mask(labels, mask)
    return _arf_pair_mean(s, mask, pairs.to(s.dtype), pairs, sigma)
