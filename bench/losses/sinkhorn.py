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

On the CPU every ``[B, L, L]`` pass runs chunk by chunk of lists whose ``K`` blocks fit the
cache budget (:func:`bench.losses.chunks.list_chunks`), so that all iterations of a chunk,
and the passes around them, read ``K`` from cache instead of memory. Each list's result
depends only on that list (per-list freezing), and every batched product, softmax and row
sum here gives a list the same bits whatever the batch around it, so chunking changes no
bit (tested).

Denominators are floored at ``finfo(dtype).eps**2`` only to keep a pathological all-zero
row or column (exact underflow of every entry) finite; ordinary inputs never reach it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from bench.losses._common import check_count
from bench.losses.chunks import list_chunks


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
    # In-place steps and reciprocal_() (1.0 / x is reciprocal() * 1.0): the same bits in
    # fewer operator calls, which dominate beside the cached products on small chunks.
    for t in range(1, max_iter + 1):
        x = _kv(k, v)
        if t >= 2:
            err = torch.where(row_mask, (u * x).sub_(1.0).abs_(), zero).amax(dim=-1)
            done = done | (err <= tol)
            if t % check_every == 0 and bool(done.all()):
                break
        active = ~done
        u_new = torch.where(row_mask, x.clamp_(min=floor).reciprocal_(), zero)
        v_new = torch.where(col_mask, _ktu(k, u_new).clamp_(min=floor).reciprocal_(), zero)
        frozen = done[:, None]
        u = torch.where(frozen, u, u_new)
        v = torch.where(frozen, v, v_new)
        if record:
            us.append(u)
            vs.append(v)
            acts.append(active)
    return u, v, (us, vs, acts)


KOfChunk = Callable[[int], Tensor]  # chunk index -> that chunk's K
Consume = Callable[[int, Tensor, Tensor], None]  # chunk index, its lcols and rcols


def _forward_value(k_of: KOfChunk, chunks: list[slice], left: Tensor, right: Tensor, row_mask: Tensor,
                   col_mask: Tensor, max_iter: int, tol: float, check_every: int) -> tuple[Tensor, tuple[Tensor, ...]]:
    """The bilinear value per list and what the backward needs besides ``K``, chunk by chunk
    of lists; ``k_of(i)`` gives (or first computes) the ``K`` of chunk ``chunks[i]``.

    A chunk that stops early is padded to the longest chunk's iteration count with frozen
    steps (the same ``u``, ``v``; inactive): exactly what one loop over the whole batch
    records, since that loop stops at the first check where every list is done.
    """
    parts = []
    for i, c in enumerate(chunks):
        k = k_of(i)
        u, v, (us, vs, acts) = _iterate(k, row_mask[c], col_mask[c], max_iter, tol, check_every, True)
        kw = _kv(k, v * right[c])
        parts.append(((left[c] * u * kw).sum(-1), kw, us, vs, acts))
    steps = max(len(acts) for *_, acts in parts)
    us_all, vs_all, acts_all = [], [], []
    for _, kw, us, vs, acts in parts:
        pad = steps - len(acts)
        us_all.append(torch.stack(us + us[-1:] * pad))
        vs_all.append(torch.stack(vs + vs[-1:] * pad))
        acts_all.append(torch.cat([torch.stack(acts) if acts else torch.zeros(0, kw.shape[0], dtype=torch.bool,
                                                                              device=kw.device),
                                   torch.zeros(pad, kw.shape[0], dtype=torch.bool, device=kw.device)]))
    value = torch.cat([part[0] for part in parts])
    saved = (left, right, torch.cat([part[1] for part in parts]), torch.cat(us_all, 1), torch.cat(vs_all, 1),
             torch.cat(acts_all, 1))
    return value, saved


