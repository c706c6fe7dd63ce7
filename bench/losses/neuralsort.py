r"""NeuralSort relaxed sort matrix (Grover et al. 2019), masked and padding-invariant.

For a list :math:`s` of :math:`n` real items, :math:`A_{ij} = |s_i - s_j|` and row :math:`i`
(rank :math:`i`, 1-based) of the relaxed descending-sort matrix is

.. math::

    \hat P[i, :] = \mathrm{softmax}\big(((n + 1 - 2i)\, s - A \mathbf 1) / \tau\big).

Conventions fixed here (``docs/losses.md``, "NeuralSort, the shared relaxation"):

* ``n`` is each list's own number of real items (``mask.sum(-1)``), never the padded length.
* Padded columns are excluded from the softmax (logit ``-inf``, so their probability is an
  exact 0) and from the row sums :math:`A\mathbf 1`; padded scores are replaced by 0 before
  any arithmetic, so their values (even inf/NaN) never matter and their gradient is exactly 0.
* Rows :math:`i > n` do not exist for that list and are returned as zero rows.
* Scores are centred by their (detached) masked mean first. :math:`\hat P` is exactly
  invariant to a common shift, so this changes nothing mathematically but keeps the logits
  small for scores of large magnitude.
* :math:`A\mathbf 1` costs :math:`O(n \log n)`: with the real scores sorted ascending and
  prefix sums :math:`S`, :math:`\sum_j |s_i - s_j| = s_i (c^<_i - c^>_i) - S^<_i + S^>_i`
  where :math:`c^<, c^>` count strictly smaller / larger scores and :math:`S^<, S^>` sum them.
  Its custom backward is the gradient of :math:`\sum_j |s_i - s_j|` with
  :math:`\mathrm{sign}(0) = 0` (what autograd gives for ``abs``), so tied scores are treated
  symmetrically.
* Only the first ``k`` rows are built when ``k`` is given: :math:`O(kn)` after the row sums.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from bench.losses._common import check_k, check_positive


def _check(scores: Tensor, mask: Tensor) -> None:
    if scores.shape != mask.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and mask {tuple(mask.shape)} must have one shape")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    if scores.dim() < 1:
        raise ValueError("scores must have at least one dimension (the list axis)")


class _AbsDiffRowSums(torch.autograd.Function):
    """``r_i = sum_{j real} |s_i - s_j|`` for real ``i`` (0 for padding), O(n log n)."""

    @staticmethod
    def forward(ctx, s: Tensor, mask: Tensor) -> Tensor:  # type: ignore[override]
        inf = torch.full((), float("inf"), dtype=s.dtype, device=s.device)
        zero = torch.zeros((), dtype=s.dtype, device=s.device)
        keys, order = torch.sort(torch.where(mask, s, inf), dim=-1)  # padding sorts last
        vals = torch.where(torch.isinf(keys), zero, keys)
        prefix = torch.nn.functional.pad(torch.cumsum(vals, dim=-1), (1, 0))  # [N, L+1]
        query = torch.where(mask, s, zero).contiguous()
        lo = torch.searchsorted(keys, query, right=False)  # number strictly smaller
        hi = torch.searchsorted(keys, query, right=True)  # number smaller or equal
        n = mask.sum(dim=-1, keepdim=True)
        s_lo, s_hi, s_tot = prefix.gather(-1, lo), prefix.gather(-1, hi), prefix.gather(-1, n)
        below = lo.to(s.dtype)
        above = (n - hi).to(s.dtype)
        r = query * (below - above) - s_lo + (s_tot - s_hi)
        ctx.save_for_backward(mask, order, lo, hi, n)
        return torch.where(mask, r, zero)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        mask, order, lo, hi, n = ctx.saved_tensors
        zero = torch.zeros((), dtype=grad.dtype, device=grad.device)
        g = torch.where(mask, grad, zero)
        prefix = torch.nn.functional.pad(torch.cumsum(g.gather(-1, order), dim=-1), (1, 0))
        g_lo, g_hi, g_tot = prefix.gather(-1, lo), prefix.gather(-1, hi), prefix.gather(-1, n)
        # d r_i / d s_j summed against g:  g_j (c<_j - c>_j) + sum_i g_i sign(s_j - s_i)
        out = g * (lo - (n - hi)).to(g.dtype) + (g_lo - (g_tot - g_hi))
        return torch.where(mask, out, zero), None


def abs_diff_row_sums(scores: Tensor, mask: Tensor) -> Tensor:
    r"""Masked row sums of the pairwise absolute differences, :math:`(A_s \mathbf 1)_i`.

    ``r_i = sum_{j real} |s_i - s_j|`` for real ``i`` and 0 for padded ``i``, computed by
    sorting and prefix sums in :math:`O(n \log n)` (no :math:`n \times n` matrix).

    >>> s = torch.tensor([[3.0, 1.0, 2.0, 7.0]]); m = torch.tensor([[True, True, True, False]])
    >>> abs_diff_row_sums(s, m).tolist()
    [[3.0, 3.0, 2.0, 0.0]]
    """
    _check(scores, mask)
    lead, length = scores.shape[:-1], scores.shape[-1]
    s = torch.where(mask, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
    out = _AbsDiffRowSums.apply(s.reshape(-1, length), mask.reshape(-1, length))
    return out.reshape(*lead, length)


def neuralsort_parts(scores: Tensor, mask: Tensor, tau: float, k: int | None = None):
    r"""The factors of the logits, :math:`z_{ij} = c_i\, s_j + b_j`, flattened to ``[N, .]``.

    Returns ``(coef, s, bias, row_valid, col_ok)``: ``coef[N, k] = (n + 1 - 2i)/tau``, the
    centred scores ``s[N, L]`` (0 for padding), ``bias[N, L] = -(A 1)/tau`` (``-inf`` for
    padded columns), ``row_valid[N, k]`` (``i <= n``) and ``col_ok[N, L]``: the mask, except
    that a list with no real item keeps all columns (its rows are all invalid) so that no
    softmax ever sees only ``-inf``.
    """
    _check(scores, mask)
    check_positive(tau, "tau")
    k = check_k(k)
    length = scores.shape[-1]
    kk = length if k is None else min(k, length)
    if kk < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    dtype, device = scores.dtype, scores.device
    s = scores.reshape(-1, length)
    m = mask.reshape(-1, length)
    zero = torch.zeros((), dtype=dtype, device=device)
    n = m.sum(dim=-1)
    s = torch.where(m, s, zero)
    centre = (s.sum(dim=-1) / n.clamp(min=1).to(dtype)).detach()  # shift invariance
    s = torch.where(m, s - centre[:, None], zero)
    r = _AbsDiffRowSums.apply(s, m)
    ranks = torch.arange(1, kk + 1, device=device)
    coef = (n[:, None] + 1 - 2 * ranks[None, :]).to(dtype) / tau  # [N, k]
    col_ok = m | (n == 0)[:, None]
    bias = torch.where(col_ok, -r / tau, torch.full((), float("-inf"), dtype=dtype, device=device))
    row_valid = ranks[None, :] <= n[:, None]
    return coef, s, bias, row_valid, col_ok


class _OuterLogits(torch.autograd.Function):
    """:math:`z = b_j + c_i s_j` with the backward of ``baddbmm(b, c, s)`` (see :func:`outer_logits`)."""

    @staticmethod
    def forward(ctx, coef, s, bias):  # type: ignore[override]
        ctx.save_for_backward(coef, s)
        return torch.addcmul(bias[:, None, :], coef[:, :, None], s[:, None, :])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        coef, s = ctx.saved_tensors
        grad_coef = torch.bmm(grad, s[:, :, None])[:, :, 0] if ctx.needs_input_grad[0] else None
        grad_s = torch.bmm(coef[:, None, :], grad)[:, 0] if ctx.needs_input_grad[1] else None
        return grad_coef, grad_s, grad.sum(1) if ctx.needs_input_grad[2] else None


def outer_logits(coef: Tensor, s: Tensor, bias: Tensor) -> Tensor:
    r"""The NeuralSort logits :math:`z_{ij} = b_j + c_i\, s_j`, ``[N, R, L]`` from ``coef [N, R]``
    and ``s, bias [N, L]``.

    Forward by ``addcmul``, element by element, so a list gets the same bits whatever the
    batch around it (``baddbmm`` with an inner dimension of 1, the BLAS outer product, rounds a
    list differently alone than in a batch on some CPUs: AVX-512 MKL, by up to 4 ulp); it is
    also 1.5-2.8x faster at B = 16, L = 1000. Backward as autograd runs ``baddbmm``'s (the
    gradient of ``s`` by one batched vector-matrix product, of ``bias`` by a column sum),
    which the fused NeuralNDCG kernel (:mod:`bench.losses.sinkhorn`) mirrors bit for bit.

    >>> c = torch.tensor([[1.0, -1.0]]); s = torch.tensor([[0.5, -0.5]]); b = torch.zeros(1, 2)
    >>> outer_logits(c, s, b).tolist()
    [[[0.5, -0.5], [-0.5, 0.5]]]
    """
    return _OuterLogits.apply(coef, s, bias)


def neuralsort_logits(scores: Tensor, mask: Tensor, tau: float, k: int | None = None):
    r"""Logits :math:`((n+1-2i) s - A\mathbf 1)/\tau` of the first ``k`` rows, flattened.

    Returns ``(z, row_valid, col_ok)`` with ``z`` of shape ``[N, k, L]`` (``N`` = product of
    the leading dimensions), padded columns set to ``-inf``; see :func:`neuralsort_parts`.
    Building block for :func:`neuralsort` and the losses; most callers want those.
    """
    coef, s, bias, row_valid, col_ok = neuralsort_parts(scores, mask, tau, k)
    # z_ij = coef_i * s_j + bias_j (padded s_j = 0, bias -inf)
    z = outer_logits(coef, s, bias)
    return z, row_valid, col_ok


def neuralsort(scores: Tensor, mask: Tensor, tau: float = 1.0, k: int | None = None) -> Tensor:
    r"""Relaxed descending-sort matrix, first ``k`` rows: shape ``[..., k, L]``.

    :math:`\hat P[i, :] = \mathrm{softmax}(((n + 1 - 2i) s - A_s \mathbf 1)/\tau)` over the
    real items of each list; padded columns and rows :math:`i > n` are exactly 0.
    ``k=None`` gives all ``L`` rows. Cost :math:`O(n \log n + k n)` per list.

    Example (NeuralNDCG paper, Table 1, :math:`\tau = 1`): sorting the labels.

    >>> s = torch.tensor([[0.5, 0.2, 0.1, 0.01, 0.65, 0.3]], dtype=torch.float64)
    >>> y = torch.tensor([[4.0, 2, 1, 0, 4, 3]], dtype=torch.float64)
    >>> P = neuralsort(s, torch.ones_like(s, dtype=torch.bool), tau=1.0)
    >>> [round(v, 4) for v in (P @ y[0]).tolist()[0]]
    [3.3893, 2.982, 2.4965, 2.0191, 1.6097, 1.2815]
    """
    z, row_valid, _ = neuralsort_logits(scores, mask, tau, k)
    p = torch.softmax(z, dim=-1)
    p = torch.where(row_valid[:, :, None], p, torch.zeros((), dtype=p.dtype, device=p.device))
    return p.reshape(*scores.shape[:-1], z.shape[1], scores.shape[-1])


def neuralsort_log(scores: Tensor, mask: Tensor, tau: float = 1.0, k: int | None = None) -> Tensor:
    r""":math:`\log \hat P` (first ``k`` rows), exact in the log domain (no underflow, no clamp).

    Entries of padded columns and of rows :math:`i > n` are set to 0 (not ``-inf``) so that
    multiplying by a zero weight can never give NaN; callers weight them by 0.

    >>> s = torch.tensor([[2.0, 0.0]]); m = torch.tensor([[True, True]])
    >>> torch.allclose(neuralsort_log(s, m).exp(), neuralsort(s, m))
    True
    """
    z, row_valid, col_ok = neuralsort_logits(scores, mask, tau, k)
    logp = torch.log_softmax(z, dim=-1)
    ok = row_valid[:, :, None] & col_ok[:, None, :] & mask.reshape(-1, mask.shape[-1])[:, None, :]
    logp = torch.where(ok, logp, torch.zeros((), dtype=logp.dtype, device=logp.device))
    return logp.reshape(*scores.shape[:-1], z.shape[1], scores.shape[-1])
