r"""Shared helpers for every loss: the validators, gains, discounts, ideal DCG, masked reductions.

Every registered loss validates its inputs with :func:`check_inputs` (one validator, so every
loss rejects a bad call with the same exception and message; ``tests/losses/test_contract.py``
checks this for every registered loss) and takes its hyperparameters keyword-only. Its
cut-offs (``k``, ``m``) go through :func:`check_k`, its counts (iterations, tree depth)
through :func:`check_count` and its positive reals (temperatures, ``sigma``, ...) through
:func:`check_positive`, so a bad hyperparameter is refused with the same ``ValueError`` by
every loss (``tests/losses/test_hyperparameters.py``).

Conventions (``docs/losses.md``, "Common contract"): gain :math:`g(y) = 2^y - 1`, discount
:math:`d(j) = 1/\log_2(1 + j)` for 1-based rank :math:`j`, and the batch value is the
**mean of per-list losses over contributing lists** (not a ratio of batch sums). A list
contributes when it has at least 2 real items (and, for NDCG-type losses, ``maxDCG > 0``);
if no list contributes the loss is ``0 * scores.sum()`` so ``backward()`` still works.
"""

from __future__ import annotations

import math
import numbers
from typing import Literal, overload

import torch
from torch import Tensor


@overload
def check_k(k: int | None, name: str = ..., *, optional: Literal[False]) -> int: ...
@overload
def check_k(k: int | None, name: str = ..., *, optional: bool = ...) -> int | None: ...
def check_k(k: int | None, name: str = "k", *, optional: bool = True) -> int | None:
    """Return the cut-off ``k`` as an ``int``; ``ValueError`` unless it is an integer >= 1
    (or ``None``, "the whole list", where ``optional``).

    The one rule for every loss's ``@k`` (and ``@m``) hyperparameter: a float (even ``2.0``),
    a bool and anything below 1 are refused, never rounded.

    >>> check_k(3), check_k(None)
    (3, None)
    >>> check_k(2.5)
    Traceback (most recent call last):
    ...
    ValueError: k must be a positive integer or None, got 2.5
    >>> check_k(None, "m", optional=False)
    Traceback (most recent call last):
    ...
    ValueError: m must be a positive integer, got None
    """
    if k is None and optional:
        return None
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"{name} must be a positive integer{' or None' if optional else ''}, got {k!r}")
    return int(k)