def _backward_chunk(k: Tensor, grad_value: Tensor, left: Tensor, right: Tensor, kw: Tensor, us: Tensor, vs: Tensor,
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
    # views made once, not per step; -(g v v) computed as (g v v).neg_(): negation is exact
    us_t, vs_t, acts_t = us.unbind(0), vs.unbind(0), acts[:, :, None].unbind(0)
    for t in range(acts.shape[0], 0, -1):
        act, u_t, v_t, v_prev = acts_t[t - 1], us_t[t], vs_t[t], vs_t[t - 1]
        a = torch.where(act, (gv * v_t).mul_(v_t).neg_(), zero)  # dL/d(K^T u_t)
        gu_tot = gu + _kv(k, a)
        c = torch.where(act, (gu_tot * u_t).mul_(u_t).neg_(), zero)  # dL/d(K v_{t-1})
        gv = torch.where(act, _ktu(k, c), gv)
        gu = torch.where(act, zero, gu_tot)
        lcols += [u_t, c]
        rcols += [a, v_prev]
    return torch.stack(lcols, -1), torch.stack(rcols, 1), grad_left, grad_right


def _backward_factors(k_of: KOfChunk, chunks: list[slice], grad_value: Tensor, left: Tensor, right: Tensor,
                      kw: Tensor, us: Tensor, vs: Tensor, acts: Tensor, consume: Consume | None) -> tuple[Tensor, Tensor]:
    """:func:`_backward_chunk` chunk by chunk; returns ``(grad_left, grad_right)`` and, when
    ``consume`` is given, hands it each chunk's rank-``m`` factors of the gradient of ``K``
    while that chunk is still in cache."""
    grad_left, grad_right = torch.empty_like(left), torch.empty_like(right)
    for i, c in enumerate(chunks):
        lcols, rcols, grad_left[c], grad_right[c] = _backward_chunk(
            k_of(i), grad_value[c], left[c], right[c], kw[c], us[:, c], vs[:, c], acts[:, c], consume is not None)
        if consume is not None and lcols is not None and rcols is not None:
            consume(i, lcols, rcols)
    return grad_left, grad_right


class _SinkhornBilinear(torch.autograd.Function):
    """``left^T diag(u) K diag(v) right`` per list, with the unrolled vector backward."""

    @staticmethod
    def forward(ctx, k, left, right, row_mask, col_mask, max_iter, tol, check_every):  # type: ignore[override]
        chunks = list_chunks(k.shape[0], k.shape[1] * k.shape[2] * k.element_size(), k.device)
        with torch.no_grad():
            value, saved = _forward_value(lambda i: k[chunks[i]], chunks, left, right, row_mask, col_mask, max_iter,
                                          tol, check_every)
        ctx.chunks = chunks
        ctx.save_for_backward(k, *saved)
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_value):  # type: ignore[override]
        k, *saved = ctx.saved_tensors
        grad_k = torch.empty_like(k) if ctx.needs_input_grad[0] else None

        def consume(i: int, lcols: Tensor, rcols: Tensor) -> None:
            torch.bmm(lcols, rcols, out=grad_k[ctx.chunks[i]])

        grad_left, grad_right = _backward_factors(lambda i: k[ctx.chunks[i]], ctx.chunks, grad_value, *saved,
                                                  consume=None if grad_k is None else consume)
        return (grad_k, grad_left if ctx.needs_input_grad[1] else None, grad_right if ctx.needs_input_grad[2] else None,
                None, None, None, None, None)


