r"""PL-Rank (Oosterhuis, SIGIR 2021 and 2022): the expected NDCG@k of a Plackett-Luce ranking
policy, with the PL-Rank estimate of its gradient from sampled rankings.

**Policy.** The scores :math:`s` of a list's :math:`n` real items are the logits of a
Plackett-Luce distribution over rankings :math:`y = (y_1, \dots, y_n)`:

.. math::

    \pi(y \mid s) = \prod_{k=1}^{n} \pi_k(y_k), \qquad
    \pi_k(i) = \frac{e^{s_i}}{D_k}, \quad D_k = \sum_{j \notin y_{1:k-1}} e^{s_j}.

**Objective.** The expected metric :math:`\mathcal R(s) = \mathbb E_{y \sim \pi}\bigl[\sum_{k=1}^{K}
\theta_k \rho_{y_k}\bigr]` with :math:`K = \min(k, n)`, gains :math:`\rho_i = 2^{y_i} - 1` and
weights :math:`\theta_k = d(k)/\mathrm{maxDCG@}k`: the expected NDCG@k. The loss is its
negative, :math:`-\mathcal R`.

**Sampling.** :math:`N` rankings per list by the Gumbel-max trick: sorting :math:`s + g`,
:math:`g_i` i.i.d. standard Gumbel, draws :math:`y \sim \pi(\cdot \mid s)` (Gumbel top-k
sampling; the noise comes from :func:`bench.losses.gumbel.gumbel_noise`, item-major, so
padding leaves a list's draws unchanged).

**Value.** The mean over the :math:`N` samples of their NDCG@k (an unbiased estimate of
:math:`\mathcal R`), negated. Its derivative for a fixed draw is zero almost everywhere (the
sampled rankings do not move with small changes of :math:`s`), so the loss's gradient is
**not** the derivative of its value: it is the PL-Rank estimate of :math:`-\nabla \mathcal R`
(the registry marks the loss ``estimated_gradient``).

**Gradient** (PL-Rank-2 of the 2021 paper, computed as PL-Rank-3 of the 2022 paper). With
:math:`R^{(n)}_{\ge k} = \sum_{x=k}^{K} \theta_x \rho_{y^{(n)}_x}` the reward from rank
:math:`k` on in sample :math:`n`, and :math:`r_i` the rank of item :math:`i` in it (items below
rank :math:`K` count as :math:`K`):

.. math::

    \frac{\partial \mathcal R}{\partial s_i} \approx \frac1N \sum_{n=1}^{N} \Bigl[
      R^{(n)}_{\ge r_i + 1}
      + e^{s_i} \Bigl( \rho_i \sum_{k=1}^{r_i} \frac{\theta_k}{D^{(n)}_k}
      - \sum_{k=1}^{r_i} \frac{R^{(n)}_{\ge k}}{D^{(n)}_k} \Bigr) \Bigr]

(:math:`R_{\ge K+1} = 0`). The first term is the reward that follows item :math:`i`'s
placement; the second replaces the sampled reward at each rank where :math:`i` could still
be placed by its expectation, :math:`\pi_k(i)(\theta_k \rho_i - R_{\ge k})`. The 2021 paper
proves the estimate unbiased. Cost: the prefix sums over :math:`k` make it
:math:`O(N (n \log K + K))` per list: only the first :math:`K` places are drawn (a partial
sort, ``topk``), since :math:`D_k` is the sum over the items placed from rank :math:`k` to
:math:`K` and over every item below rank :math:`K`; no :math:`N \times K \times n` tensor.

Numerics: :math:`D_k` comes from a reversed ``logcumsumexp`` of the placed items' scores
after the log-sum-exp of the items below rank :math:`K` (sums of positive terms, no
subtraction), and every :math:`e^{s_i} \sum_{k \le r_i} c_k / D_k` is taken as
:math:`\exp(s_i + \mathrm{logcumsumexp}_k(\log c_k - \log D_k))`, whose terms are each at most
:math:`c_k` (item :math:`i` is still among the remaining items at every :math:`k \le r_i`), so
nothing overflows for scores of any magnitude. Rewards of either sign (negative labels) are
summed as their positive and negative parts. The estimate is computed without autograd and
enters the graph as the gradient of the value (:class:`_WithGradient`).

A list contributes when it has >= 2 real items and ``maxDCG@k > 0``; the batch value (and
gradient) is the mean over contributing lists.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import (
    check_count,
    check_inputs,
    check_k,
    discounts,
    gain,
    masked_mean_over_lists,
    masked_scores,
    max_dcg,
    n_real,
)
from bench.losses.gumbel import gumbel_noise


def sample_rankings(scores: Tensor, mask: Tensor, n_samples: int, generator: torch.Generator | None,
                    top: int | None = None) -> Tensor:
    """``n_samples`` Plackett-Luce rankings per list, ``[B, N, L]`` item indices (padding last), or
    only their first ``top`` places, ``[B, N, top]`` (a partial sort: what PL-Rank needs).

    Gumbel-max: each ranking sorts ``s + g`` descending (:func:`~bench.losses.gumbel.gumbel_noise`).

    >>> order = sample_rankings(torch.tensor([[9.0, 0.0, 5.0]]), torch.tensor([[True, False, True]]), 2,
    ...                         torch.Generator().manual_seed(0))
    >>> order[0, :, 2].tolist()  # the padded item is always last
    [1, 1]
    """
    noise = gumbel_noise(mask, n_samples, scores.dtype, generator)
    low = torch.full((), float("-inf"), dtype=scores.dtype, device=scores.device)
    keys = torch.where(mask[:, None, :], masked_scores(scores, mask)[:, None, :] + noise, low)
    if top is None or top >= keys.shape[-1]:
        return torch.sort(keys, dim=-1, descending=True, stable=True).indices
    return torch.topk(keys, top, dim=-1, sorted=True).indices


def _prefix_log_sums(log_terms: Tensor, ranks: Tensor) -> Tensor:
    """``logsumexp(log_terms[..., :r + 1])`` for each rank ``r`` in ``ranks`` (gathered per item)."""
    return torch.logcumsumexp(log_terms, dim=-1).gather(-1, ranks)


def _log_of(values: Tensor) -> Tensor:
    """Elementwise log with ``-inf`` for values <= 0 (those terms then add nothing)."""
    low = torch.full((), float("-inf"), dtype=values.dtype, device=values.device)
    return torch.where(values > 0, torch.log(values), low)  # log of a value <= 0 is dropped here


@torch.no_grad()
def plrank_gradient(scores: Tensor, gains: Tensor, weights: Tensor, mask: Tensor, order: Tensor) -> tuple[Tensor, Tensor]:
    r"""The sampled metric and the PL-Rank estimate of :math:`\nabla_s \mathcal R`.

    ``scores``, ``gains`` (:math:`\rho`, 0 on padding), ``mask``: ``[B, L]``; ``weights``:
    :math:`\theta` ``[B, K]``, 0 at ranks beyond a list's own cut-off; ``order``: the sampled
    rankings ``[B, N, L]`` (:func:`sample_rankings`). Returns ``(metric [B, N], grad [B, L])``:
    each sample's :math:`\sum_k \theta_k \rho_{y_k}` and the estimate (module docstring),
    averaged over the samples; 0 on padding. Only the first ``K`` places of each ranking are
    read (``order`` may hold just those): every :math:`D_k` is the log-sum-exp of the items
    placed from rank :math:`k` on and of those below rank :math:`K`.

    >>> s = torch.tensor([[0.0, 0.0]]); rho = torch.tensor([[1.0, 0.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> theta = torch.tensor([[1.0, 0.0]])  # reward 1 when item 0 is ranked first: R = softmax(s)_0
    >>> order = torch.tensor([[[0, 1], [1, 0]]])  # one sample each way
    >>> metric, grad = plrank_gradient(s, rho, theta, m, order)
    >>> metric.tolist(), grad.tolist()  # dR/ds = (1/4, -1/4), exactly, from these two samples
    ([[1.0, 0.0]], [[0.25, -0.25]])
    """
    b, n_samples = order.shape[:2]
    length, kk = scores.shape[-1], weights.shape[-1]
    s = masked_scores(scores, mask)
    low = torch.full((), float("-inf"), dtype=s.dtype, device=s.device)
    top = order[..., :kk]  # [B, N, K] the items placed at ranks 1..K
    theta = weights[:, None, :]
    reward = theta * gains[:, None, :].expand(b, n_samples, length).gather(-1, top)  # theta_k rho_{y_k}
    after = torch.flip(torch.cumsum(torch.flip(reward, [-1]), dim=-1), [-1])  # R_{>=k}
    following = torch.nn.functional.pad(after[..., 1:], (0, 1))  # R_{>=k+1}
    # first term: item y_k collects R_{>=k+1}
    first = torch.zeros(b, n_samples, length, dtype=s.dtype, device=s.device).scatter_add_(-1, top, following)
    # log D_k: the log-sum-exp of the placed items from rank k on and of every item below rank K
    placed = torch.zeros(b, n_samples, length, dtype=torch.bool, device=s.device).scatter_(-1, top, True)
    below = torch.logsumexp(torch.where(mask[:, None, :] & ~placed, s[:, None, :], low), dim=-1, keepdim=True)
    top_s = torch.where(mask[:, None, :].expand(b, n_samples, length).gather(-1, top),
                        s[:, None, :].expand(b, n_samples, length).gather(-1, top), low)
    log_d = torch.flip(torch.logcumsumexp(torch.flip(torch.cat([top_s, below], -1), [-1]), dim=-1), [-1])[..., :kk]
    in_cut = theta > 0  # ranks within the list's own K (theta_k = d(k)/maxDCG > 0 there)
    log_d = torch.where(in_cut, log_d, torch.zeros((), dtype=s.dtype, device=s.device))
    # each item's last rank at which it was still available: its own rank, or K - 1 (0-based)
    ranks = torch.arange(kk, device=order.device).expand(b, n_samples, kk)
    rank = torch.full((b, n_samples, length), kk, dtype=order.dtype, device=order.device).scatter_(-1, top, ranks)
    cut = (in_cut.sum(-1) - 1).clamp(min=0)  # [B, 1] last rank within K, 0-based
    last = torch.minimum(rank, cut[:, :, None])
    # e^{s_i} sum_{k <= last_i} c_k / D_k for the three c's at once: theta, R+ and R- (R's parts)
    log_c = torch.stack([_log_of(theta.expand(b, n_samples, kk)), _log_of(after), _log_of(-after)])
    terms = torch.where(in_cut, log_c - log_d, low)
    sums = torch.exp(s[None, :, None, :] + _prefix_log_sums(terms, last.expand(3, b, n_samples, length)))
    per_sample = first + gains[:, None, :] * sums[0] - (sums[1] - sums[2])
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    grad = torch.where(mask, per_sample.mean(dim=1), zero)
    return after[..., 0] if kk else torch.zeros(b, n_samples, dtype=s.dtype, device=s.device), grad


class _WithGradient(torch.autograd.Function):
    """``value`` in the forward pass, ``grad_out * gradient`` for ``scores`` in the backward."""

    @staticmethod
    def forward(ctx, scores: Tensor, value: Tensor, gradient: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(gradient)
        return value.clone()

    @staticmethod
    def backward(ctx, grad_out: Tensor):  # type: ignore[override]
        (gradient,) = ctx.saved_tensors
        return grad_out[:, None] * gradient, None, None


def plrank_ndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, k: int | None = 10, n_samples: int = 100,
                generator: torch.Generator | None = None) -> Tensor:
    r"""PL-Rank loss: :math:`-\mathbb E_{y \sim \mathrm{PL}(s)}[\mathrm{NDCG@}k(y)]`, estimated from
    ``n_samples`` sampled rankings per list, with the PL-Rank gradient estimate.

    The value is minus the mean NDCG@k of the samples; the gradient is the PL-Rank-3 estimate
    of the expected metric's (module docstring), not the derivative of the value. ``k=None``
    is the whole list. The papers train with several sample counts; ``n_samples=100`` is this
    suite's default (the estimate's standard error falls as :math:`1/\sqrt N`). Every draw
    comes from ``generator`` (the trainer's seeded loss generator; ``None``: torch's global
    one). Batch value: mean over lists with >= 2 real items and ``maxDCG@k > 0``.

    >>> s = torch.tensor([[50.0, 0.0, -50.0]]); y = torch.tensor([[2.0, 1.0, 0.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> round(plrank_ndcg(s, y, m, generator=torch.Generator().manual_seed(0)).item(), 6)  # a sure ranking: -NDCG
    -1.0
    """
    labels = check_inputs(scores, labels, mask)
    k = check_k(k)
    n_samples = check_count(n_samples, "n_samples", minimum=1)
    length = scores.shape[-1]
    kk = length if k is None else min(k, length)
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    g = torch.where(mask, gain(labels), zero)
    ideal = max_dcg(labels, mask, k)
    contributes = (n_real(mask) >= 2) & (ideal > 0)
    safe = torch.where(ideal > 0, ideal, torch.ones_like(ideal))
    ranks = torch.arange(kk, device=scores.device)
    theta = torch.where(ranks[None, :] < n_real(mask)[:, None], discounts(kk, like=scores)[None, :] / safe[:, None], zero)
    order = sample_rankings(scores.detach(), mask, n_samples, generator, top=kk)
    metric, grad = plrank_gradient(scores.detach(), g, theta, mask, order)
    per_list = _WithGradient.apply(masked_scores(scores, mask), -metric.mean(dim=1), -grad)
    return masked_mean_over_lists(per_list, contributes, scores)
