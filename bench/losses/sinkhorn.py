r"""Masked Sinkhorn scaling through scaling vectors, with an O(BL)-per-iteration backward.

Sinkhorn (1964) scaling of a non-negative block :math:`K` (rows ``row_mask``, columns
``col_mask``; everything else ignored) keeps the iterate as
:math:`\tilde P = \mathrm{diag}(u)\, K\, \mathrm{diag}(v)` and never rewrites :math:`K`:

.. math::

    u^{(t)} = 1 / (K v^{(t-1)}) \quad\text{(row normalisation)}, \qquad
    v^{(t)} = 1 / (K^\top u^{(t)}) \quad\text{(column normalisation)},

starting from :math:`v^{(0)} = \mathbf 1`. One *iteration* is one row followed by one
column normalisation, so after it every column sums to 1 exactly and the row sums are
:math:`u^{(t)} \odot K v^{(t)}`, which the next iteration computes anyway: the stopping
test is free.

Stopping rule (decided here): a list is *converged* once every real row sum of the current
iterate is within ``tol`` of 1 (columns are exact after each iteration). Converged lists are
frozen on the device by a per-list flag, so each list's result depends only on that list
(batch composition and padding never change it). The loop ends at ``max_iter`` or, checked
every ``check_every`` iterations with a single device-to-host sync, when every list is
frozen. The first check happens after one full iteration.

Backward: the custom autograd function stores only the scaling vectors of every iteration
(:math:`O(B L)` each) and back-propagates through the exact unrolled iterations on vectors;
the gradient with respect to :math:`K` is a sum of rank-one terms, assembled by one batched
matrix product at the end. Memory is therefore :math:`O(BL^2)` in total (the input) rather
than per iteration, and the gradient is that of the computed (possibly unconverged) iterate,
so it matches finite differences.

Denominators are floored at ``finfo(dtype).eps**2`` only to keep a pathological all-zero
row or column (exact underflow of every entry) finite; ordinary inputs never reach it.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


def _kv(k: Tensor, v: Tensor) -> Tensor:
    # (K v)_i as a row vector times K^T: much faster than bmm(K, v[..., None]) on CPU BLAS.
    # (One BLAS gemv per list through a strided baddbmm_ was tried: faster only on a loaded
    # machine, 1.4x slower for NeuralNDCG on an idle one, and other float32 bits.)
    return torch.bmm(v[:, None, :], k.transpose(1, 2))[:, 0, :]


def _ktu(k: Tensor, u: Tensor) -> Tensor:
    # (K^T u)_j
    return torch.bmm(u[:, None, :], k)[:, 0, :]


def _iterate(k: Tensor, row_mask: Tensor, col_mask: Tensor, max_iter: int, tol: float,
             check_every: int, record: bool):
    """Run the masked scaling loop; returns ``u, v, history`` (history only if ``record``)."""
    dtype, device = k.dtype, k.device
    zero = torch.zeros((), dtype=dtype, device=device)
    floor = torch.finfo(dtype).eps ** 2
    u = row_mask.to(dtype)
    v = col_mask.to(dtype)
    n_rows = row_mask.sum(-1)
    done = n_rows <= 1  # an empty or 1x1 block needs no scaling
    us, vs, acts = [u], [v], []
    for t in range(1, max_iter + 1):
        x = _kv(k, v)
        if t >= 2:
            err = torch.where(row_mask, (u * x - 1.0).abs(), zero).amax(dim=-1)
            done = done | (err <= tol)
            if t % check_every == 0 and bool(done.all()):
                break
        active = ~done
        u_new = torch.where(row_mask, 1.0 / x.clamp(min=floor), zero)
        v_new = torch.where(col_mask, 1.0 / _ktu(k, u_new).clamp(min=floor), zero)
        u = torch.where(active[:, None], u_new, u)
        v = torch.where(active[:, None], v_new, v)
        if record:
            us.append(u)
            vs.append(v)
            acts.append(active)
    return u, v, (us, vs, acts)


def _forward_value(k: Tensor, left: Tensor, right: Tensor, row_mask: Tensor, col_mask: Tensor, max_iter: int,
                   tol: float, check_every: int) -> tuple[Tensor, tuple[Tensor, ...]]:
    """The bilinear value per list and what the backward needs besides ``K``."""
    u, v, (us, vs, acts) = _iterate(k, row_mask, col_mask, max_iter, tol, check_every, True)
    kw = _kv(k, v * right)
    value = (left * u * kw).sum(-1)
    saved = (left, right, kw, torch.stack(us), torch.stack(vs),
             torch.stack(acts) if acts else torch.zeros(0, k.shape[0], dtype=torch.bool, device=k.device))
    return value, saved


def _backward_factors(k: Tensor, grad_value: Tensor, left: Tensor, right: Tensor, kw: Tensor, us: Tensor, vs: Tensor,
                      acts: Tensor, need_k: bool) -> tuple[Tensor | None, Tensor | None, Tensor, Tensor]:
    """Back-propagate through the unrolled iterations on vectors.

    Returns ``(lcols, rcols, grad_left, grad_right)`` where the gradient with respect to
    ``K`` is ``lcols @ rcols`` (``[B, R, m] @ [B, m, C]``, ``m = 2T + 2``), a sum of rank-one
    terms that the caller multiplies out (or contracts) as it needs; both ``None`` unless
    ``need_k``.
    """
    g = grad_value[:, None]
    u_t, v_t = us[-1], vs[-1]
    lu = g * left * u_t
    ktlu = _ktu(k, lu)
    grad_left = g * u_t * kw
    grad_right = v_t * ktlu
    if not need_k:
        return None, None, grad_left, grad_right
    gu = g * left * kw  # dL/du_T
    gv = right * ktlu  # dL/dv_T
    lcols, rcols = [lu], [v_t * right]
    zero = torch.zeros((), dtype=k.dtype, device=k.device)
    for t in range(acts.shape[0], 0, -1):
        act = acts[t - 1][:, None]
        u_t, v_t, v_prev = us[t], vs[t], vs[t - 1]
        a = torch.where(act, -gv * v_t * v_t, zero)  # dL/d(K^T u_t)
        gu_tot = gu + _kv(k, a)
        c = torch.where(act, -gu_tot * u_t * u_t, zero)  # dL/d(K v_{t-1})
        gv = torch.where(act, _ktu(k, c), gv)
        gu = torch.where(act, zero, gu_tot)
        lcols += [u_t, c]
        rcols += [a, v_prev]
    return torch.stack(lcols, -1), torch.stack(rcols, 1), grad_left, grad_right


class _SinkhornBilinear(torch.autograd.Function):
    """``left^T diag(u) K diag(v) right`` per list, with the unrolled vector backward."""

    @staticmethod
    def forward(ctx, k, left, right, row_mask, col_mask, max_iter, tol, check_every):  # type: ignore[override]
        with torch.no_grad():
            value, saved = _forward_value(k, left, right, row_mask, col_mask, max_iter, tol, check_every)
        ctx.save_for_backward(k, *saved)
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_value):  # type: ignore[override]
        k, *saved = ctx.saved_tensors
        lcols, rcols, grad_left, grad_right = _backward_factors(k, grad_value, *saved, need_k=ctx.needs_input_grad[0])
        grad_k = None if lcols is None or rcols is None else torch.bmm(lcols, rcols)
        return (grad_k, grad_left if ctx.needs_input_grad[1] else None, grad_right if ctx.needs_input_grad[2] else None,
                None, None, None, None, None)


def _softmax_rows_(z: Tensor) -> Tensor:
    """Row softmax of ``z`` written over ``z`` on CPU (one [B, R, C] buffer instead of two;
    bitwise the same as ``torch.softmax``), out of place on other devices."""
    if z.device.type != "cpu":
        return torch.softmax(z, dim=-1)
    return torch.ops.aten._softmax.out(z, -1, False, out=z)


def _softmax_rows_backward_(grad: Tensor, p: Tensor) -> Tensor:
    """``p * (grad - rowsum(p * grad))``, written over ``grad`` on CPU (``grad`` is ours)."""
    if grad.device.type != "cpu":
        return torch._softmax_backward_data(grad, p, -1, p.dtype)
    return torch.ops.aten._softmax_backward_data.out(grad, p, -1, p.dtype, grad_input=grad)


class _SoftmaxSinkhornBilinear(torch.autograd.Function):
    r"""``left^T Sinkhorn(K) right`` with :math:`K = \mathrm{softmax}_{\text{rows}}(c\, s^\top + \mathbf 1 b^\top)`
    (or its transpose), the logits given by their factors.

    Fusing the softmax into the Sinkhorn function lets every ``[B, L, L]`` step run in
    place: the logits, their softmax and ``K`` are one buffer; in the backward the rank-``m``
    gradient of ``K`` is multiplied out into one buffer, the softmax backward overwrites it
    and one batched product with :math:`[c; \mathbf 1]` gives the gradients of ``s`` and
    ``b`` (the logits' backward) in a single pass. Autograd through
    ``baddbmm -> softmax -> sinkhorn_bilinear`` allocates two more ``[B, L, L]`` buffers and
    makes two more passes.
    """

    @staticmethod
    def forward(ctx, coef, s, bias, left, right, row_mask, col_mask, max_iter, tol, check_every, transpose):  # type: ignore[override]
        with torch.no_grad():
            p = _softmax_rows_(torch.baddbmm(bias[:, None, :], coef[:, :, None], s[:, None, :]))
            k = p.transpose(1, 2) if transpose else p
            value, saved = _forward_value(k, left, right, row_mask, col_mask, max_iter, tol, check_every)
        ctx.transpose = transpose
        ctx.save_for_backward(p, coef, s, *saved)
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_value):  # type: ignore[override]
        p, coef, s, *saved = ctx.saved_tensors
        k = p.transpose(1, 2) if ctx.transpose else p
        need_k = any(ctx.needs_input_grad[:3])
        lcols, rcols, grad_left, grad_right = _backward_factors(k, grad_value, *saved, need_k=need_k)
        grads: list[Tensor | None] = [None, None, None]
        if lcols is not None and rcols is not None:
            # dL/dP = lcols @ rcols, transposed back when K = P^T
            dz = torch.bmm(rcols.transpose(1, 2), lcols.transpose(1, 2)) if ctx.transpose else torch.bmm(lcols, rcols)
            dz = _softmax_rows_backward_(dz, p)  # dL/dz, z_ij = c_i s_j + b_j
            sums = torch.bmm(torch.stack((coef, torch.ones_like(coef)), 1), dz)  # [B, 2, C]: dL/ds, dL/db
            grad_coef = torch.bmm(dz, s[:, :, None])[:, :, 0] if ctx.needs_input_grad[0] else None
            grads = [grad_coef, sums[:, 0], sums[:, 1]]
        return (*grads, grad_left if ctx.needs_input_grad[3] else None, grad_right if ctx.needs_input_grad[4] else None,
                None, None, None, None, None, None)


def softmax_sinkhorn_bilinear(coef: Tensor, s: Tensor, bias: Tensor, left: Tensor, right: Tensor, row_mask: Tensor,
                              col_mask: Tensor, max_iter: int = 30, tol: float = 1e-6, check_every: int = 5,
                              transpose: bool = False) -> Tensor:
    r""":func:`sinkhorn_bilinear` of :math:`K = P` or :math:`P^\top`, :math:`P = \mathrm{softmax}(z)` over
    the rows of :math:`z_{ij} = \mathrm{coef}_i\, s_j + \mathrm{bias}_j` (the NeuralSort logits,
    :func:`bench.losses.neuralsort.neuralsort_parts`); ``coef [B, R0]``, ``s, bias [B, C0]``.

    Same value and gradient as ``sinkhorn_bilinear(softmax(z)[.mT], ..., mask_input=False)``
    with fewer ``[B, L, L]`` passes (see :class:`_SoftmaxSinkhornBilinear`). Entries of
    ``K`` outside the real block must be finite (they are ignored, as with
    ``mask_input=False``): padded columns of ``z`` at :math:`-\infty` give exact zeros.

    >>> c = torch.tensor([[1.0, -1.0]]); s = torch.tensor([[0.5, -0.5]]); b = torch.zeros(1, 2)
    >>> m = torch.ones(1, 2, dtype=torch.bool); one = torch.ones(1, 2)
    >>> P = torch.softmax(c[:, :, None] * s[:, None, :] + b[:, None, :], -1)
    >>> bool(torch.isclose(softmax_sinkhorn_bilinear(c, s, b, one, one, m, m), sinkhorn_bilinear(P, one, one, m, m)))
    True
    """
    if coef.dim() != 2 or s.dim() != 2 or s.shape != bias.shape or coef.shape[0] != s.shape[0]:
        raise ValueError(f"need coef [B, R] and s, bias [B, C], got {tuple(coef.shape)}, {tuple(s.shape)}, "
                         f"{tuple(bias.shape)}")
    shape = (coef.shape[0], s.shape[1], coef.shape[1]) if transpose else (coef.shape[0], coef.shape[1], s.shape[1])
    if row_mask.shape != shape[:2] or col_mask.shape != (shape[0], shape[2]):
        raise ValueError(f"row_mask must be [B, R] and col_mask [B, C] for K of shape {list(shape)}")
    if int(max_iter) < 0 or int(check_every) < 1:
        raise ValueError(f"need max_iter >= 0 and check_every >= 1, got {max_iter}, {check_every}")
    zero = torch.zeros((), dtype=s.dtype, device=s.device)
    left = torch.where(row_mask, left.to(s.dtype), zero)
    right = torch.where(col_mask, right.to(s.dtype), zero)
    return _SoftmaxSinkhornBilinear.apply(coef, s, bias, left, right, row_mask, col_mask, int(max_iter), float(tol),
                                          int(check_every), bool(transpose))


def _prepare(k: Tensor, row_mask: Tensor, col_mask: Tensor, max_iter: int, tol: float, check_every: int,
             mask_input: bool = True):
    if k.dim() != 3:
        raise ValueError(f"K must be [B, R, C], got shape {tuple(k.shape)}")
    if row_mask.shape != k.shape[:2] or col_mask.shape != (k.shape[0], k.shape[2]):
        raise ValueError("row_mask must be [B, R] and col_mask [B, C] for K of shape [B, R, C]")
    if int(max_iter) < 0 or int(check_every) < 1:
        raise ValueError(f"need max_iter >= 0 and check_every >= 1, got {max_iter}, {check_every}")
    if not mask_input:
        return k
    zero = torch.zeros((), dtype=k.dtype, device=k.device)
    # Entries outside the real block are ignored: zero them so no garbage enters a product.
    return torch.where(row_mask[:, :, None] & col_mask[:, None, :], k, zero)


def sinkhorn_bilinear(k: Tensor, left: Tensor, right: Tensor, row_mask: Tensor, col_mask: Tensor,
                      max_iter: int = 30, tol: float = 1e-6, check_every: int = 5,
                      mask_input: bool = True) -> Tensor:
    r"""Per-list :math:`\mathrm{left}^\top\, \mathrm{Sinkhorn}(K)\, \mathrm{right}`, shape ``[B]``.

    The doubly-stochastic iterate is never materialised; the backward costs
    :math:`O(L^2)` per iteration in time and :math:`O(L)` in memory. ``tol < 0`` runs exactly
    ``max_iter`` iterations. See the module docstring for the stopping rule.
    ``mask_input=False`` skips zeroing ``K`` outside the block (an :math:`L^2` pass): allowed
    only when those entries are finite, since padded rows and columns get zero scaling and
    exactly zero gradient anyway.

    >>> K = torch.tensor([[[2.0, 1.0], [1.0, 1.0]]], dtype=torch.float64)
    >>> m = torch.ones(1, 2, dtype=torch.bool)
    >>> one = torch.ones(1, 2, dtype=torch.float64)
    >>> round(sinkhorn_bilinear(K, one, one, m, m, max_iter=100, tol=1e-12).item(), 9)  # sum of entries
    2.0
    """
    k = _prepare(k, row_mask, col_mask, max_iter, tol, check_every, mask_input)
    zero = torch.zeros((), dtype=k.dtype, device=k.device)
    left = torch.where(row_mask, left.to(k.dtype), zero)
    right = torch.where(col_mask, right.to(k.dtype), zero)
    return _SinkhornBilinear.apply(k, left, right, row_mask, col_mask, int(max_iter), float(tol), int(check_every))


def sinkhorn(k: Tensor, row_mask: Tensor, col_mask: Tensor, max_iter: int = 30, tol: float = 1e-6,
             check_every: int = 5) -> Tensor:
    r"""The scaled matrix :math:`\mathrm{diag}(u) K \mathrm{diag}(v)` (zero outside the block).

    Differentiable by plain autograd through the vector iterations (the reference path for
    tests and small inputs; the losses use :func:`sinkhorn_bilinear`).

    >>> K = torch.tensor([[[2.0, 1.0], [1.0, 1.0]]], dtype=torch.float64)
    >>> m = torch.ones(1, 2, dtype=torch.bool)
    >>> P = sinkhorn(K, m, m, max_iter=100, tol=1e-12)
    >>> [round(x, 6) for x in P.sum(1)[0].tolist() + P.sum(2)[0].tolist()]
    [1.0, 1.0, 1.0, 1.0]
    """
    k = _prepare(k, row_mask, col_mask, max_iter, tol, check_every)
    u, v, _ = _iterate(k, row_mask, col_mask, int(max_iter), float(tol), int(check_every), False)
    return u[:, :, None] * k * v[:, None, :]


def sinkhorn_iterations(k: Tensor, row_mask: Tensor, col_mask: Tensor, max_iter: int = 30,
                        tol: float = 1e-6, check_every: int = 5) -> Tensor:
    """Number of iterations each list actually ran (``[B]``, long); for diagnostics and tests."""
    k = _prepare(k, row_mask, col_mask, max_iter, tol, check_every)
    with torch.no_grad():
        _, _, (_, _, acts) = _iterate(k, row_mask, col_mask, int(max_iter), float(tol), int(check_every), True)
    if not acts:
        return torch.zeros(k.shape[0], dtype=torch.long, device=k.device)
    return torch.stack(acts).sum(0)
