r"""PiRank losses (Swezey et al. 2021): relaxed NDCG@k and ARP from the top-k NeuralSort rows,
obtained with the divide-and-conquer tree of Section 3.3 (eqs. 13-17).

Tree (:func:`pirank_topk`). The real items of a list (in their original order) are the
leaves, padded with masked *filler* leaves to :math:`L' = b_1 \cdots b_d`; leaf
:math:`1 + \sum_j (i_j - 1)\prod_{l<j} b_l` sits at branch indices :math:`(i_1, \dots, i_d)`
(eq. 13), so a node of height 1 holds ``b_1`` consecutive leaves. At height :math:`j` each
node applies NeuralSort with temperature :math:`\tau_j` to the concatenation of its
:math:`b_j` children's :math:`k_{j-1}` relaxed values and keeps the first
:math:`k_j = \min(k, k_{j-1} b_j)` rows :math:`\hat Q^{(j)}` (eq. 14); its values are
:math:`\hat Q^{(j)} Y^{(j-1)}` (eq. 15) and its rows over the original items are the
composition :math:`\hat P^{(j)} = \hat Q^{(j)} \hat P^{(j-1)}` (eq. 16), so the root holds a
``k x L`` matrix :math:`\hat P` with :math:`\hat P s` = the relaxed top-k scores (eq. 17).

Choices fixed here:

* Masking, not low scores: a child value is *valid* only if its row index is below the
  number of valid values in that child, and invalid values (filler, padding, rows beyond a
  short node) are excluded from the parent's softmax and row sums, with the node's own
  valid count as NeuralSort's ``n``. Filler therefore never receives rank mass while real
  items remain, and rows beyond a list's length are zero.
* ``depth=1`` is exactly NeuralSort's first ``k`` rows. With ``branching=None`` and
  ``depth > 1`` the tree is **per list**: a list of ``n`` real items uses, at every level, the
  smallest ``b`` with ``b**depth >= n`` (so ``n = 3375, depth = 3`` gives ``b = 15``), i.e.
  the paper's tree with ``L = n``. A list's value and gradient therefore depend on that
  list only (padding and batch invariance, docs/losses.md "Common contract"), not on the
  longest list of its batch as they did when ``b`` was taken from the batch width. Lists
  are grouped by their ``b`` and each group runs as one batched tree (at most
  ``ceil(W**(1/depth))`` groups for a longest list ``W``; one group when all lists have
  one length, as in the timing suites). An
  explicit ``branching`` gives every list of the batch that one tree (its product must hold
  the longest list) and fixes the depth; it is batch invariant too (filler leaves are masked).
* ``tau`` is one temperature for every level or a non-decreasing sequence
  ``(tau_1, ..., tau_d)``.
* Cost: the row sums :math:`A\mathbf 1` take :math:`O(n \log n)` here (sorting), so even
  ``depth=1`` costs :math:`O(n \log n + kn)` per list, not the paper's :math:`O(n^2)`;
  deeper trees change the relaxation more than the cost. Both are far cheaper than the
  dense depth-1 computation (all rows, pairwise row sums) the paper's Figure 7 measures.

Losses (gain :math:`2^y-1`, discount :math:`1/\log_2(1+j)`):

* ``pirank_ndcg``: :math:`1 - \sum_{j \le k} [\hat P g]_j d_j / \mathrm{maxDCG@k}`.
* ``pirank_arp``: for ``k >= n`` (default ``k=None``, the whole list) eq. 11 with
  :math:`k = n`, i.e. :math:`\sum_{j \le n} [\hat P y]_j\, j / \sum_i y_i`, whose hard value
  is eq. 4 (``bench.metrics`` ``"arp"``). For ``k < n`` eq. 11 read literally
  (:math:`\sum_{j\le k} [\hat P y]_j j / \sum_{j \le k} y_{(j)}`) is *minimised* by ranking
  the relevant items below ``k``, where they stop counting, so it fails the suite's
  ideal-beats-reversed requirement. Decided here: the label mass left outside the top ``k``
  is charged at position ``k + 1``,
  :math:`\big(\sum_{j\le k} [\hat P y]_j\, j + (k+1)(\sum_i y_i - \sum_{j \le k} [\hat P y]_j)\big)
  / \sum_i y_i` (ARP with positions capped at ``k + 1``), the same for the hard value.
  The default is ``k=None`` rather than 10 so that the value is the paper's ARP metric.
* ``relaxation`` (:mod:`bench.losses.relaxations`): the matrix of every node, ``"neuralsort"``
  (the paper's, the default) or ``"softsort"``, ``"odd_even"``, ``"bitonic"`` (sorting networks,
  steepness :math:`1/\tau`). With ``depth=1`` it is that matrix's first ``k`` rows.
* ``straight_through=True``: the forward value is the exact hard metric loss (ranking by
  descending score, ties broken by position as ``bench.metrics.evaluate(ties="stable")``)
  and the gradient is the relaxed loss's: ``hard + (relaxed - relaxed.detach())``.

A list contributes when it has at least 2 real items and a positive normaliser; the batch
value is the mean of per-list losses over contributing lists (not a ratio of batch sums).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from bench.losses._common import (
    check_count,
    check_inputs,
    check_k,
    discounts,
    gain,
    masked_mean_over_lists,
    max_dcg,
)
from bench.losses.relaxations import sort_rows


def _branching(width: int, depth: int, branching: Sequence[int] | None) -> tuple[int, ...]:
    if branching is not None:
        b = tuple(check_count(x, "a branching factor", minimum=1) for x in branching)
        if depth not in (1, len(b)):
            raise ValueError(f"depth={depth} disagrees with branching={b} (length {len(b)})")
        if not b:
            raise ValueError("branching needs at least one factor, got ()")
        if math.prod(b) < width:
            raise ValueError(f"branching={b} holds {math.prod(b)} leaves, fewer than the longest list ({width})")
        return b
    depth = check_count(depth, "depth", minimum=1)
    base = max(1, math.ceil(width ** (1.0 / depth)) - 1)
    while base**depth < width:  # smallest integer root, robust to float rounding
        base += 1
    return (base,) * depth


def _temperatures(tau, depth: int) -> tuple[float, ...]:
    taus = tuple(float(t) for t in tau) if isinstance(tau, (list, tuple)) else (float(tau),) * depth
    if len(taus) != depth:
        raise ValueError(f"tau has {len(taus)} levels, the tree has depth {depth}")
    if min(taus) <= 0 or any(a > b for a, b in zip(taus, taus[1:])):
        raise ValueError(f"temperatures must be > 0 and non-decreasing by height, got {taus}")
    return taus


def _per_list_branching(lengths: Tensor, depth: int) -> Tensor:
    """Smallest integer ``b >= 1`` with ``b**depth >= n`` for each list length ``n``, ``[B]`` (long)."""
    n = lengths.clamp(min=1).to(torch.float64)
    base = torch.ceil(n ** (1.0 / depth)).clamp(min=1)
    base = torch.where((base - 1 >= 1) & ((base - 1) ** depth >= n), base - 1, base)  # float rounding, both ways
    base = torch.where(base**depth < n, base + 1, base)
    return base.to(torch.long)


def _levels(vals: Tensor, valid: Tensor, kk: int, b: tuple[int, ...], taus: tuple[float, ...],
            relaxation: str = "neuralsort") -> Tensor:
    """The tree of branching ``b`` over compacted lists ``vals [B, W]``: the root's ``[B, kk, W]``."""
    relaxed = sort_rows(relaxation)
    bsz, width = vals.shape
    leaves = math.prod(b)
    kk = min(kk, width)
    y = torch.nn.functional.pad(vals, (0, leaves - width))[:, :, None]  # [B, nodes, values per node]
    ok = torch.nn.functional.pad(valid, (0, leaves - width), value=False)[:, :, None]
    p = None  # [B, nodes, rows, leaves below]; the leaves' own "matrix" is 1
    k_prev = 1
    for level, (b_j, tau_j) in enumerate(zip(b, taus)):
        nodes = y.shape[1] // b_j
        cand = y.reshape(bsz, nodes, b_j * k_prev)
        cand_ok = ok.reshape(bsz, nodes, b_j * k_prev)
        k_j = min(kk, k_prev * b_j)
        q = relaxed(cand, cand_ok, tau_j, k_j)  # [B, nodes, k_j, b_j * k_prev]
        if level + 1 < len(b):  # values are only needed by the next level
            y = (q @ cand[..., None])[..., 0]
            ok = torch.arange(k_j, device=vals.device) < cand_ok.sum(-1, keepdim=True)
        if p is None:
            p = q  # P^(1) = Q^(1): each leaf maps to itself
        else:
            below = p.shape[-1]
            p = torch.einsum("bnlqc,bnqcs->bnlqs", q.reshape(bsz, nodes, k_j, b_j, k_prev),
                             p.reshape(bsz, nodes, b_j, k_prev, below)).reshape(bsz, nodes, k_j, b_j * below)
        k_prev = k_j
    assert p is not None  # a tree has at least one level
    return p[:, 0, :, :width]  # filler columns are exactly 0


