r"""Differentiable sorting networks (Petersen, Borgelt, Kuehne & Deussen, ICML 2021 and ICLR 2022).

A sorting network is a fixed sequence of layers of disjoint comparators on wires; a
comparator puts the larger of its two wire values on its *top* wire and the smaller on its
*bottom* wire. Relaxed, with :math:`\alpha = f(\beta (x_{top} - x_{bot}))` for a sigmoid
:math:`f` and steepness :math:`\beta`:

.. math::

    x_{top}' = \alpha x_{top} + (1 - \alpha) x_{bot}, \qquad
    x_{bot}' = (1 - \alpha) x_{top} + \alpha x_{bot},

and every other quantity carried on the wires (the items' one-hot rows, their gains) is mixed
with the same :math:`\alpha`. Starting from the identity, the rows carried to the wires form
the relaxed descending-sort matrix :math:`\hat P` (rows = ranks, columns = items): every layer
multiplies it by a doubly stochastic matrix, so :math:`\hat P` is doubly stochastic, and
:math:`\hat P v` for any vector :math:`v` is obtained by carrying :math:`v` alone, in
:math:`O(n)` per layer, without the matrix.

Sigmoids :math:`f(v)` (:data:`SIGMOIDS`), with the parametrisation of the authors' package
``diffsort`` (``v`` = steepness x difference):

* ``logistic``: :math:`1 / (1 + e^{-v})` (ICML 2021);
* ``cauchy``: :math:`\arctan(v)/\pi + 1/2`, ``reciprocal``: :math:`\tfrac12 v / (2 + |v|) + \tfrac12`,
  ``optimal``: :math:`v + \tfrac12` for :math:`|v| \le \tfrac14`, :math:`1 - 1/(16 v)` above,
  :math:`-1/(16 v)` below: the monotonic family of ICLR 2022 (each relaxed network output is
  monotonic in its inputs and its error bounded; ``cauchy`` is the default there and here).

Networks (:data:`NETWORKS`):

* ``odd_even`` (odd-even transposition): ``n`` layers; layer ``l`` compares wires
  ``(i, i + 1)`` for ``i = l mod 2, l mod 2 + 2, ...``; :math:`O(n^2)` comparators.
* ``bitonic``: for :math:`2^K \ge n` wires, :math:`K (K + 1)/2` layers of :math:`2^{K-1}`
  comparators, :math:`O(n \log^2 n)`. A list of ``n`` items that is not a power of two sits on
  the *last* ``n`` wires of the :math:`2^K` network, and a comparator that touches one of the
  unused first wires leaves its wires as they are (the construction of ``diffsort``).

Masking and padding invariance: each list gets the network of its own length ``n`` (real
items compacted first, in their order). Comparators that touch a wire without a real item,
and for ``odd_even`` the layers ``l >= n``, are the identity (:math:`\alpha = 1`, set by a
mask, not by extreme scores), so a list's result depends on that list only. ``odd_even`` runs
the whole batch as one pass of ``max n`` layers; ``bitonic`` groups the lists by :math:`K`
(at most :math:`\lceil \log_2 L \rceil + 1` groups, never a loop over lists).

Relation to ``diffsort``: its networks sort ascending; :math:`\hat P` here equals the
transpose of its matrix for the negated scores, checked in ``tests/losses/test_sorting_networks.py``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import Tensor

from bench.losses._common import check_k, check_positive


def _logistic(v: Tensor) -> Tensor:
    return torch.sigmoid(v)


def _cauchy(v: Tensor) -> Tensor:
    return torch.atan(v) / math.pi + 0.5


def _reciprocal(v: Tensor) -> Tensor:
    return 0.5 * v / (2.0 + v.abs()) + 0.5


def _optimal(v: Tensor) -> Tensor:
    outer = v.abs() > 0.25
    safe = torch.where(outer, v, torch.ones_like(v))  # no 1/0 in the branch that is not taken
    tail = torch.where(v > 0, 1.0 - 1.0 / (16.0 * safe), -1.0 / (16.0 * safe))
    return torch.where(outer, tail, v + 0.5)


SIGMOIDS: dict[str, Callable[[Tensor], Tensor]] = {
    "logistic": _logistic, "cauchy": _cauchy, "reciprocal": _reciprocal, "optimal": _optimal,
}


def _odd_even(width: int) -> list[tuple[Tensor, Tensor]]:
    """``(top, bottom)`` wire indices of each layer of the odd-even network on ``width`` wires."""
    layers = []
    for layer in range(width):
        top = torch.arange(layer % 2, width - 1, 2)
        layers.append((top, top + 1))
    return layers


def _bitonic(levels: int) -> list[tuple[Tensor, Tensor]]:
    """``(top, bottom)`` wire indices of each layer of the bitonic network on ``2**levels`` wires."""
    wires = torch.arange(2**levels)
    layers = []
    for stage in range(levels):
        for step in range(stage + 1):
            gap = 2 ** (stage - step)
            low = wires[(wires & gap) == 0]
            high = low + gap
            upward = ((low >> (stage + 1)) & 1) == 0  # blocks alternate direction within a stage
            layers.append((torch.where(upward, low, high), torch.where(upward, high, low)))
    return layers


@functools.cache
def _plan(network: str, size: int, device: str) -> tuple[list[tuple[Tensor, int, Tensor, Tensor]], Tensor]:
    """The network as gathers: per layer ``(read, k, first, last)``, and the final ``read``.

    The state is kept in each layer's own wire order (its ``k`` top wires, then its ``k`` bottom
    wires, then the idle ones), so a layer costs one gather: ``read`` takes the previous
    layer's order to this one's. ``first``/``last`` are each comparator's smaller/larger wire
    index (which lists it touches); the final ``read`` restores wire order. Cached per device.
    """
    layers = _odd_even(size) if network == "odd_even" else _bitonic(size)
    width = size if network == "odd_even" else 2**size
    where = torch.arange(width)  # where[w] = position of wire w in the current state
    out = []
    for top, bottom in layers:
        busy = torch.zeros(width, dtype=torch.bool)
        busy[top] = True
        busy[bottom] = True
        order = torch.cat([top, bottom, torch.nonzero(~busy).flatten()])
        out.append((where[order].to(device), top.numel(), torch.minimum(top, bottom).to(device),
                    torch.maximum(top, bottom).to(device)))
        where = torch.empty_like(order).scatter_(0, order, torch.arange(width))
    return out, where.to(device)


def _run(state: Tensor, first_wire: Tensor, end_wire: Tensor, lengths: Tensor, network: str, size: int,
         steepness: float, sigmoid: Callable[[Tensor], Tensor]) -> Tensor:
    """Carry ``state [N, W, 1 + C]`` (channel 0: the wire values) through the network.

    A list's items sit on wires ``first_wire <= w < end_wire``; a comparator touching any other
    wire, and for ``odd_even`` any layer ``>= n``, is the identity (alpha = 1).
    """
    layers, final = _plan(network, size, str(state.device))
    one = torch.ones((), dtype=state.dtype, device=state.device)
    zero = torch.zeros((), dtype=state.dtype, device=state.device)
    for depth, (read, k, first, last) in enumerate(layers):
        moved = state.index_select(1, read)
        hi, lo = moved[:, :k], moved[:, k : 2 * k]
        active = (first[None, :] >= first_wire[:, None]) & (last[None, :] < end_wire[:, None])
        if network == "odd_even":
            active = active & (lengths > depth)[:, None]
        diff = torch.where(active, hi[:, :, 0] - lo[:, :, 0], zero)
        a = torch.where(active, sigmoid(steepness * diff), one)[:, :, None]
        state = torch.cat([a * hi + (1 - a) * lo, (1 - a) * hi + a * lo, moved[:, 2 * k :]], dim=1)
    return state.index_select(1, final) if layers else state


NETWORKS = ("odd_even", "bitonic")


def _check(network: str, sigmoid: str, steepness: float) -> None:
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    if sigmoid not in SIGMOIDS:
        raise ValueError(f"sigmoid must be one of {', '.join(SIGMOIDS)}, got {sigmoid!r}")
    check_positive(steepness, "steepness")


def network_sort(scores: Tensor, mask: Tensor, values: Tensor, *, network: str = "bitonic", sigmoid: str = "cauchy",
                 steepness: float = 10.0) -> Tensor:
    r"""The relaxed descending sort applied to ``values`` ``[B, L, C]``: :math:`\hat P v`, ``[B, L, C]``.

    Row ``r`` holds the values carried to rank ``r + 1``; rows ``r >= n`` are 0. Padded
    entries of ``values`` never enter the result.

    >>> s = torch.tensor([[0.3, 2.0, 1.0, 9.0]]); m = torch.tensor([[True, True, True, False]])
    >>> v = torch.tensor([[[10.0], [20.0], [30.0], [99.0]]])
    >>> network_sort(s, m, v, sigmoid="logistic", steepness=1e3)[0, :, 0].tolist()  # hard limit: score order
    [20.0, 30.0, 10.0, 0.0]
    """
    _check(network, sigmoid, steepness)
    if scores.dim() != 2 or scores.shape != mask.shape or values.shape[:2] != scores.shape or values.dim() != 3:
        raise ValueError(f"scores and mask must be [B, L] and values [B, L, C], got {tuple(scores.shape)}, "
                         f"{tuple(mask.shape)}, {tuple(values.shape)}")
    bsz, length = scores.shape
    if length == 0:
        return torch.zeros_like(values)
    lengths = mask.sum(-1)
    width = max(1, int(lengths.max()))
    order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)[:, :width]  # real items first
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    x = torch.where(mask, scores, zero).gather(1, order)
    carried = torch.where(mask[:, :, None], values, torch.zeros((), dtype=values.dtype, device=values.device))
    carried = carried.gather(1, order[:, :, None].expand(-1, -1, values.shape[2]))
    fn = SIGMOIDS[sigmoid]
    if network == "odd_even":  # every list on the first n of `width` wires
        state = torch.cat([x[:, :, None], carried], dim=-1)
        out = _run(state, torch.zeros_like(lengths), lengths, lengths, network, width, steepness, fn)[:, :, 1:]
    else:
        levels = torch.ceil(torch.log2(lengths.clamp(min=1).to(torch.float64))).to(torch.long)
        out = torch.zeros_like(carried)
        for level in torch.unique(levels).tolist():  # one batched network per power of two
            rows = torch.nonzero(levels == level).flatten()
            wires = 2**level
            shift = wires - lengths[rows]  # the list sits on the last n wires
            item = torch.arange(wires, device=scores.device)[None, :] - shift[:, None]
            on_wire = (item >= 0) & (item < lengths[rows][:, None])
            idx = item.clamp(0, width - 1)
            xw = torch.where(on_wire, x[rows].gather(1, idx), zero)
            cw = carried[rows].gather(1, idx[:, :, None].expand(-1, -1, carried.shape[2]))
            cw = torch.where(on_wire[:, :, None], cw, torch.zeros((), dtype=cw.dtype, device=cw.device))
            state = torch.cat([xw[:, :, None], cw], dim=-1)
            res = _run(state, shift, shift + lengths[rows], lengths[rows], network, level, steepness, fn)[:, :, 1:]
            back = (torch.arange(width, device=scores.device)[None, :] + shift[:, None]).clamp(max=wires - 1)
            res = res.gather(1, back[:, :, None].expand(-1, -1, res.shape[2]))  # rank r <- wire r + shift
            out = out.index_copy(0, rows, res)
    ranks_ok = torch.arange(width, device=scores.device)[None, :] < lengths[:, None]
    out = torch.where(ranks_ok[:, :, None], out, torch.zeros((), dtype=out.dtype, device=out.device))
    return torch.nn.functional.pad(out, (0, 0, 0, length - width))


def network_matrix(scores: Tensor, mask: Tensor, k: int | None = None, *, network: str = "bitonic",
                   sigmoid: str = "cauchy", steepness: float = 10.0) -> Tensor:
    r"""Relaxed descending-sort matrix :math:`\hat P` of the network, first ``k`` rows: ``[..., k, L]``.

    Carries the identity's rows, so it costs :math:`O(n)` times the carried-vector cost.
    Padded columns and rows beyond a list's length are exactly 0.

    >>> s = torch.tensor([[1.0, 3.0, 2.0]]); m = torch.ones(1, 3, dtype=torch.bool)
    >>> network_matrix(s, m, network="odd_even", sigmoid="logistic", steepness=1e3).tolist()
    [[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]]
    """
    k = check_k(k)
    lead, length = scores.shape[:-1], scores.shape[-1]
    rows = math.prod(lead)  # not reshape(-1, L): ambiguous for L = 0
    s, m = scores.reshape(rows, length), mask.reshape(rows, length)
    eye = torch.eye(length, dtype=scores.dtype, device=scores.device).expand(s.shape[0], length, length)
    p = network_sort(s, m, eye, network=network, sigmoid=sigmoid, steepness=steepness)
    kk = length if k is None else min(k, length)
    return p[:, :kk].reshape(*lead, kk, length)
