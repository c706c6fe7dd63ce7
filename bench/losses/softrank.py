r"""Losses from the fast soft ranks of :mod:`bench.losses.permutahedron` (Blondel et al. 2020).

With :math:`\tilde r = r_\varepsilon(s)` the soft descending ranks of a list's ``n`` real scores
(1 = the highest, values in :math:`[1, n]`, L2 or KL regularisation):

* ``softrank_ndcg``, NDCG with the soft rank in the discount (the "soft rank NDCG" of the
  literature, ApproxNDCG's form with the permutahedron's ranks in place of the sigmoid sums):

  .. math:: \ell = -\frac{1}{\mathrm{maxDCG}} \sum_i \frac{2^{y_i} - 1}{\log_2(1 + \tilde r_i)}.

  As :math:`\varepsilon \to 0` it is ``-NDCG@max`` of the score order (tied scores excepted);
  it is exactly that value as soon as the scores' gaps exceed :math:`\varepsilon` times the
  rank steps (the projection then lands on a vertex). A list contributes when it has >= 2
  real items and ``maxDCG > 0``.
* ``softrank_spearman``, a Spearman-style loss: the squared distance between the soft ranks
  of the scores and the ranks of the labels, scaled so that its hard value is
  :math:`1 - \rho_{\mathrm{Spearman}}`:

  .. math:: \ell = \frac{6 \sum_i (\tilde r_i - R_i)^2}{n (n^2 - 1)},

  :math:`R` the descending ranks of the labels with tied labels sharing their mean rank
  (fractional ranking, computed by sorting). Without ties in scores or labels the
  :math:`\varepsilon \to 0` value is exactly :math:`1 - \rho` (``scipy.stats.spearmanr``);
  with tied labels it is this squared-rank-distance form, not Pearson's correlation of the
  ranks. A list contributes when it has >= 2 real items and two different labels.

Both are :math:`O(n \log n)` per list (sorting, the :math:`O(n)` isotonic regression and its
:math:`O(n)` backward). Default :math:`\varepsilon = 1`, the default of the authors' code and of
``torchsort``; scores are not rescaled, so the model sets the effective sharpness. The batch
value is the mean of the per-list losses over contributing lists.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, gain, masked_mean_over_lists, max_dcg, n_real
from bench.losses.permutahedron import Regularization, soft_rank


def softrank_ndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, epsilon: float = 1.0,
                  regularization: Regularization = "l2") -> Tensor:
    r"""Negative NDCG with soft ranks, :math:`-\sum_i g_i / \log_2(1 + \tilde r_i) / \mathrm{maxDCG}`.

    >>> s = torch.tensor([[2.0, 1.0]]); y = torch.tensor([[0.0, 1.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> round(softrank_ndcg(s, y, m, epsilon=0.01).item(), 4)  # relevant item at rank 2: -1/log2(3)
    -0.6309
    """
    labels = check_inputs(scores, labels, mask)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    ranks = soft_rank(torch.where(mask, scores, zero), mask, epsilon=epsilon, regularization=regularization)
    g = torch.where(mask, gain(labels), zero)
    ideal = max_dcg(labels, mask)
    dcg = torch.where(mask, g / torch.log2(1.0 + torch.where(mask, ranks, torch.ones_like(ranks))), zero).sum(-1)
    contributes = (n_real(mask) >= 2) & (ideal > 0)
    return masked_mean_over_lists(-dcg / torch.where(ideal > 0, ideal, torch.ones_like(ideal)), contributes, scores)


def fractional_ranks(values: Tensor, mask: Tensor) -> Tensor:
    """Descending ranks of the real entries (1 = largest), ties sharing their mean rank; 0 on padding.

    >>> fractional_ranks(torch.tensor([[1.0, 3.0, 1.0, 0.0, 9.0]]), torch.tensor([[True] * 4 + [False]])).tolist()
    [[2.5, 1.0, 2.5, 4.0, 0.0]]
    """
    inf = torch.full((), float("inf"), dtype=values.dtype, device=values.device)
    keys = torch.sort(torch.where(mask, -values, inf), dim=-1).values.contiguous()  # ascending -y, padding last
    query = torch.where(mask, -values, inf).contiguous()
    before = torch.searchsorted(keys, query, right=False)  # strictly larger labels
    upto = torch.searchsorted(keys, query, right=True)  # larger or equal
    ranks = (before + upto + 1).to(values.dtype) / 2.0  # mean of ranks before+1 .. upto
    return torch.where(mask, ranks, torch.zeros((), dtype=values.dtype, device=values.device))


def softrank_spearman(scores: Tensor, labels: Tensor, mask: Tensor, *, epsilon: float = 1.0,
                      regularization: Regularization = "l2") -> Tensor:
    r"""Spearman-style loss :math:`6 \sum_i (\tilde r_i - R_i)^2 / (n (n^2 - 1))`; hard value :math:`1 - \rho`.

    >>> y = torch.tensor([[3.0, 2.0, 1.0, 0.0]]); m = torch.ones(1, 4, dtype=torch.bool)
    >>> softrank_spearman(y, y, m, epsilon=0.01).item(), softrank_spearman(-y, y, m, epsilon=0.01).item()
    (0.0, 2.0)
    """
    labels = check_inputs(scores, labels, mask)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    ranks = soft_rank(torch.where(mask, scores, zero), mask, epsilon=epsilon, regularization=regularization)
    target = fractional_ranks(labels, mask)
    n = n_real(mask).to(scores.dtype)
    sq = torch.where(mask, (ranks - target) ** 2, zero).sum(-1)
    low = torch.full((), float("inf"), dtype=labels.dtype, device=labels.device)
    spread = torch.where(mask, labels, -low).amax(-1) > torch.where(mask, labels, low).amin(-1)
    contributes = (n_real(mask) >= 2) & spread
    per_list = 6.0 * sq / torch.where(contributes, n * (n * n - 1.0), torch.ones_like(n))
    return masked_mean_over_lists(per_list, contributes, scores)