def _tree(scores: Tensor, mask: Tensor, k: int | None, tau, depth: int, branching: Sequence[int] | None,
          relaxation: str = "neuralsort"):
    """The tree on each list's compacted real items: ``(P [B, k, W], order [B, W])``.

    Column ``c`` of ``P`` is item ``order[:, c]`` of the input (``W`` = longest list). With
    ``depth > 1`` and no ``branching`` the lists are grouped by their own branching and each
    group is one batched pass (at most ``ceil(W**(1/depth))`` groups, never a loop over lists).
    """
    if scores.dim() != 2 or scores.shape != mask.shape:
        raise ValueError(f"scores and mask must be [B, L] of one shape, got {tuple(scores.shape)}, {tuple(mask.shape)}")
    k = check_k(k)
    depth = check_count(depth, "depth", minimum=1)
    bsz, length = scores.shape
    lengths = mask.sum(-1)
    width = max(1, int(lengths.max())) if length else 1
    kk = width if k is None else min(k, width)
    # Compact: real items first, in their original order (the tree is position based).
    order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)[:, :width]
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    vals = torch.where(mask, scores, zero).gather(1, order)
    valid = mask.gather(1, order)
    if branching is not None or depth == 1:  # one tree for the batch (depth 1: one node)
        b = _branching(width, depth, branching)
        return _levels(vals, valid, kk, b, _temperatures(tau, len(b)), relaxation), order
    taus = _temperatures(tau, depth)
    per_list = _per_list_branching(lengths, depth)
    groups = torch.unique(per_list)
    if groups.numel() == 1:  # every list has the same tree (e.g. lists of one length)
        fanout = int(groups.item())
        n = min(width, fanout**depth)
        return _levels(vals[:, :n], valid[:, :n], kk, (fanout,) * depth, taus, relaxation), order
    out = torch.zeros(bsz, kk, width, dtype=scores.dtype, device=scores.device)
    for b in groups.tolist():  # one batched tree per distinct branching
        rows = torch.nonzero(per_list == b).flatten()
        w = min(width, b**depth)  # the group's lists are at most b**depth long
        p = _levels(vals[rows, :w], valid[rows, :w], kk, (b,) * depth, taus, relaxation)
        p = torch.nn.functional.pad(p, (0, width - p.shape[2], 0, kk - p.shape[1]))
        out = out.index_copy(0, rows, p)
    return out, order


