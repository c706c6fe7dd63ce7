r"""Gumbel-sampled losses (Bruch, Han, Bendersky & Najork 2020), as TF-Ranking and rax build them.

A list's scores :math:`s` are perturbed by ``sample_size`` independent draws of standard Gumbel
noise, :math:`g^{(t)}_i = -\log(-\log u^{(t)}_i)` with :math:`u \sim U(0, 1)`, and a deterministic
loss is evaluated on each perturbed list; the loss is the mean over the samples. Sorting
:math:`s + g` draws a ranking from the Plackett-Luce model with logits :math:`s` (the Gumbel-max
trick, :func:`gumbel_noise`), so the loss is a Monte-Carlo estimate of the deterministic loss's
expectation under that ranking distribution, and its gradient for a fixed draw is the exact
derivative of that estimate (reparameterised: the noise does not depend on :math:`s`).

The perturbed scores are TF-Ranking's ``GumbelSampler``'s:

.. math::

    x^{(t)} = \log\bigl(\mathrm{softmax}((s + g^{(t)}) / T) + \varepsilon\bigr)

over each list's real items, with ``gumbel_temperature`` :math:`T` (default 1) and
``smoothing`` :math:`\varepsilon` (default ``1e-20``, TF-Ranking's constant; ``None`` leaves out
the log-softmax and uses :math:`(s + g)/T`, rax's ``gumbel_t12n`` without its
``smoothing_factor``, whose ``beta`` scales the noise instead: ``s + beta g``). Without
smoothing the log-softmax is a shift of each list and changes neither loss below; with it,
an item whose probability falls far below :math:`\varepsilon` gets :math:`\log\varepsilon`
(about -46), which caps how far back the losses see it.

- :func:`gumbel_approxndcg`: :func:`bench.losses.approxndcg.approxndcg` on each :math:`x^{(t)}`
  (TF-Ranking's ``GumbelApproxNDCGLoss``: ``alpha = 1/temperature = 10``, 8 samples);
- :func:`gumbel_neuralsort_ce`: :func:`bench.losses.neuralsort_ce.neuralsort_ce` on each
  :math:`x^{(t)}` (TF-Ranking's ``gumbel_neural_sort_cross_entropy_loss``; Grover et al.'s
  stochastic NeuralSort).

Randomness: every draw comes from ``generator`` (the trainer passes its seeded loss generator;
``None`` uses torch's global one). The draws are made item-major (``[L, B, S]``, then
transposed), so padding appended to the lists leaves the real items' noise unchanged and the
loss is padding-invariant for a given generator state; the noise does depend on the batch's
shape, so a list's value in a batch equals its value alone only in expectation (the registry
marks these losses ``sampled``). A list contributes when the wrapped loss counts it (>= 2 real
items, and for ApproxNDCG ``maxDCG > 0``); the batch value is the mean over contributing lists
of the per-list mean over samples.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from bench.losses._common import check_count, check_inputs, check_positive, masked_scores
from bench.losses.approxndcg import approxndcg
from bench.losses.neuralsort_ce import neuralsort_ce


def gumbel_noise(mask: Tensor, samples: int, dtype: torch.dtype, generator: torch.Generator | None) -> Tensor:
    r"""Standard Gumbel noise ``[B, samples, L]`` in ``dtype`` on ``mask``'s device, drawn item-major.

    Item ``j`` of list ``b`` gets the draws ``(j B + b) S .. (j B + b) S + S - 1`` of the
    generator's stream, so padding appended to the lists does not shift a real item's noise.
    The draws and logarithms are in float64 whatever ``dtype`` (then rounded to it), so a
    float32 and a float64 call with the same generator state see the same noise. :math:`u` is
    clamped to float64's smallest normal number, so :math:`g` is finite (below about 36.7 and
    above :math:`-\log(-\log 2^{-1022}) \approx -6.6`).

    >>> g = gumbel_noise(torch.ones(2, 3, dtype=torch.bool), 4, torch.float64, torch.Generator().manual_seed(0))
    >>> g.shape, bool(torch.isfinite(g).all())
    (torch.Size([2, 4, 3]), True)
    """
    b, length = mask.shape
    device = generator.device if generator is not None else mask.device
    u = torch.rand(length, b, samples, generator=generator, dtype=torch.float64, device=device)
    u = u.clamp_min(torch.finfo(torch.float64).tiny)
    return (-torch.log(-torch.log(u))).permute(1, 2, 0).to(device=mask.device, dtype=dtype)


def perturbed_scores(scores: Tensor, mask: Tensor, noise: Tensor, temperature: float,
                     smoothing: float | None) -> Tensor:
    r""":math:`x = \log(\mathrm{softmax}((s + g)/T) + \varepsilon)` per sample, ``[B, S, L]``.

    ``noise`` is ``[B, S, L]`` (:func:`gumbel_noise`); the softmax runs over each list's real
    items (padding at ``-inf``), padded entries of the result are 0. ``smoothing=None`` gives
    :math:`(s + g)/T`.

    >>> s = torch.tensor([[1.0, 0.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> x = perturbed_scores(s, m, torch.zeros(1, 1, 2), 1.0, 1e-20)
    >>> [round(v, 4) for v in x[0, 0].tolist()]  # log softmax([1, 0])
    [-0.3133, -1.3133]
    """
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    m = mask[:, None, :]
    logits = torch.where(m, (masked_scores(scores, mask)[:, None, :] + noise) / temperature, zero)
    if smoothing is None:
        return logits
    low = torch.full((), float("-inf"), dtype=scores.dtype, device=scores.device)
    has_real = m.any(dim=-1, keepdim=True)
    p = torch.softmax(torch.where(m, logits, torch.where(has_real, low, zero)), dim=-1)
    return torch.where(m, torch.log(p + smoothing), zero)


def on_samples(loss: Callable[..., Tensor], scores: Tensor, labels: Tensor, mask: Tensor, noise: Tensor, *,
               temperature: float, smoothing: float | None, **hyper) -> Tensor:
    """``loss`` on every perturbed copy of the lists, ``[B S, L]`` at once (the mean over the
    contributing copies is the mean over contributing lists of their mean over samples: every
    copy of a list contributes exactly when the list does)."""
    b, s, length = noise.shape
    x = perturbed_scores(scores, mask, noise, temperature, smoothing).reshape(b * s, length)
    y = labels[:, None, :].expand(b, s, length).reshape(b * s, length)
    m = mask[:, None, :].expand(b, s, length).reshape(b * s, length)
    return loss(x, y, m, **hyper)


def _sampled(loss: Callable[..., Tensor], scores: Tensor, labels: Tensor, mask: Tensor, *, sample_size: int,
             gumbel_temperature: float, smoothing: float | None, generator: torch.Generator | None, **hyper) -> Tensor:
    """Validate, draw the noise, and evaluate ``loss`` on every perturbed copy (:func:`on_samples`)."""
    labels = check_inputs(scores, labels, mask)
    check_positive(gumbel_temperature, "gumbel_temperature")
    if smoothing is not None:
        check_positive(smoothing, "smoothing")
    noise = gumbel_noise(mask, check_count(sample_size, "sample_size", minimum=1), scores.dtype, generator)
    return on_samples(loss, scores, labels, mask, noise, temperature=gumbel_temperature, smoothing=smoothing, **hyper)


def gumbel_approxndcg(scores: Tensor, labels: Tensor, mask: Tensor, *, alpha: float = 10.0, sample_size: int = 8,
                      gumbel_temperature: float = 1.0, smoothing: float | None = 1e-20,
                      generator: torch.Generator | None = None) -> Tensor:
    r"""Gumbel ApproxNDCG: the mean over ``sample_size`` Gumbel draws of ApproxNDCG on :math:`x^{(t)}`.

    .. math::
        \ell = \frac{1}{S} \sum_{t=1}^{S} \mathrm{ApproxNDCG}_\alpha\bigl(x^{(t)}, y\bigr),
        \qquad x^{(t)} = \log\bigl(\mathrm{softmax}((s + g^{(t)})/T) + \varepsilon\bigr)

    Defaults are TF-Ranking's ``GumbelApproxNDCGLoss`` (temperature 0.1, i.e. ``alpha = 10``;
    ``sample_size = 8``; ``gumbel_temperature = 1``; :math:`\varepsilon = 10^{-20}`). Batch
    value: mean over lists with >= 2 real items and ``maxDCG > 0``.

    >>> s = torch.tensor([[2.0, 1.0, 0.0]]); y = torch.tensor([[2.0, 1.0, 0.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> v = gumbel_approxndcg(s, y, m, generator=torch.Generator().manual_seed(0))
    >>> bool(-1.0 <= v <= approxndcg(-s, y, m))  # between a perfect ranking and the reversed one
    True
    """
    return _sampled(approxndcg, scores, labels, mask, sample_size=sample_size, gumbel_temperature=gumbel_temperature,
                    smoothing=smoothing, generator=generator, alpha=alpha)


def gumbel_neuralsort_ce(scores: Tensor, labels: Tensor, mask: Tensor, *, tau: float = 1.0, sample_size: int = 8,
                         gumbel_temperature: float = 1.0, smoothing: float | None = 1e-20,
                         generator: torch.Generator | None = None) -> Tensor:
    r"""Gumbel NeuralSort cross entropy: the mean over ``sample_size`` draws of the NeuralSort
    cross entropy (:func:`~bench.losses.neuralsort_ce.neuralsort_ce`, temperature ``tau``) on
    :math:`x^{(t)}`.

    .. math::
        \ell = \frac{1}{S} \sum_{t=1}^{S} -\frac{1}{n} \sum_{i \le n} \sum_j T_{ij}
               \log \hat P\bigl(x^{(t)}, \tau\bigr)_{ij}

    with :math:`T` the tie-aware true sort matrix. Defaults: TF-Ranking's (NeuralSort
    temperature 1, 8 samples, ``gumbel_temperature = 1``, :math:`\varepsilon = 10^{-20}`).
    Batch value: mean over lists with >= 2 real items.

    >>> s = torch.tensor([[20.0, 10.0, 0.0]]); y = torch.tensor([[2.0, 1.0, 0.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> v = gumbel_neuralsort_ce(s, y, m, generator=torch.Generator().manual_seed(0))
    >>> bool(v < gumbel_neuralsort_ce(-s, y, m, generator=torch.Generator().manual_seed(0)))
    True
    """
    return _sampled(neuralsort_ce, scores, labels, mask, sample_size=sample_size, gumbel_temperature=gumbel_temperature,
                    smoothing=smoothing, generator=generator, tau=tau)
