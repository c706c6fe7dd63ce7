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

from collections.abc import Callable

import torch
from torch import Tensor

from bench.losses._common import masked_scores
from bench.losses.chunks import list_chunks

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


PairWeights = Callable[[slice], Tensor]  # a slice of the lists -> their [n, L, L] weights or pair mask


class _LogisticPairSum(torch.autograd.Function):
    r"""Fused ``sum_ij w_ij softplus(-sigma (s_i - s_j))`` per list with a hand-written backward.

    Autograd through the plain expression allocates about a dozen ``[B, L, L]``
    temporaries; this keeps one (the softplus values, summed per list once all are in) and
    one chunk's score differences, turned into the weighted sigmoids in place. The gradient
    is reduced in the forward, so only a ``[B, L]`` vector is kept for backward.

    On the CPU the lists run in chunks whose three ``[L, L]`` buffers (differences, weights,
    softplus values) fit the cache (:func:`bench.losses.chunks.list_chunks`, a list of its own
    when one is larger), and a chunk's weights are built only when it runs (``weights_of``).
    Every pass is elementwise or reduces within one list, and the per-list sums of the
    softplus values run once over the whole batch's buffer, as without chunks: chunking
    changes no bit (``tests/losses/test_chunks.py``).

    Bool weights (a pair mask) are applied by setting the differences outside the mask to
    :math:`-\infty` before the softplus: ``softplus(-inf) = sigmoid(-inf) = 0`` exactly, the
    same zeros a multiplication by 0 gives, without a float weight tensor or a product pass.
    Once differentiable (no double backward), which is all training needs.
    """

    @staticmethod
    def forward(ctx, scores: Tensor, weights_of: PairWeights, sigma: float) -> Tensor:  # type: ignore[override]
        batch, length = scores.shape
        a = sigma * scores
        costs = torch.empty(batch, length, length, dtype=scores.dtype, device=scores.device)
        grad = torch.empty_like(scores) if ctx.needs_input_grad[0] else None
        for c in list_chunks(batch, 3 * length * length * scores.element_size(), scores.device, lone_lists=True):
            z = a[c].unsqueeze(-2) - a[c].unsqueeze(-1)  # [b, i, j] = -sigma (s_i - s_j)
            pairs, w = weights_of(c), None
            if pairs.dtype == torch.bool:
                torch.where(pairs, z, torch.full((), float("-inf"), dtype=z.dtype, device=z.device), out=z)
            else:
                w = pairs.expand_as(z)
            out = costs[c]
            torch.ops.aten.softplus.out(z, 1.0, 20.0, out=out)  # F.softplus(z), into the batch's buffer
            if w is not None:
                out.mul_(w)
            if grad is not None:
                # d softplus(z)/dz = sigmoid(z); z's derivative is -sigma for s_i, +sigma for s_j.
                q = torch.sigmoid_(z) if w is None else torch.sigmoid_(z).mul_(w)
                grad[c] = sigma * (q.sum(dim=-2) - q.sum(dim=-1))
        # torch.sum reduces pairwise (float32 error ~1e-7); a BLAS dot / einsum over the L^2
        # products accumulates sequentially and was off by ~2e-4 at L = 1000. One sum over
        # the whole batch: its order may depend on the batch size, so chunks must not split it.
        per_list = costs.sum(dim=(-1, -2))
        if grad is not None:
            ctx.save_for_backward(grad)
        return per_list

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        if not ctx.needs_input_grad[0]:
            return None, None, None
        (g,) = ctx.saved_tensors
        return grad.unsqueeze(-1) * g, None, None


def logistic_pair_sum(scores: Tensor, weights: Tensor | PairWeights, sigma: float) -> Tensor:
    r"""Per-list :math:`\sum_{i,j} w_{ij} \log(1 + e^{-\sigma (s_i - s_j)})`, ``[B]``, for ``scores [B, L]``.

    ``weights`` are constants and must be 0 outside the pairs to count: a float tensor
    ``[B, L, L]`` (or broadcastable to it), a bool pair mask ``[B, L, L]`` (e.g.
    :func:`pair_mask`) counting the pairs where it is ``True`` with weight 1, or a function
    of a slice of the lists returning their weights or mask, so that a chunk's are built
    only when it runs (:class:`_LogisticPairSum`).

    >>> s = torch.tensor([[1.0, 0.0]], requires_grad=True)
    >>> v = logistic_pair_sum(s, torch.tensor([[[0.0, 1.0], [0.0, 0.0]]]), 1.0)
    >>> v.backward(); round(v.item(), 4), [round(x, 4) for x in s.grad[0].tolist()]
    (0.3133, [-0.2689, 0.2689])
    >>> round(logistic_pair_sum(s.detach(), torch.tensor([[[False, True], [False, False]]]), 1.0).item(), 4)
    0.3133
    """
    if scores.dim() != 2:
        raise ValueError(f"scores must be [B, L], got shape {tuple(scores.shape)}")
    if callable(weights):
        return _LogisticPairSum.apply(scores, weights, sigma)
    weights = weights.detach()
    if weights.dtype != torch.bool:
        weights = weights.to(scores.dtype)
    elif weights.shape[-2:] != (scores.shape[-1], scores.shape[-1]) or weights.dim() != scores.dim() + 1:
        raise ValueError(f"a bool pair mask must be [B, L, L] for scores {tuple(scores.shape)}, got {tuple(weights.shape)}")
    one_per_list = weights.dim() == 3 and weights.shape[0] == scores.shape[0] > 1  # else broadcast over the lists
    return _LogisticPairSum.apply(scores, lambda c: weights[c] if one_per_list else weights, sigma)


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