def pirank_topk(scores: Tensor, mask: Tensor, k: int | None = 10, tau=1.0, depth: int = 1,
                branching: Sequence[int] | None = None, relaxation: str = "neuralsort") -> Tensor:
    r"""Top-``k`` rows of the relaxed sort matrix from the divide-and-conquer tree, ``[B, k, L]``.

    ``k`` is clipped to the longest list (``None`` = all rows); rows beyond a list's length
    and columns of padded items are 0. ``depth=1`` equals ``neuralsort(scores, mask, tau, k)``.

    Figure 4 of the paper (b = (3, 2), k = 2): the root holds (0.7, 0.5) as tau -> 0.

    >>> s = torch.tensor([[0.2, 0.5, 0.3, 0.4, 0.1, 0.7]], dtype=torch.float64)
    >>> P = pirank_topk(s, torch.ones_like(s, dtype=torch.bool), k=2, tau=1e-3, branching=(3, 2))
    >>> [round(v, 6) for v in (P @ s[0]).tolist()[0]]
    [0.7, 0.5]
    """
    p, order = _tree(scores, mask, k, tau, depth, branching, relaxation)
    bsz, kk, width = p.shape
    out = torch.zeros(bsz, kk, scores.shape[1], dtype=p.dtype, device=p.device)
    return out.scatter(2, order[:, None, :].expand(bsz, kk, width), p)


def _relaxed_top(scores: Tensor, values: Tensor, mask: Tensor, k, tau, depth, branching, relaxation) -> Tensor:
    """``[P_hat values]_j`` for the top rows ``j``, ``[B, k]``, without un-compacting ``P_hat``."""
    p, order = _tree(scores, mask, k, tau, depth, branching, relaxation)
    # row vector times P^T: the fast BLAS layout for a batched matrix-vector product
    return torch.bmm(values.gather(1, order)[:, None, :], p.transpose(1, 2))[:, 0, :]