def check_count(value: int, name: str, *, minimum: int) -> int:
    """Return a hyperparameter that counts something (iterations, tree levels) as an ``int``;
    ``ValueError`` unless it is an integer >= ``minimum``.

    The rule of :func:`check_k` for counts: a float (even ``30.0``), a bool and a string are
    refused, never rounded.

    >>> check_count(30, "max_iter", minimum=0)
    30
    >>> check_count(2.5, "depth", minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: depth must be an integer >= 1, got 2.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive(value: float, name: str) -> None:
    """``ValueError`` unless ``value > 0`` (NaN is refused too).

    >>> check_positive(0.0, "tau")
    Traceback (most recent call last):
    ...
    ValueError: tau must be > 0, got 0.0
    """
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def check_inputs(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """Validate the common loss signature; return ``labels`` in the scores' dtype and device,
    with padded entries replaced by 0 (garbage padding labels can never leak).

    Shapes must agree and be ``[B, L]``, ``mask`` must be bool and scores floating point;
    each violation is a ``ValueError`` (no host synchronisation: only metadata is inspected).

    >>> check_inputs(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3, dtype=torch.bool))
    Traceback (most recent call last):
    ...
    ValueError: scores, labels and mask must have the same [B, L] shape, got (2, 3), (2, 4), (2, 3)
    >>> check_inputs(torch.zeros(1, 2), torch.tensor([[1, 7]]), torch.tensor([[True, False]])).tolist()
    [[1.0, 0.0]]
    """
    if scores.dim() != 2 or scores.shape != labels.shape or scores.shape != mask.shape:
        raise ValueError(
            "scores, labels and mask must have the same [B, L] shape, got "
            f"{tuple(scores.shape)}, {tuple(labels.shape)}, {tuple(mask.shape)}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {mask.dtype}")
    if not scores.is_floating_point():
        raise ValueError(f"scores must be floating point, got {scores.dtype}")
    labels = labels.to(dtype=scores.dtype, device=scores.device)
    return torch.where(mask, labels, torch.zeros((), dtype=labels.dtype, device=labels.device))


def masked_scores(scores: Tensor, mask: Tensor) -> Tensor:
    """``scores`` with padded entries replaced by 0 (gradient there is exactly 0).

    >>> masked_scores(torch.tensor([[1.5, 9.0]]), torch.tensor([[True, False]])).tolist()
    [[1.5, 0.0]]
    """
    return torch.where(mask, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))


def gain(labels: Tensor) -> Tensor:
    """Exponential gain ``2^y - 1``.

    >>> gain(torch.tensor([0.0, 1.0, 3.0])).tolist()
    [0.0, 1.0, 7.0]
    """
    return torch.pow(2.0, labels) - 1.0


def discounts(n: int, *, like: Tensor) -> Tensor:
    """Discounts ``1/log2(1 + j)`` for ranks ``j = 1..n`` with ``like``'s dtype and device.

    >>> [round(v, 4) for v in discounts(3, like=torch.zeros(1)).tolist()]
    [1.0, 0.6309, 0.5]
    """
    ranks = torch.arange(1, n + 1, dtype=like.dtype, device=like.device)
    return 1.0 / torch.log2(1.0 + ranks)


def n_real(mask: Tensor) -> Tensor:
    """Number of real items per list, ``[B]`` (long)."""
    return mask.sum(dim=-1)


def max_dcg(labels: Tensor, mask: Tensor, k: int | None = None) -> Tensor:
    r"""Ideal DCG@k per list, ``[B]``: the DCG@k of the list's *real* items sorted by label.

    ``k=None`` means the whole list. Lists shorter than ``k`` sum over what exists.

    Padding is neutral: padded items are excluded from the ideal ranking (they enter the
    top-k selection at :math:`-\infty` and any of them that is selected, in a list shorter
    than ``k``, adds 0), instead of competing with gain 0. Labels may be any real values
    (docs/losses.md), and a negative label has a gain :math:`2^y - 1 < 0`: a padded item with gain
    0 would otherwise be ranked above it and change the value with the amount of padding.
    Neutral padding rather than rejecting negative labels: it is exactly docs/losses.md's
    definition (the labels of the list sorted descending), every loss stays defined for
    real-valued labels, and a rejection would need a data-dependent check, i.e. a host
    synchronisation on every loss call (:func:`check_inputs` inspects metadata only).
    With negative gains present this is still the maximum of DCG@k over the list's
    orderings (rearrangement inequality: gains descending against decreasing discounts).

    >>> y = torch.tensor([[3.0, 0.0, 1.0, 9.0]]); m = torch.tensor([[True, True, True, False]])
    >>> round(max_dcg(y, m).item(), 4)  # 7/1 + 1/log2(3)
    7.6309
    >>> y = torch.tensor([[1.0, -1.0, 5.0]]); m = torch.tensor([[True, True, False]])
    >>> round(max_dcg(y, m).item(), 4)  # 1/1 - 0.5/log2(3): the padded 0-gain slot takes no place
    0.6845
    """
    ninf = torch.full((), float("-inf"), dtype=labels.dtype, device=labels.device)
    g = torch.where(mask, gain(labels), ninf)
    n = labels.shape[-1] if k is None else min(k, labels.shape[-1])
    top = torch.topk(g, n, dim=-1, sorted=True).values
    top = torch.where(torch.isneginf(top), torch.zeros((), dtype=top.dtype, device=top.device), top)
    return (top * discounts(n, like=top)).sum(dim=-1)


def masked_mean_over_lists(per_list: Tensor, contributes: Tensor, scores: Tensor) -> Tensor:
    """Mean of ``per_list[contributes]``; ``0 * scores.sum()`` when nothing contributes.

    Non-contributing entries are excluded with ``torch.where`` (not multiplied by 0), so a
    NaN or inf computed for a degenerate list can never leak into the value or gradient.
    The ``0 * scores`` term that keeps the graph connected goes through ``nan_to_num``, so
    a non-finite score in the padding cannot leak either.

    >>> s = torch.tensor([[1.0, float("nan")]], requires_grad=True)
    >>> v = masked_mean_over_lists(torch.tensor([2.0]), torch.tensor([True]), s); v.backward()
    >>> v.item(), s.grad.tolist()
    (2.0, [[0.0, 0.0]])
    """
    zero = torch.zeros((), dtype=per_list.dtype, device=per_list.device)
    total = torch.where(contributes, per_list, zero).sum()
    count = contributes.sum()
    graph_link = 0.0 * torch.nan_to_num(scores, nan=0.0, posinf=0.0, neginf=0.0).sum()
    return torch.where(count > 0, total / count.clamp(min=1), zero) + graph_link


def _floored_exp(d: Tensor) -> Tensor:
    """``exp(max(d, f))`` in place on ``d``, with :math:`f` = :func:`exp_floor` of its dtype.

    Torch's CPU ``exp`` takes a slow path for arguments whose result is subnormal or zero
    (``-inf`` included): measured on the 2-core AMD EPYC reference host, 16 ms for 0.92 M
    float32 arguments half of which are below the floor, 1.7 ms with the clamp. The logits of
    a sort relaxation put most of an ``L x L`` matrix there.
    """
    return d.clamp_min_(exp_floor(d.dtype)).exp_()


def exp_floor(dtype: torch.dtype) -> int:
    """The least integer whose exponential is a normal number of ``dtype`` (float32: -87, as
    e^-87 = 1.6e-38 lies above the smallest normal number 1.2e-38; float64: -708)."""
    return math.ceil(math.log(torch.finfo(dtype).tiny))


class _LogSumExp(torch.autograd.Function):
    """:func:`logsumexp` on CPU: torch's formula, step for step, with :func:`_floored_exp`."""

    @staticmethod
    def forward(ctx, z: Tensor, dim: int) -> Tensor:  # type: ignore[override]
        top = z.amax(dim, keepdim=True)
        none = (top == -math.inf).squeeze(dim)  # rows of -inf alone: -inf, as torch (the floor would give e^f)
        top = torch.where(top.abs() == math.inf, torch.zeros((), dtype=z.dtype), top)  # as torch
        out = _floored_exp(z - top).sum(dim).log_().add_(top.squeeze(dim)).masked_fill_(none, -math.inf)
        ctx.dim = dim
        ctx.save_for_backward(z, out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        z, out = ctx.saved_tensors
        return grad.unsqueeze(ctx.dim) * _floored_exp(z - out.unsqueeze(ctx.dim)), None


def logsumexp(z: Tensor, dim: int = -1) -> Tensor:
    r""":math:`\log \sum_j e^{z_j}` over ``dim``: ``torch.logsumexp`` without its slow CPU path.

    Same formula as torch (:math:`m + \log \sum_j e^{z_j - m}`, :math:`m` the maximum, 0 when
    it is infinite) and same gradient (:math:`e^{z_j - \mathrm{lse}}` times the incoming one),
    except that every :math:`e^{x}` with :math:`x` below the floor :math:`f` (-87 in float32,
    -708 in float64; :func:`_floored_exp`) is taken as :math:`e^{f}` (1.6e-38 in float32). The
    value is bit-identical to torch's: the maximum contributes 1 to the sum, and the floored
    terms together stay below half its last bit. A gradient entry differs only where torch's
    is below :math:`e^{f}` times the incoming gradient (0, subnormal, or from a ``-inf``
    logit): it is that bound here, as negligible downstream (``tests/losses/test_logsumexp.py``).
    Other devices call ``torch.logsumexp``.

    >>> z = torch.tensor([[0.0, -100.0, float("-inf")], [1.0, 1.0, -200.0]])
    >>> bool(torch.equal(logsumexp(z), torch.logsumexp(z, -1)))
    True
    """
    if z.device.type != "cpu":
        return torch.logsumexp(z, dim)
    return _LogSumExp.apply(z, dim)
