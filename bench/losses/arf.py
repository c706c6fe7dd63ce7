r"""ARF: Adaptive Neural Ranking Framework (Wang et al. 2024), eqs. 11-13.

With NeuralSort matrices (rows = ranks, columns = items; :mod:`bench.losses.neuralsort`)
:math:`P_s = \hat P(s, \tau)` of the scores and :math:`P_v = \hat P(y, \tau_{label})` of the
labels (tied labels share their rows' mass equally, which NeuralSort does by itself):

.. math::

    L_{relax} = -\sum_j \Big[\sum_{i \le k} P_v[i, j]\Big]
                \log\Big(\frac{1}{m} \sum_{i \le m} P_s[i, j]\Big) \quad \text{(eq. 11)}

    L_{global} = -\sum_i \sum_h P_v[i, h] \log P_s[i, h] \quad \text{(eq. 12)}

    L_{total} = L_{relax} + \frac{L_{global}}{2\alpha^2} + \log|\alpha| \quad \text{(eq. 13)}

Choices fixed here:

* ``m`` and ``k`` are clipped to each list's length ``n`` (and ``1/m`` uses the clipped
  value), so :math:`\frac1m\sum_{i\le m} P_s[i,:]` stays a distribution over the items.
* Every logarithm is taken in the log domain: :math:`\log P_s[i, j] = z_{ij} - \mathrm{LSE}_j z_{ij}`
  from the NeuralSort logits and :math:`\log \sum_{i \le m} P_s[i, j]` a log-sum-exp over
  those rows. No value is ever clamped, so the forward value carries no clamp bias at all
  (the spec allows 1e-12). :math:`L_{global}` uses that the rows of :math:`P_v` sum to 1:
  :math:`\sum_h P_v[i,h] \log P_s[i,h] = c_i [P_v s]_i + [P_v b]_i - \mathrm{LSE}_i`, so only
  one :math:`n \times n` logit matrix carries gradients. :math:`P_v` is a constant (labels are data).
* ``relaxation`` (:mod:`bench.losses.relaxations`): the matrix :math:`P_s` of the scores,
  ``"neuralsort"`` (the paper's, the default) or ``"softsort"``; any matrix given as a softmax
  of logits fits the log-domain computation (sorting networks do not: their entries can be 0).
  With ``"softsort"``, :math:`L_{global}` is :math:`-\sum_i (\sum_h P_v[i,h] z_{ih} - \mathrm{LSE}_i)`
  from the full logit matrix. :math:`P_v` stays NeuralSort's at ``tau_label`` (a near-hard
  target whose tied labels share their mass, whatever relaxes the scores).
* :math:`\alpha` is a learnable scalar (init 1) of the :class:`ARFLoss` module, cast to the
  scores' dtype and device on every call so it may live anywhere.

A list contributes when it has at least 2 real items; the batch value is the mean of the
per-list losses over contributing lists (for :math:`L_{total}` that is
:math:`\overline{L_{relax}} + \overline{L_{global}}/(2\alpha^2) + \log|\alpha|`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from bench.losses._common import check_inputs, check_k, check_positive, logsumexp, masked_mean_over_lists
from bench.losses.neuralsort import neuralsort, neuralsort_parts, outer_logits
from bench.losses.relaxations import sort_logits


def _rows_below(limit: Tensor, n_rows: int) -> Tensor:
    """Bool ``[B, n_rows]``: row index < limit (per list)."""
    return torch.arange(n_rows, device=limit.device)[None, :] < limit[:, None]


def _check_hyper(m: int, k: int, tau: float, tau_label: float) -> tuple[int, int]:
    """``(m, k)`` as ints; ``ValueError`` unless both are integers >= 1 and both temperatures > 0."""
    m, k = check_k(m, "m", optional=False), check_k(k, optional=False)
    check_positive(tau, "tau")
    check_positive(tau_label, "tau_label")
    return m, k


def _arf_terms(scores: Tensor, labels: Tensor, mask: Tensor, m: int, k: int, tau: float, tau_label: float,
               with_global: bool, relaxation: str = "neuralsort"):
    labels = check_inputs(scores, labels, mask)
    m, k = _check_hyper(m, k, tau, tau_label)
    logits = sort_logits(relaxation)
    length = scores.shape[-1]
    n = mask.sum(-1)
    dtype, device = scores.dtype, scores.device
    zero = torch.zeros((), dtype=dtype, device=device)
    low = torch.full((), float("-inf"), dtype=dtype, device=device)
    rows_m, rows_k = min(m, length), min(k, length)
    rows_s = length if with_global else rows_m
    rows_v = length if with_global else rows_k
    # log P_s[i, j] = z_ij - LSE_j z_ij with z_ij = coef_i s_j + bias_j (one logit matrix).
    if relaxation == "neuralsort":  # factored logits: L_global below needs no second logit matrix
        coef, s, bias, row_valid, _ = neuralsort_parts(scores, mask, tau, rows_s)
        z = outer_logits(coef, s, bias)
    else:
        z, row_valid, _ = logits(scores, mask, tau, rows_s)
    lse = logsumexp(z, dim=-1)  # [B, rows_s]
    with torch.no_grad():  # labels are data: P_v is a constant of the loss
        p_v = neuralsort(labels, mask, tau_label, rows_v)  # [B, rows_v, L]
    m_eff = n.clamp(max=m)
    k_eff = n.clamp(max=k)
    # Column weights: how much of item j lies in the label top-k.
    w = (p_v[:, :rows_k] * _rows_below(k_eff, rows_k)[:, :, None]).sum(1)
    # log( sum_{i < m} P_s[i, j] ) by log-sum-exp over the selected rows (at least one row, and
    # padded columns set to 0 first, so no reduction ever sees only -inf).
    logp_top = torch.where(mask[:, None, :], z[:, :rows_m] - lse[:, :rows_m, None], zero)
    sel = _rows_below(m_eff.clamp(min=1), rows_m)[:, :, None]
    log_col = logsumexp(torch.where(sel, logp_top, low), dim=1)
    log_m = torch.log(m_eff.clamp(min=1).to(dtype))
    relax = -torch.where(mask, w * (log_col - log_m[:, None]), zero).sum(-1)
    glob = None
    if with_global:
        if relaxation == "neuralsort":
            # sum_h P_v[i, h] log P_s[i, h] = coef_i [P_v s]_i + [P_v bias]_i - LSE_i  (rows of P_v sum to 1)
            b0 = torch.where(mask, bias, zero)
            pv_s = torch.bmm(torch.stack([s, b0], 1), p_v.transpose(1, 2))  # [B, 2, L]: rows P_v s, P_v b
            row = coef * pv_s[:, 0] + pv_s[:, 1] - lse
        else:  # sum_h P_v[i, h] (z_ih - LSE_i), padded columns (z = -inf, P_v = 0) left out
            row = (p_v * torch.where(mask[:, None, :], z, zero)).sum(-1) - lse
        glob = -torch.where(row_valid, row, zero).sum(-1)
    return relax, glob, n >= 2


def arf_relax(scores: Tensor, labels: Tensor, mask: Tensor, *, m: int = 30, k: int = 15, tau: float = 1.0,
              tau_label: float = 1e-3, relaxation: str = "neuralsort") -> Tensor:
    r"""ARF's :math:`L_{relax}` (eq. 11) alone: cross entropy between the label top-k column
    mass and the predicted top-m column distribution. Costs :math:`O((m + k) n)` per list.

    Batch value: mean over lists with >= 2 real items.

    >>> y = torch.tensor([[3.0, 2.0, 1.0, 0.0]]); m = torch.ones(1, 4, dtype=torch.bool)
    >>> good = arf_relax(y.clone(), y, m, m=2, k=2, tau=0.1)
    >>> bad = arf_relax(-y, y, m, m=2, k=2, tau=0.1)
    >>> bool(good < bad), round(good.item(), 4)  # perfect top-2: 2 * log(2)
    (True, 1.3863)
    """
    relax, _, contributes = _arf_terms(scores, labels, mask, m, k, tau, tau_label, with_global=False,
                                       relaxation=relaxation)
    return masked_mean_over_lists(relax, contributes, scores)


class ARFLoss(nn.Module):
    r"""ARF total loss (eq. 13) with a learnable :math:`\alpha` (init 1).

    ``forward(scores, labels, mask) -> scalar``; add ``loss.parameters()`` to the optimiser.

    >>> loss = ARFLoss(m=2, k=2)
    >>> s = torch.tensor([[0.3, 0.2, 0.9, 0.1]]); y = torch.tensor([[1.0, 0.0, 2.0, 0.0]])
    >>> v = loss(s, y, torch.ones(1, 4, dtype=torch.bool)); v.backward()
    >>> loss.alpha.grad is not None and bool(torch.isfinite(v))
    True
    """

    def __init__(self, *, m: int = 30, k: int = 15, tau: float = 1.0, tau_label: float = 1e-3, alpha: float = 1.0,
                 relaxation: str = "neuralsort"):
        super().__init__()
        self.m, self.k = _check_hyper(m, k, tau, tau_label)
        sort_logits(relaxation)  # refuse an unknown name when the loss is built
        self.relaxation = relaxation
        if alpha == 0 or not math.isfinite(alpha):
            raise ValueError(f"alpha must be finite and non-zero, got {alpha}")
        self.tau, self.tau_label = float(tau), float(tau_label)
        self.alpha = nn.Parameter(torch.tensor(float(alpha)))

    def forward(self, scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
        relax, glob, contributes = _arf_terms(scores, labels, mask, self.m, self.k, self.tau, self.tau_label,
                                              with_global=True, relaxation=self.relaxation)
        alpha = self.alpha.to(dtype=scores.dtype, device=scores.device)
        per_list = relax + glob / (2.0 * alpha**2) + torch.log(alpha.abs())
        if not bool(contributes.any()):
            return 0.0 * scores.sum() + 0.0 * alpha
        return masked_mean_over_lists(per_list, contributes, scores)

    def extra_repr(self) -> str:
        extra = "" if self.relaxation == "neuralsort" else f", relaxation={self.relaxation}"
        return f"m={self.m}, k={self.k}, tau={self.tau}, tau_label={self.tau_label}{extra}"
