r"""RankNet (Burges et al., 2005) and RankNet@k (Pobrotyn & Bialobrzeski, 2021)."""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, check_k, check_positive, masked_mean_over_lists, masked_scores
from bench.losses.pairwise import (
    logistic_pair_sum,
    n_labelled_pairs,
    pair_mask,
    sort_by_prediction,
)


def ranknet(scores: Tensor, labels: Tensor, mask: Tensor, *, sigma: float = 1.0, k: int | None = None) -> Tensor:
    r"""RankNet: mean pairwise logistic loss over the labelled pairs of each list.

    .. math::
        \ell = \frac{1}{|P|} \sum_{(i, j) \in P} \log\bigl(1 + e^{-\sigma (s_i - s_j)}\bigr),
        \qquad P = \{(i, j) : y_i > y_j\}

    With ``k`` (RankNet@k of the NeuralNDCG paper) ``P`` keeps only the pairs where at
    least one of the two items is in the predicted top ``k`` (ranks from the descending
    stable sort of the scores; ties keep tensor order); the mean is over the kept pairs.

    A list contributes when it has at least one (kept) pair; the batch value is the mean
    of the per-list losses over contributing lists (not a ratio of batch sums), and
    ``0 * scores.sum()`` when none contributes. Natural logarithm (``ln 2`` for a tie).

    >>> s = torch.tensor([[1.0, 0.0, 2.0]]); y = torch.tensor([[1.0, 0.0, 0.0]])
    >>> m = torch.ones(1, 3, dtype=torch.bool)
    >>> # pairs (0, 1): log(1 + e^-1) = 0.3133 and (0, 2): log(1 + e^1) = 1.3133
    >>> round(ranknet(s, y, m).item(), 4)
    0.8133
    >>> round(ranknet(s, y, m, k=1).item(), 4)  # item 2 is ranked first: only pair (0, 2) kept
    1.3133
    """
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    check_positive(sigma, "sigma")
    if k is None:
        # The bool pair mask goes to the pair sum as is (no float weights); the pair count
        # comes from the label ranks, O(L log L), not from a pass over the mask.
        s = masked_scores(scores, mask)
        n_pairs = n_labelled_pairs(labels, mask).to(s.dtype)
        total = logistic_pair_sum(s, lambda c: pair_mask(labels[c], mask[c]), sigma)  # a chunk's mask at a time
    else:
        s, mask_sorted, labels_sorted = sort_by_prediction(scores, mask, labels)
        pairs = pair_mask(labels_sorted, mask_sorted)
        top = torch.arange(s.shape[-1], device=s.device) < k  # sorted slot p has rank p + 1
        pairs = pairs & (top.unsqueeze(-1) | top.unsqueeze(-2))
        n_pairs = pairs.sum(dim=(-1, -2)).to(s.dtype)
        total = logistic_pair_sum(s, pairs, sigma)
    return masked_mean_over_lists(total / n_pairs.clamp(min=1.0), n_pairs > 0, s)
