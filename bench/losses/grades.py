r"""Point-wise classification over the label grades: ARF's "Softmax" baseline.

ARF (Wang et al. 2024, Sec. 5.2) lists a "Point-wise Softmax", "the n-class classification
method by softmax", as its most basic baseline, and its Appendix Table 9 gives it time and
space :math:`O(n \cdot l)` for ``n`` items and ``l`` distinct labels (every other method
:math:`O(n^2)`): a classifier over the label grades, not the listwise softmax cross entropy
of :func:`bench.losses.listwise.softmax` (docs/experiments.md, "The point-wise Softmax of ARF").

The scorer gives every item one logit per grade, :math:`z_{b,i} \in \mathbb{R}^C` with
:math:`C` = ``grades``, and the loss is the cross entropy of the softmax over the grades
against the item's own grade, averaged over the real items of the whole batch:

.. math::
    \ell = -\frac{1}{N} \sum_{(b, i)\,:\,\mathrm{mask}_{b,i}} \log \operatorname{softmax}(z_{b,i})_{y_{b,i}},
    \qquad N = \textstyle\sum_{b,i} \mathrm{mask}_{b,i},

i.e. ``torch.nn.functional.cross_entropy`` (mean reduction) on the flattened real items. A
point-wise loss weighs items, not lists: a long list counts more than a short one, and a list
of one item contributes (the classification of a lone item is still defined). Items are
then ranked by their expected grade :math:`\sum_c c\, \operatorname{softmax}(z)_c`
(:class:`bench.models.ExpectedGrade`).

**Contract.** Every other loss takes ``scores [B, L]``; this one takes ``scores [B, L, C]``
(the registry marks it ``outputs="grade_logits"``: the trainer then builds a scorer with
``C`` outputs and trains on its logits, :func:`bench.training.loss.make_loss`). Labels must
be the integers ``0 .. C-1`` on real items (web datasets: 0-4, ``grades = 5``); anything else
is a ``ValueError`` (one host synchronisation per call). No real item: ``0 * scores.sum()``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_count, check_inputs


def softmax_pointwise(scores: Tensor, labels: Tensor, mask: Tensor, *, grades: int = 5) -> Tensor:
    r"""Cross entropy of a softmax over ``grades`` label grades, mean over the real items.

    >>> z = torch.tensor([[[0.0, 0.0], [2.0, 0.0], [9.0, 9.0]]])  # one list, 2 real items, C = 2
    >>> y = torch.tensor([[1.0, 0.0, 1.0]]); m = torch.tensor([[True, True, False]])
    >>> v = softmax_pointwise(z, y, m, grades=2)
    >>> bool(torch.isclose(v, (torch.log(torch.tensor(2.0)) + torch.log1p(torch.exp(torch.tensor(-2.0)))) / 2))
    True
    """
    grades = check_count(grades, "grades", minimum=2)
    if scores.dim() != 3 or scores.shape[-1] != grades:
        raise ValueError(f"scores must be [B, L, grades] = [B, L, {grades}] logits, got {tuple(scores.shape)}")
    labels = check_inputs(scores[..., 0], labels, mask)
    real_labels = labels[mask]
    bad = (real_labels < 0) | (real_labels > grades - 1) | (real_labels != torch.round(real_labels))
    if bool(bad.any()):
        raise ValueError(f"labels must be the integers 0..{grades - 1} (grades={grades}), "
                         f"got {real_labels[bad][0].item()!r}")
    log_p = torch.log_softmax(scores[mask], dim=-1)  # [N, C]: padded items never enter
    picked = log_p.gather(-1, real_labels.long().unsqueeze(-1)).squeeze(-1)
    graph_link = 0.0 * torch.nan_to_num(scores, nan=0.0, posinf=0.0, neginf=0.0).sum()
    if picked.numel() == 0:
        return graph_link
    return -picked.mean() + graph_link
