r"""Pair helpers shared by the pairwise losses (RankNet, LambdaLoss and its variants).

All helpers are vectorised over the batch: pair tensors are ``[B, L, L]`` with entry
``[b, i, j]`` describing the ordered pair (item ``i``, item ``j``) of list ``b``. Cost is
``O(B L^2)`` time and memory; there is no Python loop over lists or pairs.

Conventions:

* A **labelled pair** is an ordered pair of real items with :math:`y_i > y_j`; every
  unordered pair with different labels appears exactly once.
* **Predicted ranks** are 1-based positions in the descending sort of the scores over the
  real items. Tied scores are broken by position in the tensor (stable sort), so ranks are
  a permutation of ``1..n`` on the real items; padded items get ranks ``n+1..L``, after
  every real item, whatever their scores are.
* Padded scores are replaced by 0 with ``torch.where`` before any arithmetic
  (:func:`bench.losses._common.masked_scores`), so garbage in padded slots can never reach
  a value or gradient and the gradient on padding is exactly 0.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from bench.losses._common import masked_scores

LN2 = 0.6931471805599453


def pair_mask(labels: Tensor, mask: Tensor) -> Tensor:
    """``[B, L, L]`` bool: ``True`` where both items are real and ``y_i > y_j``.

    Padded labels become NaN, and every comparison with NaN is False, so one comparison
    pass over the pairs builds the whole mask. ``labels`` must be floating point.

    >>> pair_mask(torch.tensor([[2.0, 0.0, 1.0]]), torch.tensor([[True, True, False]])).int().tolist()
    [[[0, 1, 0], [0, 0, 0], [0, 0, 0]]]
    """
    y = torch.where(mask, labels, torch.full((), float("nan"), dtype=labels.dtype, device=labels.device))
    return y.unsqueeze(-1) > y.unsqueeze(-2)


def n_labelled_pairs(labels: Tensor, mask: Tensor) -> Tensor:
    """Number of labelled pairs (real ``i, j`` with ``y_i > y_j``) per list, ``[B]`` (long).

    ``O(L log L)`` from :func:`label_ranks` (each real item pairs with the real items whose
    label is strictly smaller); equals ``pair_mask(labels, mask).sum((-1, -2))``.

    >>> n_labelled_pairs(torch.tensor([[2.0, 0.0, 1.0, 1.0]]), torch.tensor([[True] * 4])).tolist()
    [5]
    """
    above, tied = label_ranks(labels, mask)
    below = mask.sum(-1, keepdim=True) - above.long() - tied.long()
    return torch.where(mask, below, torch.zeros((), dtype=below.dtype, device=below.device)).sum(-1)


def predicted_ranks(scores: Tensor, mask: Tensor) -> Tensor:
    """1-based ranks ``[B, L]`` (long) of the descending stable sort of the real scores.

    Ties keep tensor order; padded items are ranked after all real items.

    >>> s = torch.tensor([[0.1, 0.7, 0.7, 5.0]]); m = torch.tensor([[True, True, True, False]])
    >>> predicted_ranks(s, m).tolist()
    [[3, 1, 2, 4]]
    """
    # -inf sends padding last; real scores are finite by contract, so no real item can tie it.
    key = torch.where(mask, scores.detach(), torch.full((), float("-inf"), dtype=scores.dtype, device=scores.device))
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    positions = torch.arange(1, key.shape[-1] + 1, device=key.device).expand_as(order)
    return ranks.scatter_(-1, order, positions)


def sort_by_prediction(scores: Tensor, mask: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    """Reorder every list by its predicted ranks (rank ``p + 1`` lands in slot ``p``).

    Returns ``(scores_sorted, mask_sorted, *others_sorted)``. ``scores_sorted`` is a
    differentiable gather of :func:`masked_scores`, so gradients flow back to the original
    slots and padded slots receive exactly 0. In this frame a pair's rank-based weight
    depends only on the slots ``(p, q)``, so it is one ``[L, L]`` constant shared by the
    whole batch; losses that sum over pairs are invariant to the reordering.

    >>> s = torch.tensor([[0.25, 0.75, 0.5]]); y = torch.tensor([[1.0, 0.0, 2.0]])
    >>> ss, ms, ys = sort_by_prediction(s, torch.tensor([[True] * 3]), y)
    >>> ss.tolist(), ys.tolist()
    ([[0.75, 0.5, 0.25]], [[0.0, 2.0, 1.0]])
    """
    ranks = predicted_ranks(scores, mask)
    order = torch.argsort(ranks, dim=-1)
    sorted_scores = torch.gather(masked_scores(scores, mask), -1, order)
    rest = tuple(torch.gather(t, -1, order) for t in (mask, *others))
    return (sorted_scores, *rest)


class _LogisticPairSum(torch.autograd.Function):
    r"""Fused ``sum_ij w_ij softplus(-sigma (s_i - s_j))`` per list with a hand-written backward.

    Autograd through the plain expression allocates about a dozen ``[B, L, L]``
    temporaries; this allocates two (the score differences, turned into the weighted
    sigmoids in place, and the softplus values) and makes six passes over them. The
    gradient is reduced in the forward, so only a ``[B, L]`` vector is kept for backward.

    Bool ``weights`` (a pair mask) are applied by setting the differences outside the mask
    to :math:`-\infty` before the softplus: ``softplus(-inf) = sigmoid(-inf) = 0`` exactly,
    the same zeros a multiplication by 0 gives, without a float weight tensor or a product
    pass. Once differentiable (no double backward), which is all training needs.
    """

    @staticmethod
    def forward(ctx, scores: Tensor, weights: Tensor, sigma: float) -> Tensor:  # type: ignore[override]
        a = sigma * scores
        z = a.unsqueeze(-2) - a.unsqueeze(-1)  # [b, i, j] = -sigma (s_i - s_j)
        if weights.dtype == torch.bool:
            torch.where(weights, z, torch.full((), float("-inf"), dtype=z.dtype, device=z.device), out=z)
            w = None
        else:
            w = weights.expand_as(z)
        # torch.sum reduces pairwise (float32 error ~1e-7); a BLAS dot / einsum over the
        # L^2 products accumulates sequentially and was off by ~2e-4 at L = 1000.
        costs = F.softplus(z)
        per_list = (costs if w is None else costs.mul_(w)).sum(dim=(-1, -2))
        del costs
        if ctx.needs_input_grad[0]:
            # d softplus(z)/dz = sigmoid(z); z's derivative is -sigma for s_i, +sigma for s_j.
            q = torch.sigmoid_(z) if w is None else torch.sigmoid_(z).mul_(w)
            ctx.save_for_backward(sigma * (q.sum(dim=-2) - q.sum(dim=-1)))
        return per_list

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        if not ctx.needs_input_grad[0]:
            return None, None, None
        (g,) = ctx.saved_tensors
        return grad.unsqueeze(-1) * g, None, None


def logistic_pair_sum(scores: Tensor, weights: Tensor, sigma: float) -> Tensor:
    r"""Per-list :math:`\sum_{i,j} w_{ij} \log(1 + e^{-\sigma (s_i - s_j)})`, ``[B]``.

    ``weights`` (``[B, L, L]`` or broadcastable to it) are constants and must be 0 outside
    the pairs to count; a bool pair mask (``[B, L, L]``, e.g. :func:`pair_mask`) counts the
    pairs where it is ``True`` with weight 1. Fused forward/backward (see
    :class:`_LogisticPairSum`).

    >>> s = torch.tensor([[1.0, 0.0]], requires_grad=True)
    >>> v = logistic_pair_sum(s, torch.tensor([[[0.0, 1.0], [0.0, 0.0]]]), 1.0)
    >>> v.backward(); round(v.item(), 4), [round(x, 4) for x in s.grad[0].tolist()]
    (0.3133, [-0.2689, 0.2689])
    >>> round(logistic_pair_sum(s.detach(), torch.tensor([[[False, True], [False, False]]]), 1.0).item(), 4)
    0.3133
    """
    weights = weights.detach()
    if weights.dtype != torch.bool:
        weights = weights.to(scores.dtype)
    elif weights.shape[-2:] != (scores.shape[-1], scores.shape[-1]) or weights.dim() != scores.dim() + 1:
        raise ValueError(f"a bool pair mask must be [B, L, L] for scores {tuple(scores.shape)}, got {tuple(weights.shape)}")
    return _LogisticPairSum.apply(scores, weights, sigma)


def label_ranks(labels: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Per real item: how many real items have a strictly larger label (``above``) and how
    many have an equal label, itself included (``tied``); both ``[B, L]``, labels' dtype.

    ``O(B L log L)`` with a sort and two binary searches (padding sorts as ``-inf``).

    >>> above, tied = label_ranks(torch.tensor([[3.0, 1.0, 3.0, 0.0]]), torch.tensor([[True] * 4]))
    >>> above.tolist(), tied.tolist()
    ([[0.0, 2.0, 0.0, 3.0]], [[2.0, 1.0, 2.0, 1.0]])
    """
    y = labels.detach()
    key = torch.where(mask, y, torch.full((), float("-inf"), dtype=y.dtype, device=y.device)).contiguous()
    asc = torch.sort(key, dim=-1).values
    right = torch.searchsorted(asc, key, right=True)
    left = torch.searchsorted(asc, key, right=False)
    above = (key.shape[-1] - right).to(y.dtype)
    tied = (right - left).to(y.dtype)
    return above, tied


def true_topk_membership(labels: Tensor, mask: Tensor, k: int) -> Tensor:
    r"""Expected membership of each real item in the true top-``k`` under random label ties.

    An item with ``a`` real items strictly above it and ``t`` items tied with it (itself
    included) is in the top-``k`` with probability
    :math:`\operatorname{clip}((k - a) / t, 0, 1)` when ties are broken uniformly at random.
    Using this expectation keeps the loss independent of the items' tensor positions.
    Padded items get 0.

    >>> true_topk_membership(torch.tensor([[3.0, 2.0, 2.0, 0.0]]), torch.tensor([[True] * 4]), 2).tolist()
    [[1.0, 0.5, 0.5, 0.0]]
    """
    above, tied = label_ranks(labels, mask)
    member = ((k - above) / tied.clamp(min=1)).clamp(0.0, 1.0)
    return torch.where(mask, member, torch.zeros((), dtype=labels.dtype, device=labels.device))
