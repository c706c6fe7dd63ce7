r"""Fast soft sort and soft rank (Blondel, Teboul, Berthet & Djolonga, ICML 2020), masked and batched.

Both operators are projections onto a permutahedron :math:`\mathcal P(w)`, the convex hull
of the permutations of a vector :math:`w`. With :math:`\rho = (n, n - 1, \dots, 1)` and a
regularisation strength :math:`\varepsilon > 0`, for a list of :math:`n` real scores
:math:`\theta`:

.. math::

    r_\varepsilon(\theta) = P(-\theta / \varepsilon,\ \rho) \quad\text{(soft rank, 1 = the highest score)},
    \qquad
    s_\varepsilon(\theta) = P(\rho / \varepsilon,\ \theta) \quad\text{(soft sort, descending)}.

Two regularisations:

* ``"l2"``: :math:`P_Q(z, w) = \arg\min_{\mu \in \mathcal P(w)} \tfrac12 \lVert \mu - z \rVert^2`;
* ``"kl"``: :math:`P_E(z, w) = \log \arg\min_{\mu \in \mathcal P(e^w)} \mathrm{KL}(\mu, e^z)`;
  the soft rank is then :math:`\exp P_E(-\theta/\varepsilon, \log \rho)`, a point of
  :math:`\mathcal P(\rho)` like the L2 one (the reading of the authors' code and of
  ``torchsort``).

Computation (the paper's Proposition 3): sort :math:`z` descending, :math:`s = z_\sigma`, take
:math:`w` sorted descending, and solve the isotonic regression

.. math::

    v = \arg\min_{v_1 \ge \dots \ge v_n} \tfrac12 \lVert v - (s - w) \rVert^2 \ \ (\text{L2}),
    \qquad
    v = \arg\min_{v_1 \ge \dots \ge v_n} \langle e^{s - v}, \mathbf 1 \rangle + \langle e^{w}, v \rangle \ \ (\text{KL});

then :math:`P(z, w)_{\sigma_j} = s_j - v_j`. The solution is constant on blocks :math:`B` of
consecutive positions: :math:`v_B = \mathrm{mean}_{B}(s - w)` (L2) or
:math:`v_B = \mathrm{LSE}(s_B) - \mathrm{LSE}(w_B)` (KL).

How it is computed here:

* The blocks come from the pool-adjacent-violators algorithm (:func:`_pav_blocks`, a numba
  kernel over every list of the batch in one call, :math:`O(n)` per list after the
  :math:`O(n \log n)` sort; the loop over lists is compiled, not Python). It returns only the
  partition: a block id per sorted position. The PAV runs on the CPU in float64 whatever the
  tensors' device and dtype; on CUDA that is one device-to-host copy of the ``[B, L]`` inputs
  and one host-to-device copy of the block ids per call.
* The block values are then computed **in torch** from the partition with segment sums
  (``scatter_add``; the KL block log-sum-exp is shifted by its detached block maximum), on the
  tensors' own device. The partition is locally constant, so autograd through these segment
  sums is the exact derivative of the projection: for L2 the Jacobian of :math:`v` is the block
  averaging, for KL :math:`\partial v_B / \partial s_j = \mathrm{softmax}(s_B)_j` and
  :math:`\partial v_B / \partial w_j = -\mathrm{softmax}(w_B)_j`, each :math:`O(n)` (the
  backward the paper derives). No custom backward, so ``gradcheck`` tests the whole chain.
* Adjacent blocks with equal values are merged (the solution is the same either way; the
  Jacobian at such a tie is the merged one, as in the authors' code).
* Masking: each list uses its own ``n = mask.sum(-1)`` (:math:`\rho` is ``n..1`` over its real
  items); padded entries sort last, take no part in any block, come back as 0 and get a
  gradient of exactly 0, so a list's value does not depend on the padding or on the batch.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from bench.jit import njit
from bench.losses._common import check_positive

Regularization = Literal["l2", "kl"]
REGULARIZATIONS = ("l2", "kl")


@njit
def _pav_blocks(first: np.ndarray, second: np.ndarray, lengths: np.ndarray, kl: bool) -> np.ndarray:
    """Block id (the block's first position) of each position of the decreasing isotonic fit.

    L2 fits ``first`` (``second`` unused): a block's value is the mean of ``first`` over it.
    KL: a block's value is ``LSE(first_B) - LSE(second_B)``. Rows ``r`` use their first
    ``lengths[r]`` positions; position ``i >= lengths[r]`` gets its own id ``i``. A stack of
    blocks, merged while the previous block's value is not above the new one's: O(n) per row.
    """
    rows, width = first.shape
    out = np.empty((rows, width), dtype=np.int64)
    start = np.empty(width + 1, dtype=np.int64)
    acc_a = np.empty(width, dtype=np.float64)  # sum (L2) or LSE (KL) of `first` over the block
    acc_b = np.empty(width, dtype=np.float64)  # count (L2) or LSE (KL) of `second` over the block
    value = np.empty(width, dtype=np.float64)
    for r in range(rows):
        n = lengths[r]
        top = -1
        for i in range(n):
            top += 1
            start[top] = i
            acc_a[top] = first[r, i]
            acc_b[top] = second[r, i] if kl else 1.0
            value[top] = acc_a[top] - acc_b[top] if kl else acc_a[top]
            while top > 0 and value[top - 1] <= value[top]:
                if kl:
                    acc_a[top - 1] = np.logaddexp(acc_a[top - 1], acc_a[top])
                    acc_b[top - 1] = np.logaddexp(acc_b[top - 1], acc_b[top])
                    value[top - 1] = acc_a[top - 1] - acc_b[top - 1]
                else:
                    acc_a[top - 1] += acc_a[top]
                    acc_b[top - 1] += acc_b[top]
                    value[top - 1] = acc_a[top - 1] / acc_b[top - 1]
                top -= 1
        start[top + 1] = n
        for k in range(top + 1):
            for i in range(start[k], start[k + 1]):
                out[r, i] = start[k]
        for i in range(n, width):
            out[r, i] = i
    return out


def isotonic_blocks(first: Tensor, second: Tensor | None, lengths: Tensor) -> Tensor:
    """The PAV partition of each row as block ids ``[N, L]`` (long, on ``first``'s device).

    ``second`` is ``None`` for L2 (fit ``first``) and the subtracted vector for KL.

    >>> isotonic_blocks(torch.tensor([[3.0, 1.0, 2.0, 0.0]]), None, torch.tensor([4])).tolist()
    [[0, 1, 1, 3]]
    """
    a = first.detach().to("cpu", torch.float64).numpy()
    b = a if second is None else second.detach().to("cpu", torch.float64).numpy()
    blocks = _pav_blocks(a, b, lengths.to("cpu", torch.int64).numpy(), second is not None)
    return torch.from_numpy(blocks).to(first.device)


def _segment_sum(values: Tensor, blocks: Tensor) -> Tensor:
    """Each position's block total of ``values`` (``[N, L]``), by one scatter and one gather."""
    return torch.zeros_like(values).scatter_add(1, blocks, values).gather(1, blocks)


def _segment_logsumexp(values: Tensor, blocks: Tensor, mask: Tensor) -> Tensor:
    """Each real position's block log-sum-exp; the shift is the detached block maximum."""
    low = torch.full((), float("-inf"), dtype=values.dtype, device=values.device)
    peak = torch.full_like(values, float("-inf")).scatter_reduce(
        1, blocks, torch.where(mask, values.detach(), low), reduce="amax", include_self=True
    ).gather(1, blocks)
    peak = torch.where(mask, peak, torch.zeros_like(peak))
    scaled = torch.where(mask, torch.exp(values - peak), torch.zeros_like(values))
    return peak + torch.log(torch.where(mask, _segment_sum(scaled, blocks), torch.ones_like(values)))


def _isotonic(s: Tensor, w: Tensor, mask: Tensor, regularization: str) -> Tensor:
    """The decreasing isotonic solution ``v`` for sorted ``s`` and ``w`` (``[N, L]``, real first)."""
    lengths = mask.sum(-1)
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    if regularization == "l2":
        target = torch.where(mask, s - w, zero)
        blocks = isotonic_blocks(target, None, lengths)
        size = _segment_sum(mask.to(s.dtype), blocks).clamp(min=1)
        return torch.where(mask, _segment_sum(target, blocks) / size, zero)
    blocks = isotonic_blocks(torch.where(mask, s, zero), torch.where(mask, w, zero), lengths)
    return torch.where(mask, _segment_logsumexp(s, blocks, mask) - _segment_logsumexp(w, blocks, mask), zero)


def _check(scores: Tensor, mask: Tensor, epsilon: float, regularization: str) -> None:
    if scores.shape != mask.shape or scores.dim() < 1:
        raise ValueError(f"scores {tuple(scores.shape)} and mask {tuple(mask.shape)} must have one shape [..., L]")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    check_positive(epsilon, "epsilon")
    if regularization not in REGULARIZATIONS:
        raise ValueError(f"regularization must be one of {', '.join(REGULARIZATIONS)}, got {regularization!r}")


def _rows(x: Tensor) -> Tensor:
    """``[..., L]`` as ``[N, L]`` (also for ``L = 0``, where ``reshape(-1, 0)`` is ambiguous)."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _descending(values: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(sorted values [N, L] with 0 padding, order, sorted mask)``: real items first, descending."""
    low = torch.full((), float("-inf"), dtype=values.dtype, device=values.device)
    order = torch.argsort(torch.where(mask, values, low), dim=-1, descending=True, stable=True)
    ok = mask.gather(-1, order)
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    return torch.where(ok, values.gather(-1, order), zero), order, ok


def _rho(ok: Tensor, dtype: torch.dtype) -> Tensor:
    """``(n, n - 1, ..., 1)`` on each row's real (leading) positions, 0 on padding."""
    n = ok.sum(-1, keepdim=True)
    pos = torch.arange(ok.shape[-1], device=ok.device)
    return torch.where(ok, (n - pos).to(dtype), torch.zeros((), dtype=dtype, device=ok.device))


def soft_rank(scores: Tensor, mask: Tensor, *, epsilon: float = 1.0, regularization: Regularization = "l2") -> Tensor:
    r"""Soft descending ranks :math:`r_\varepsilon(\theta)` in :math:`[1, n]` (1 = highest score), 0 on padding.

    As :math:`\varepsilon \to 0` the hard ranks; as :math:`\varepsilon \to \infty` every rank
    tends to :math:`(n + 1)/2`. Shape ``[..., L]``.

    >>> theta = torch.tensor([[8.0, 0.0, 5.0, 3.0]]); m = torch.ones(1, 4, dtype=torch.bool)
    >>> soft_rank(theta, m, epsilon=0.1).tolist()  # well separated: exactly the hard ranks
    [[1.0, 4.0, 2.0, 3.0]]
    >>> soft_rank(theta, m, epsilon=4.0).tolist()  # sorted -theta/eps - rho increases: one block, mean -3.5
    [[1.5, 3.5, 2.25, 2.75]]
    """
    _check(scores, mask, epsilon, regularization)
    shape = scores.shape
    theta, m = _rows(scores), _rows(mask)
    s, order, ok = _descending(-theta / epsilon, m)
    rho = _rho(ok, s.dtype)
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    if regularization == "l2":
        ranked = s - _isotonic(s, rho, ok, "l2")
    else:
        log_rho = torch.log(torch.where(ok, rho, torch.ones_like(rho)))
        ranked = torch.exp(s - _isotonic(s, log_rho, ok, "kl"))
    ranked = torch.where(ok, ranked, zero)
    return torch.zeros_like(ranked).scatter(-1, order, ranked).reshape(shape)


def soft_sort(scores: Tensor, mask: Tensor, *, epsilon: float = 1.0, regularization: Regularization = "l2") -> Tensor:
    r"""Soft descending sort :math:`s_\varepsilon(\theta)`: position ``j`` holds the soft ``j``-th largest score.

    Real positions first (``n`` per list), 0 beyond. As :math:`\varepsilon \to 0` the sorted
    scores; as :math:`\varepsilon \to \infty` every entry tends to the mean score (L2).

    >>> theta = torch.tensor([[0.0, 3.0, 1.0, 9.0]]); m = torch.tensor([[True, True, True, False]])
    >>> soft_sort(theta, m, epsilon=0.1).tolist()
    [[3.0, 1.0, 0.0, 0.0]]
    >>> [round(v, 4) for v in soft_sort(theta, m, epsilon=2.0)[0].tolist()]  # rho/eps - (3, 1, 0) pools to -1/3
    [1.8333, 1.3333, 0.8333, 0.0]
    """
    _check(scores, mask, epsilon, regularization)
    shape = scores.shape
    theta, m = _rows(scores), _rows(mask)
    w, _, ok = _descending(theta, m)
    z = _rho(ok, w.dtype) / epsilon
    out = z - _isotonic(z, w, ok, regularization)
    return torch.where(ok, out, torch.zeros((), dtype=out.dtype, device=out.device)).reshape(shape)