def hard_order(scores: Tensor, mask: Tensor) -> Tensor:
    """Indices sorting each list by descending score, padding last, ties by position."""
    low = torch.full((), float("-inf"), dtype=scores.dtype, device=scores.device)
    return torch.argsort(torch.where(mask, scores, low), dim=-1, descending=True, stable=True)


def _hard_top(scores: Tensor, values: Tensor, mask: Tensor, kk: int) -> Tensor:
    """``values`` of the top ``kk`` items by hard rank (0 for padding), ``[B, kk]``."""
    idx = hard_order(scores.detach(), mask)[:, :kk]
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    return torch.where(mask.gather(1, idx), values.gather(1, idx), zero)


def _combine(relaxed: Tensor, hard: Tensor, straight_through: bool) -> Tensor:
    # hard + (r - r) is exactly `hard` in the forward pass and carries r's gradient.
    return hard + (relaxed - relaxed.detach()) if straight_through else relaxed


def pirank_ndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, k: int | None = 10, tau=5.0, depth: int = 1,
                branching: Sequence[int] | None = None, straight_through: bool = True,
                relaxation: str = "neuralsort") -> Tensor:
    r"""PiRank-NDCG@k loss :math:`1 - \sum_{j\le k} [\hat P g]_j d_j / \mathrm{maxDCG@k}`.

    With ``straight_through`` the value is exactly ``1 - NDCG@k`` (hard sort) and the
    gradient that of the relaxed loss. Batch value: mean over contributing lists.

    >>> s = torch.tensor([[0.1, 0.9, 0.5]]); y = torch.tensor([[2.0, 0.0, 1.0]])
    >>> m = torch.ones(1, 3, dtype=torch.bool)
    >>> v = pirank_ndcg(s, y, m, k=2)  # hard order: y = 0, 1, 2
    >>> round(v.item(), 4), round(1 - (1 / 1.5849625) / (3 + 1 / 1.5849625), 4)
    (0.8262, 0.8262)
    """
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    g = torch.where(mask, gain(labels), zero)
    top = _relaxed_top(scores, g, mask, k, tau, depth, branching, relaxation)
    kk = top.shape[1]
    disc = discounts(kk, like=scores)
    ideal = max_dcg(labels, mask, k)
    safe = torch.where(ideal > 0, ideal, torch.ones_like(ideal))
    relaxed = 1.0 - (top * disc).sum(-1) / safe
    hard = 1.0 - (_hard_top(scores, g, mask, kk) * disc).sum(-1) / safe
    contributes = (mask.sum(-1) >= 2) & (ideal > 0)
    return masked_mean_over_lists(_combine(relaxed, hard, straight_through), contributes, scores)


def pirank_arp(scores: Tensor, labels: Tensor, mask: Tensor, *, k: int | None = None, tau=5.0, depth: int = 1,
               branching: Sequence[int] | None = None, straight_through: bool = True,
               relaxation: str = "neuralsort") -> Tensor:
    r"""PiRank-ARP loss (lower is better); positions beyond ``k`` count as ``k + 1``.

    ``k=None`` (default): :math:`\sum_{j\le n} [\hat P y]_j\, j / \sum_i y_i`, whose
    straight-through forward value is ``bench.metrics`` ``"arp"`` (eq. 4). See the module
    docstring for ``k < n``. Batch value: mean over lists with >= 2 real items and a
    positive label sum.

    >>> s = torch.tensor([[0.1, 0.9, 0.5]]); y = torch.tensor([[2.0, 0.0, 1.0]])
    >>> m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(pirank_arp(s, y, m).item(), 4)  # (0*1 + 1*2 + 2*3) / 3
    2.6667
    >>> round(pirank_arp(s, y, m, k=1).item(), 4)  # (0*1 + 2*(1 + 2)) / 3
    2.0
    """
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    top = _relaxed_top(scores, labels, mask, k, tau, depth, branching, relaxation)
    kk = top.shape[1]
    pos = torch.arange(1, kk + 1, dtype=scores.dtype, device=scores.device)
    total = labels.sum(-1)  # padded labels are 0
    truncated = mask.sum(-1) > kk
    safe = torch.where(total > 0, total, torch.ones_like(total))

    def arp(top: Tensor) -> Tensor:  # top: label mass at ranks 1..kk
        tail = torch.where(truncated, (kk + 1) * (total - top.sum(-1)), torch.zeros_like(total))
        return ((top * pos).sum(-1) + tail) / safe

    relaxed = arp(top)
    hard = arp(_hard_top(scores, labels, mask, kk))
    contributes = (mask.sum(-1) >= 2) & (total > 0)
    return masked_mean_over_lists(_combine(relaxed, hard, straight_through), contributes, scores)
