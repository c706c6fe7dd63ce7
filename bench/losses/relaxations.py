r"""The relaxed sort matrices a loss can be built on, by name (the ``relaxation`` keyword).

Each entry of :data:`SORT_ROWS` maps ``(scores [..., L], mask, tau, k) -> [..., k, L]``, the
first ``k`` rows (ranks) of a relaxed descending-sort matrix, padded columns and rows beyond
a list's length exactly 0:

* ``neuralsort``: :func:`bench.losses.neuralsort.neuralsort` (Grover et al. 2019), the default
  of every loss that takes the keyword, so runs that do not name one are unchanged;
* ``softsort``: :func:`bench.losses.softsort.softsort` (Prillo & Eisenschlos 2020), ``d = |.|``;
* ``odd_even``, ``bitonic``: :func:`bench.losses.sorting_networks.network_matrix` (Petersen et
  al.), with the Cauchy sigmoid (the monotonic default of ICLR 2022) and steepness
  :math:`1/\tau`, so that ``tau`` is a temperature for every entry.

:data:`SORT_LOGITS` has the entries whose rows are a softmax of logits, ``(scores, mask, tau,
k) -> (z [N, k, L], row_valid, col_ok)``: ARF takes :math:`\log \hat P` in the log domain
(nothing clamped), which a sorting network's product of mixing matrices does not offer (its
entries can be exactly 0), so ARF accepts ``neuralsort`` and ``softsort`` only.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from bench.losses._common import check_positive
from bench.losses.neuralsort import neuralsort, neuralsort_logits
from bench.losses.softsort import softsort, softsort_logits
from bench.losses.sorting_networks import network_matrix

SortRows = Callable[[Tensor, Tensor, float, "int | None"], Tensor]


def _odd_even(scores: Tensor, mask: Tensor, tau: float, k: int | None = None) -> Tensor:
    check_positive(tau, "tau")
    return network_matrix(scores, mask, k, network="odd_even", sigmoid="cauchy", steepness=1.0 / tau)


def _bitonic(scores: Tensor, mask: Tensor, tau: float, k: int | None = None) -> Tensor:
    check_positive(tau, "tau")
    return network_matrix(scores, mask, k, network="bitonic", sigmoid="cauchy", steepness=1.0 / tau)


SORT_ROWS: dict[str, SortRows] = {"neuralsort": neuralsort, "softsort": softsort, "odd_even": _odd_even,
                                  "bitonic": _bitonic}
SORT_LOGITS: dict[str, Callable[..., tuple[Tensor, Tensor, Tensor]]] = {
    "neuralsort": neuralsort_logits, "softsort": softsort_logits,
}


def _lookup(table: dict, name: str, what: str):
    if name not in table:
        raise ValueError(f"relaxation must be one of {', '.join(table)} {what}, got {name!r}")
    return table[name]


def sort_rows(name: str) -> SortRows:
    """The top-``k``-rows function of relaxation ``name``; ``ValueError`` listing the choices.

    >>> sort_rows("softsort") is softsort
    True
    """
    return _lookup(SORT_ROWS, name, "")


def sort_logits(name: str):
    """The logits function of relaxation ``name`` (log-domain losses); ``ValueError`` otherwise.

    >>> sort_logits("bitonic")
    Traceback (most recent call last):
    ...
    ValueError: relaxation must be one of neuralsort, softsort (a softmax of logits), got 'bitonic'
    """
    return _lookup(SORT_LOGITS, name, "(a softmax of logits)")
