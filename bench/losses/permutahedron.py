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

Derivatives (the paper's Section 5). The partition into blocks is locally constant, so within a
block, for :math:`j, k \in B`,

.. math::

    \frac{\partial v_B}{\partial s_k} = \frac{1}{|B|}, \quad \frac{\partial v_B}{\partial w_k} = -\frac{1}{|B|}
    \ \ (\text{L2}); \qquad
    \frac{\partial v_B}{\partial s_k} = p_k = \mathrm{softmax}(s_B)_k, \quad
    \frac{\partial v_B}{\partial w_k} = -q_k = -\mathrm{softmax}(w_B)_k \ \ (\text{KL}).

For a cotangent :math:`g` (on the output, ``g_j`` the entry of sorted position ``j``) the
vector-Jacobian products are therefore per-block means or weighted sums, :math:`O(n)`:

* soft rank, L2: :math:`\bar\theta_{\sigma_k} = -\tfrac1\varepsilon (g_k - \mathrm{mean}_B\, g)`;
* soft rank, KL: with :math:`r_j = e^{s_j - v_B} = p_j W_B`, :math:`W_B = \sum_{j \in B} \rho_j`,
  :math:`\bar\theta_{\sigma_k} = -\tfrac1\varepsilon\, p_k W_B \,(g_k - \sum_{j \in B} p_j g_j)`;
* soft sort, L2: :math:`\bar\theta_{\sigma_k} = \mathrm{mean}_B\, g`;
* soft sort, KL: :math:`\bar\theta_{\sigma_k} = q_k \sum_{j \in B} g_j`.

The softmax weights are computed shifted (:math:`p_k = e^{s_k - \mathrm{LSE}(s_B)} \le 1`), so
the KL gradient stays finite where the unshifted form overflows (at :math:`\theta = (1, 0)`,
:math:`\varepsilon = 0.01`, float32, torchsort 0.1.10's KL soft-rank gradient is not finite: NaN
for its ascending ranks of :math:`\theta`, inf for those of :math:`-\theta`; here it is the exact
0 of two singleton blocks).

How it is computed here: one numba kernel (:func:`_forward`) does the whole forward of every
list of the batch (the loop over lists is compiled, not Python), on the CPU in float64
whatever the tensors' dtype: gather the list's real items, sort them, run the
pool-adjacent-violators algorithm (:func:`_pav`, :math:`O(n)`), and write the projection with
what the backward needs (the sort order, the block boundaries, and for KL the weights
:math:`p` or :math:`q` and :math:`W_B`). A second kernel (:func:`_backward`) computes the
vector-Jacobian products above. A :class:`torch.autograd.Function` joins them; its backward is
itself not differentiable (no second derivatives). On CUDA that is one device-to-host copy of
the ``[B, L]`` inputs and one host-to-device copy of the result, each way.

* The sort is a stable LSD radix sort on the bits of the float64 values that differ within the
  list (at most 35 for float32 data), with the column packed below them into one 64-bit key;
  short lists (and float64 data whose keys do not leave room for the position) use a
  comparison sort. Ties keep their input order (soft rank: the order of tied scores does not
  matter, tied entries always pool into one block; soft sort: the first one sorts first, as
  ``torch.argsort(..., stable=True)``).
* Adjacent blocks with equal values are merged (the solution is the same either way; the
  Jacobian at such a tie is the merged one, as in the authors' code).
* Masking: each list uses its own ``n = mask.sum(-1)`` (:math:`\rho` is ``n..1`` over its real
  items); padded entries take no part in the sort or any block, come back as 0 and get a
  gradient of exactly 0, so a list's value does not depend on the padding or on the batch.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from bench.jit import njit
from bench.jobserver import await_helpers
from bench.losses._common import check_positive

Regularization = Literal["l2", "kl"]
REGULARIZATIONS = ("l2", "kl")

# Sorting a list of n float32 scores (35 key bits), one core of the 2-core reference machine,
# microseconds: n = 100: comparison 3.3, radix 4.0; 300: 6.2, 7.2; 1000: 17.9, 14.4 (8-bit
# digits); 3000: 56, 35 (12-bit digits); 10000: 550, 98.
_RADIX_MIN = 512  # shorter lists are sorted by comparison
_RADIX_WIDE = 2048  # from here on radix digits of up to 12 bits (4096 counters fit in L1), else 8
_U1 = np.uint64(1)
_SIGN = np.uint64(1 << 63)


_L2, _KL, _KL_LINEAR = 0, 1, 2  # _pav's modes


@njit
def _pool(m1: float, s1: float, m2: float, s2: float) -> tuple[float, float]:
    """``(m, s)`` with ``m + log s = LSE(m1 + log s1, m2 + log s2)``, ``m = max(m1, m2)``: one exp."""
    if m1 >= m2:
        return m1, s1 + s2 * np.exp(m2 - m1)
    return m2, s1 * np.exp(m1 - m2) + s2


@njit
def _pav(a: np.ndarray, b: np.ndarray, n: int, mode: int, start: np.ndarray, max_a: np.ndarray, sum_a: np.ndarray,
         max_b: np.ndarray, sum_b: np.ndarray, value: np.ndarray) -> int:
    """Pool adjacent violators on ``a[:n]`` (and ``b[:n]`` for KL); the number of blocks.

    Block ``k`` is positions ``start[k] .. start[k + 1] - 1`` with value ``value[k]``. A stack
    of blocks, merged while the previous block's value is not above the new one's: O(n).

    * ``_L2`` fits ``a``: ``sum_a[k]`` is the block's sum of ``a``, ``sum_b[k]`` its size,
      the value their ratio (the mean).
    * ``_KL``: value ``LSE(a_B) - LSE(b_B)``, each log-sum-exp kept as a shift and a sum,
      ``LSE(a_B) = max_a[k] + log(sum_a[k])`` with ``max_a[k] = max(a_B)`` (so every term
      ``exp(a_j - max_a[k]) <= 1``), the same for ``b``: a merge costs an exp per side and a log.
    * ``_KL_LINEAR``: ``b`` holds the weights themselves (``e^b``, positive):
      ``sum_b[k] = sum(b_B)`` and the value is ``LSE(a_B) - log(sum_b[k])``.
    """
    top = -1
    for i in range(n):
        top += 1
        start[top] = i
        if mode == _L2:
            sum_a[top] = a[i]
            sum_b[top] = 1.0
            value[top] = a[i]
        else:
            max_a[top] = a[i]
            sum_a[top] = 1.0
            if mode == _KL:
                max_b[top] = b[i]
                sum_b[top] = 1.0
                value[top] = a[i] - b[i]
            else:
                sum_b[top] = b[i]
                value[top] = a[i] - np.log(b[i])
        while top > 0 and value[top - 1] <= value[top]:
            if mode == _L2:
                sum_a[top - 1] += sum_a[top]
                sum_b[top - 1] += sum_b[top]
                value[top - 1] = sum_a[top - 1] / sum_b[top - 1]
            else:
                max_a[top - 1], sum_a[top - 1] = _pool(max_a[top - 1], sum_a[top - 1], max_a[top], sum_a[top])
                if mode == _KL:
                    max_b[top - 1], sum_b[top - 1] = _pool(max_b[top - 1], sum_b[top - 1], max_b[top], sum_b[top])
                    value[top - 1] = max_a[top - 1] - max_b[top - 1] + np.log(sum_a[top - 1] / sum_b[top - 1])
                else:
                    sum_b[top - 1] += sum_b[top]
                    value[top - 1] = max_a[top - 1] + np.log(sum_a[top - 1] / sum_b[top - 1])
            top -= 1
    start[top + 1] = n
    return top + 1


@njit
def _radix(keys: np.ndarray, spare: np.ndarray, n: int, shift: int, span: int, count: np.ndarray) -> np.ndarray:
    """Stable LSD radix sort of ``keys[:n]`` on bits ``shift .. shift + span - 1``; the sorted buffer."""
    digit = 12 if n >= _RADIX_WIDE else 8
    passes = (span + digit - 1) // digit
    width = (span + passes - 1) // passes
    src, dst = keys, spare
    for ps in range(passes):
        sh = np.uint64(shift + ps * width)
        bits = min(width, span - ps * width)
        digit_mask = (_U1 << np.uint64(bits)) - _U1
        buckets = 1 << bits
        count[: buckets + 1] = 0
        for i in range(n):
            count[np.int64((src[i] >> sh) & digit_mask) + 1] += 1
        for c in range(buckets):
            count[c + 1] += count[c]
        for i in range(n):
            d = np.int64((src[i] >> sh) & digit_mask)
            dst[count[d]] = src[i]
            count[d] += 1
        src, dst = dst, src
    return src


@njit
def _sort_columns(vals: np.ndarray, cols: np.ndarray, n: int, width: int, descending: bool, keys: np.ndarray,
                  spare: np.ndarray, count: np.ndarray, perm: np.ndarray) -> None:
    """``perm[:n]``: the columns ``cols[:n]`` of ``vals[:n]`` in ascending (or descending) order of value.

    Ties keep their order in ``cols`` (which ascends). The float64 bits map to unsigned keys in
    the same order (negative: all bits flipped; otherwise the sign bit set; ``-0.0`` was made
    ``+0.0`` by the caller). Only the bits that differ within the list matter: the trailing bits
    that are 0 in every value (29 of them for float32 data) are dropped before the map, and the
    leading and trailing bits that are then constant after it. What is left is packed above the
    column into one 64-bit key, which makes any sort of the keys stable: a radix sort for long
    lists, a comparison sort for short ones. Keys too wide for that (float64 data spread over
    many binades) fall back to a stable merge sort.
    """
    bits = vals.view(np.uint64)
    raw = np.uint64(0)
    for p in range(n):
        raw |= bits[p]
    raw &= ~_SIGN
    low = 0
    while low < 63 and not (raw >> np.uint64(low)) & _U1:
        low += 1
    ulow = np.uint64(low)
    all_or = np.uint64(0)
    all_and = ~np.uint64(0)
    for p in range(n):
        k = bits[p]
        k = (~k if k & _SIGN else k | _SIGN) >> ulow
        if descending:
            k = ~k
        keys[p] = k
        all_or |= k
        all_and &= k
    varying = all_or ^ all_and
    if varying == 0:  # all equal (or n <= 1)
        for j in range(n):  # a loop, not a slice copy: numba takes ~3 s more to compile that
            perm[j] = cols[j]
        return
    lo = 0
    while not (varying >> np.uint64(lo)) & _U1:
        lo += 1
    hi = 63
    while not (varying >> np.uint64(hi)) & _U1:
        hi -= 1
    span = hi - lo + 1
    pbits = 1
    while (1 << pbits) < width:
        pbits += 1
    if span + pbits > 64:
        order = np.argsort(keys[:n], kind="mergesort")
        for j in range(n):
            perm[j] = cols[order[j]]
        return
    pmask = (_U1 << np.uint64(pbits)) - _U1
    smask = (_U1 << np.uint64(span)) - _U1
    for p in range(n):
        keys[p] = (((keys[p] >> np.uint64(lo)) & smask) << np.uint64(pbits)) | np.uint64(cols[p])
    if n < _RADIX_MIN:
        keys[:n].sort()
        done = keys
    else:
        done = _radix(keys, spare, n, pbits, span, count)
    for j in range(n):
        perm[j] = np.int64(done[j] & pmask)


@njit
def _forward(theta: np.ndarray, mask: np.ndarray, epsilon: float, rank: bool, kl: bool):  # noqa: ANN202
    """Soft rank (``rank``) or soft sort of each row of ``theta [N, L]`` over its ``mask``.

    Returns ``(out, order, starts, nblocks, weight, block_weight)``: ``out`` like ``theta``
    (soft rank: at the input positions; soft sort: sorted position ``j`` at column ``j``),
    ``order[r, j]`` the column of the row's ``j``-th sorted real item, block ``k`` of row ``r``
    the sorted positions ``starts[r, k] .. starts[r, k + 1] - 1`` (``nblocks[r]`` blocks), and
    for KL the softmax weight of each sorted position in its block (``p`` for the rank, ``q``
    for the sort) and, for the rank, :math:`W_B` per block.
    """
    rows, width = theta.shape
    out = np.zeros_like(theta)
    order = np.empty((rows, width), dtype=np.int64)
    starts = np.empty((rows, width + 1), dtype=np.int64)
    nblocks = np.empty(rows, dtype=np.int64)
    weight = np.empty((rows, width) if kl else (0, 0), dtype=np.float64)
    block_weight = np.empty((rows, width) if kl and rank else (0, 0), dtype=np.float64)
    vals = np.empty(width, dtype=np.float64)
    src = np.empty(width, dtype=np.int64)
    keys = np.empty(width, dtype=np.uint64)
    spare = np.empty(width, dtype=np.uint64)
    count = np.empty((1 << 12) + 1, dtype=np.int64)
    perm = np.empty(width, dtype=np.int64)
    y = np.empty(width, dtype=np.float64)
    a = np.empty(width, dtype=np.float64)
    b = np.empty(width, dtype=np.float64)
    start = np.empty(width + 1, dtype=np.int64)
    max_a = np.empty(width, dtype=np.float64)
    sum_a = np.empty(width, dtype=np.float64)
    max_b = np.empty(width, dtype=np.float64)
    sum_b = np.empty(width, dtype=np.float64)
    value = np.empty(width, dtype=np.float64)
    mode = (_KL_LINEAR if rank else _KL) if kl else _L2
    for r in range(rows):
        n = 0
        for i in range(width):
            if mask[r, i]:
                vals[n] = theta[r, i] + 0.0  # float64; -0.0 + 0.0 = +0.0, so both zeros tie
                src[n] = i
                n += 1
        # soft rank: theta ascending is s = -theta / eps descending; soft sort: w = theta descending
        _sort_columns(vals, src, n, width, not rank, keys, spare, count, perm)
        for j in range(n):
            col = perm[j]
            order[r, j] = col
            x = theta[r, col] + 0.0
            rho = float(n - j)
            if rank:
                s = -x / epsilon
                y[j] = s
                a[j] = s if kl else s - rho
                b[j] = rho  # KL: the weights e^{log rho} themselves (_KL_LINEAR)
            else:
                z = rho / epsilon
                y[j] = z
                a[j] = z if kl else z - x
                b[j] = x
        nb = _pav(a, b, n, mode, start, max_a, sum_a, max_b, sum_b, value)
        for k in range(nb):
            v = value[k]
            if kl and rank:
                block_weight[r, k] = sum_b[k]  # W_B = sum of rho over the block
                scale = sum_b[k] / sum_a[k]
            for j in range(start[k], start[k + 1]):
                if rank and kl:  # r_j = e^{s_j - v_B} = p_j W_B, p_j = e^{s_j - max} / sum
                    e = np.exp(y[j] - max_a[k])
                    weight[r, j] = e / sum_a[k]
                    out[r, order[r, j]] = e * scale
                elif rank:
                    out[r, order[r, j]] = y[j] - v
                else:
                    out[r, j] = y[j] - v
                    if kl:
                        weight[r, j] = np.exp(b[j] - max_b[k]) / sum_b[k]
            starts[r, k] = start[k]
        starts[r, nb] = n
        nblocks[r] = nb
    return out, order, starts, nblocks, weight, block_weight


@njit
def _backward(grad: np.ndarray, order: np.ndarray, starts: np.ndarray, nblocks: np.ndarray, weight: np.ndarray,
              block_weight: np.ndarray, epsilon: float, rank: bool, kl: bool) -> np.ndarray:
    """The vector-Jacobian product of :func:`_forward`'s output with ``grad`` (the module's formulas)."""
    rows, width = grad.shape
    out = np.zeros_like(grad)
    for r in range(rows):
        for k in range(nblocks[r]):
            lo, hi = starts[r, k], starts[r, k + 1]
            total = 0.0
            for j in range(lo, hi):
                if rank:
                    g = grad[r, order[r, j]] + 0.0
                    total += weight[r, j] * g if kl else g
                else:
                    total += grad[r, j]
            if not kl:
                total /= hi - lo
            for j in range(lo, hi):
                if rank and kl:
                    out[r, order[r, j]] = -weight[r, j] * block_weight[r, k] * (grad[r, order[r, j]] - total) / epsilon
                elif rank:
                    out[r, order[r, j]] = (total - grad[r, order[r, j]]) / epsilon
                elif kl:
                    out[r, order[r, j]] = weight[r, j] * total
                else:
                    out[r, order[r, j]] = total
    return out


@njit
def _pav_blocks(first: np.ndarray, second: np.ndarray, lengths: np.ndarray, kl: bool) -> np.ndarray:
    """Block id (the block's first position) of each position of :func:`_pav` on each row.

    Rows ``r`` use their first ``lengths[r]`` positions; position ``i >= lengths[r]`` gets its
    own id ``i``.
    """
    rows, width = first.shape
    out = np.empty((rows, width), dtype=np.int64)
    start = np.empty(width + 1, dtype=np.int64)
    work = np.empty((5, width), dtype=np.float64)
    for r in range(rows):
        n = lengths[r]
        nb = _pav(first[r], second[r], n, _KL if kl else _L2, start, work[0], work[1], work[2], work[3], work[4])
        for k in range(nb):
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
    a = first.detach().to("cpu", torch.float64).contiguous().numpy()
    b = a if second is None else second.detach().to("cpu", torch.float64).contiguous().numpy()
    _await_compile()
    blocks = _pav_blocks(a, b, lengths.to("cpu", torch.int64).numpy(), second is not None)
    return torch.from_numpy(blocks).to(first.device)


def _host(x: Tensor, dtype: torch.dtype) -> np.ndarray:
    """``x`` as a C-contiguous host array of ``dtype`` (no copy when it already is one)."""
    if x.device.type != "cpu" or x.dtype != dtype:
        x = x.to("cpu", dtype)
    return (x if x.is_contiguous() else x.contiguous()).numpy()


def _back(out: np.ndarray, like: Tensor | tuple[torch.device, torch.dtype]) -> Tensor:
    """``out`` as a tensor on ``like``'s device and of its dtype."""
    device, dtype = (like.device, like.dtype) if isinstance(like, Tensor) else like
    result = torch.from_numpy(out)
    return result if device.type == "cpu" and result.dtype == dtype else result.to(device, dtype)


_compiled = False  # this process has the kernels (warm_up ran, or a projection did)


def _await_compile() -> None:
    """In a job forked while the job server's helper compiled the kernels, wait for the helper
    (then numba loads its cache) instead of compiling them a second time beside it."""
    global _compiled
    if not _compiled:
        await_helpers()
        _compiled = True


class _Projection(torch.autograd.Function):
    """:func:`_forward` and :func:`_backward` as one autograd node over ``[N, L]`` rows."""

    @staticmethod
    def forward(ctx, theta: Tensor, mask: Tensor, epsilon: float, rank: bool, kl: bool) -> Tensor:  # type: ignore[override]
        _await_compile()
        work = theta.dtype if theta.dtype in (torch.float32, torch.float64) else torch.float32
        out, *ctx.state = _forward(_host(theta.detach(), work), _host(mask, torch.bool), epsilon, rank, kl)
        ctx.config = (epsilon, rank, kl, work, theta.device, theta.dtype)
        return _back(out, theta)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None, None]:  # type: ignore[override]
        epsilon, rank, kl, work, device, dtype = ctx.config
        out = _backward(_host(grad, work), *ctx.state, epsilon, rank, kl)
        return _back(out, (device, dtype)), None, None, None, None


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


def _project(scores: Tensor, mask: Tensor, epsilon: float, regularization: str, rank: bool) -> Tensor:
    _check(scores, mask, epsilon, regularization)
    if scores.dim() == 2:  # the common case: no reshapes (a few microseconds each)
        return _Projection.apply(scores, mask, float(epsilon), rank, regularization == "kl")
    out = _Projection.apply(_rows(scores), _rows(mask), float(epsilon), rank, regularization == "kl")
    return out.reshape(scores.shape)


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
    return _project(scores, mask, epsilon, regularization, rank=True)


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
    return _project(scores, mask, epsilon, regularization, rank=False)


def warm_up() -> None:
    """Compile the kernels for both working dtypes now, or load them from numba's cache.

    The first soft rank or sort of a process otherwise pays it, 0.9-1.9 s even from a warm
    cache (measured on the 2-core machine), and every job forked from the job server would pay
    it again: the server (:mod:`bench.jobserver`, ``WARM_UP``) calls this once, before it forks.
    NumPy arrays only, no torch operation: torch picks its CPU kernels at its first operation,
    and a server that computed would hand its choice to every child, pinned ones included
    (:mod:`bench.training.determinism`).
    """
    global _compiled
    mask = np.array([[True, True, False]])
    for dtype in (np.float32, np.float64):
        theta = np.array([[1.0, 0.0, 2.0]], dtype=dtype)
        out, *state = _forward(theta, mask, 1.0, True, False)
        _backward(np.ones_like(out), *state, 1.0, True, False)
    _compiled = True
