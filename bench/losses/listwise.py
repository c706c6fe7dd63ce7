r"""Listwise and pointwise baselines: ListNet, Softmax, ListMLE, RMSE.

All are ``O(B L)`` (ListMLE ``O(B L log L)`` for its sort). A list contributes when it
has at least 2 real items (Softmax additionally needs a positive label sum); the batch
value is the mean of the per-list losses over contributing lists.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import check_inputs, check_positive, masked_mean_over_lists, masked_scores, n_real


def masked_log_softmax(x: Tensor, mask: Tensor) -> Tensor:
    """``log_softmax`` over the real items of each list; 0 on padding, never NaN.

    Padding enters as ``-inf`` (exactly zero probability); a list without real items is
    computed on zeros so no ``-inf - -inf`` appears in the value or the gradient.

    >>> out = masked_log_softmax(torch.tensor([[0.0, 0.0, 7.0]]), torch.tensor([[True, True, False]]))
    >>> [round(v, 4) for v in out[0].tolist()]
    [-0.6931, -0.6931, 0.0]
    """
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    has_real = mask.any(dim=-1, keepdim=True)
    filled = torch.where(mask, x, torch.full((), float("-inf"), dtype=x.dtype, device=x.device))
    filled = torch.where(has_real, filled, zero)
    return torch.where(mask, torch.log_softmax(filled, dim=-1), zero)


def listnet(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    r"""ListNet top-one cross entropy (Cao et al., 2007).

    .. math:: \ell = -\sum_i \operatorname{softmax}(y)_i \log \operatorname{softmax}(s)_i

    over real items. Lists whose labels are all equal still contribute (uniform target),
    as in the original; lists with fewer than 2 real items do not.

    >>> s = torch.tensor([[0.0, 0.0]]); y = torch.tensor([[1.0, 0.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> round(listnet(s, y, m).item(), 4)  # uniform predictions: log 2
    0.6931
    """
    labels = check_inputs(scores, labels, mask)
    s = masked_scores(scores, mask)
    target = masked_log_softmax(labels, mask).exp() * mask.to(s.dtype)
    per_list = -(target * masked_log_softmax(s, mask)).sum(dim=-1)
    return masked_mean_over_lists(per_list, n_real(mask) >= 2, s)


def softmax(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    r"""TF-Ranking's softmax cross entropy with label-proportional targets.

    .. math:: \ell = -\sum_i \frac{y_i}{\sum_j y_j} \log \operatorname{softmax}(s)_i

    Labels must be non-negative; a list contributes when it has >= 2 real items and a
    positive label sum.

    >>> s = torch.tensor([[1.0, 0.0, 0.0]]); y = torch.tensor([[2.0, 0.0, 2.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> v = 0.5 * (torch.logsumexp(s, -1) - 1.0) + 0.5 * torch.logsumexp(s, -1)
    >>> bool(torch.isclose(softmax(s, y, m), v[0]))
    True
    """
    labels = check_inputs(scores, labels, mask)
    s = masked_scores(scores, mask)
    y = masked_scores(labels, mask)
    total = y.sum(dim=-1)
    contributes = (n_real(mask) >= 2) & (total > 0)
    target = y / torch.where(total > 0, total, 1.0).unsqueeze(-1)
    per_list = -(target * masked_log_softmax(s, mask)).sum(dim=-1)
    return masked_mean_over_lists(per_list, contributes, s)


def _tie_break_noise(mask: Tensor, dtype: torch.dtype, generator: torch.Generator | None) -> Tensor:
    """Uniform noise ``[B, L]``, drawn item-major so appended padding leaves it unchanged.

    Drawing ``[L, B]`` and transposing gives item ``j`` of list ``b`` the ``(j * B + b)``-th
    draw, so padding added at the end of the lists does not shift the real items' draws.
    """
    b, length = mask.shape
    device = generator.device if generator is not None else mask.device
    u = torch.rand(length, b, generator=generator, dtype=dtype, device=device)
    return u.T.to(mask.device)


def listmle(scores: Tensor, labels: Tensor, mask: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
    r"""ListMLE: Plackett-Luce negative log-likelihood of the label order (Xia et al., 2008).

    With :math:`\pi` the real items sorted by descending label,

    .. math::
        \ell = \sum_{t=1}^{n} \Bigl[\log \sum_{u=t}^{n} e^{s_{\pi(u)}} - s_{\pi(t)}\Bigr].

    Equal labels are ordered at random, with uniform noise drawn from ``generator`` (the
    trainer's seeded ``torch.Generator``; ``None`` uses torch's global generator). The
    noise is drawn item-major, so the same generator state gives the same tie order for a
    list padded at the end; it does depend on the batch composition. Computed with a
    reversed ``logcumsumexp`` (stable for scores of any magnitude). A list contributes when
    it has >= 2 real items.

    >>> s = torch.tensor([[0.0, 0.0]]); y = torch.tensor([[1.0, 0.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> round(listmle(s, y, m).item(), 4)  # log(e^0 + e^0) - 0 + (0 - 0)
    0.6931
    """
    labels = check_inputs(scores, labels, mask)
    s = masked_scores(scores, mask)
    noise = _tie_break_noise(mask, s.dtype, generator)
    by_noise = torch.argsort(noise, dim=-1)
    # Padding first (+inf key), then labels descending; the stable sort keeps the random
    # noise order inside label ties. Padding first means the suffix sums below only ever
    # cover real items, so no -inf enters logcumsumexp.
    key = torch.where(mask, labels, torch.full((), float("inf"), dtype=s.dtype, device=s.device))
    within = torch.sort(torch.gather(key, -1, by_noise), dim=-1, descending=True, stable=True).indices
    order = torch.gather(by_noise, -1, within)
    s_o = torch.gather(s, -1, order)
    m_o = torch.gather(mask, -1, order)
    suffix_lse = torch.flip(torch.logcumsumexp(torch.flip(s_o, [-1]), dim=-1), [-1])
    terms = torch.where(m_o, suffix_lse - s_o, torch.zeros((), dtype=s.dtype, device=s.device))
    return masked_mean_over_lists(terms.sum(dim=-1), n_real(mask) >= 2, s)


def rmse(scores: Tensor, labels: Tensor, mask: Tensor, *, n_levels: float = 4.0) -> Tensor:
    r"""Pointwise RMSE baseline of the NeuralNDCG paper.

    .. math:: \ell = \sqrt{\frac{1}{n} \sum_i \bigl(\sigma(s_i)\, n_\mathrm{levels} - y_i\bigr)^2}

    per list over real items. ``n_levels = 4`` by default: the web datasets grade 0..4, so
    :math:`\sigma(s) \cdot 4` spans exactly the label range. At an exact fit (mean square
    0) the value is 0 and the gradient is taken as 0 (the square root's subgradient),
    never NaN.

    >>> s = torch.tensor([[0.0, 0.0]]); y = torch.tensor([[2.0, 0.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> round(rmse(s, y, m).item(), 4)  # predictions 2, 2: sqrt((0 + 4) / 2)
    1.4142
    """
    labels = check_inputs(scores, labels, mask)
    check_positive(n_levels, "n_levels")
    s = masked_scores(scores, mask)
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    err = torch.where(mask, torch.sigmoid(s) * n_levels - labels, zero)
    n = n_real(mask).to(s.dtype)
    mse = (err * err).sum(dim=-1) / n.clamp(min=1.0)
    positive = mse > 0
    per_list = torch.where(positive, torch.sqrt(torch.where(positive, mse, 1.0)), zero)
    return masked_mean_over_lists(per_list, n_real(mask) >= 2, s)