class _SoftmaxSinkhornBilinear(torch.autograd.Function):
    r"""``left^T Sinkhorn(K) right`` with :math:`K = P` or :math:`P^\top`,
    :math:`P = \mathrm{softmax}_{\text{rows}}(c\, s^\top + \mathbf 1 b^\top)`, the logits given by
    their factors.

    Everything ``[B, L, L]`` runs chunk by chunk of lists (:func:`bench.losses.chunks.list_chunks`), each chunk
    while it is in cache: forward, its logits go into a scratch buffer, their softmax into
    the chunk's saved ``P`` and the iterations follow; backward, its iterations, the
    rank-``m`` gradient of ``K`` multiplied out, the softmax backward over it and the
    logits' backward (:math:`\partial z / \partial s = c`, :math:`\partial z / \partial b = 1`,
    :math:`\partial z / \partial c = s`). Every step is the operation autograd runs through
    ``outer_logits -> softmax -> sinkhorn_bilinear``, so the value and the gradients have the
    same bits as that unfused chain (tested), with one ``[B, L, L]`` of memory kept (``P``)
    instead of three. ``P`` is kept as one tensor per chunk: blocks of a chunk's size are
    reused by the allocator from one call to the next, where one ``[B, L, L]`` block is
    mapped fresh and its pages faulted in every time (30 ms of 0.4 s at B = 16, L = 1000).
    """

    @staticmethod
    def forward(ctx, coef, s, bias, left, right, row_mask, col_mask, max_iter, tol, check_every, transpose):  # type: ignore[override]
        batch, rows, cols = coef.shape[0], coef.shape[1], s.shape[1]
        chunks = list_chunks(batch, rows * cols * s.element_size(), s.device)
        lists = [len(range(batch)[c]) for c in chunks]
        ps: list[Tensor] = []
        # Several chunks: one chunk's logits in a reused scratch block (in cache). One chunk:
        # in place (no second [B, L, L] block); on CPU only, where that is tested.
        on_cpu = s.device.type == "cpu"
        logits = torch.empty(lists[0], rows, cols, dtype=s.dtype, device=s.device) if len(chunks) > 1 else None

        def k_of(i: int) -> Tensor:
            c = chunks[i]
            args = (bias[c, None, :], coef[c, :, None], s[c, None, :])  # as outer_logits, bitwise
            z = torch.addcmul(*args) if logits is None else torch.addcmul(*args, out=logits[:lists[i]])
            if on_cpu:  # bitwise torch.softmax
                out = z if logits is None else torch.empty_like(z)
                ps.append(torch.ops.aten._softmax.out(z, -1, False, out=out))
            else:
                ps.append(torch.softmax(z, dim=-1))
            return ps[i].transpose(1, 2) if transpose else ps[i]

        with torch.no_grad():
            value, saved = _forward_value(k_of, chunks, left, right, row_mask, col_mask, max_iter, tol, check_every)
        ctx.transpose, ctx.chunks, ctx.n_saved = transpose, chunks, len(saved)
        ctx.save_for_backward(coef, s, *saved, *ps)
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_value):  # type: ignore[override]
        coef, s, *rest = ctx.saved_tensors
        saved, ps = rest[:ctx.n_saved], rest[ctx.n_saved:]
        chunks, transpose, on_cpu = ctx.chunks, ctx.transpose, s.device.type == "cpu"
        need_logits = any(ctx.needs_input_grad[:3])
        grad_coef = torch.empty_like(coef) if ctx.needs_input_grad[0] else None
        grad_s, grad_bias = torch.empty_like(s), torch.empty_like(s)
        # one chunk's dL/dz in a reused block when there are several, else over dL/dK itself
        dz_buffer = torch.empty_like(ps[0]) if need_logits and len(ps) > 1 else None

        def consume(i: int, lcols: Tensor, rcols: Tensor) -> None:
            c, p = chunks[i], ps[i]
            grad_k = torch.bmm(lcols, rcols)  # dL/dK; dL/dP is its transpose when K = P^T
            grad_p = grad_k.transpose(1, 2) if transpose else grad_k
            # dL/dz, as autograd's softmax backward: written over dL/dK on CPU unless it is a
            # transposed view, into the reused block when there is one, else out of place
            if dz_buffer is None and (transpose or not on_cpu):
                dz = torch._softmax_backward_data(grad_p, p, -1, p.dtype)
            else:
                out = grad_k if dz_buffer is None else dz_buffer[:p.shape[0]]
                dz = torch.ops.aten._softmax_backward_data.out(grad_p, p, -1, p.dtype, grad_input=out)
            grad_s[c] = torch.bmm(coef[c, None, :], dz)[:, 0]  # z_ij = c_i s_j + b_j
            grad_bias[c] = dz.sum(1)
            if grad_coef is not None:
                grad_coef[c] = torch.bmm(dz, s[c, :, None])[:, :, 0]

        def k_of(i: int) -> Tensor:
            return ps[i].transpose(1, 2) if transpose else ps[i]

        grad_left, grad_right = _backward_factors(k_of, chunks, grad_value, *saved,
                                                  consume=consume if need_logits else None)
        grads = [grad_coef, grad_s, grad_bias] if need_logits else [None, None, None]
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
    max_iter = check_count(max_iter, "max_iter", minimum=0)
    check_every = check_count(check_every, "check_every", minimum=1)
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
    check_count(max_iter, "max_iter", minimum=0)
    check_count(check_every, "check_every", minimum=1)
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
