r"""Resampling training queries into smaller derived queries (SinkProp, Adams & Zemel 2011, Sec. 5).

Every query :math:`q` with :math:`n_q` documents becomes ``n_derived`` derived queries
(the paper: 20). Derived query :math:`k` of :math:`q` has

.. math::

    m_{qk} = \min\big(N_{qk},\, \text{max\_size}\big), \qquad N_{qk} \sim \mathrm{Poisson}(n_q),

documents (the paper: at most 200), each drawn uniformly **with replacement** from
:math:`q`'s documents, independently. A derived query keeps its documents in the order drawn
(duplicates included: a duplicate is a second, identical document of the list).

**A draw of size 0** (probability :math:`e^{-n_q}`: only tiny queries, and every draw of a
query with no documents) yields no derived query: it is counted in ``sizes`` but has no
entry in ``offsets``/``parent``. A list without documents carries no ranking information and
every loss skips it anyway; redrawing would change the size distribution to a zero-truncated
Poisson, so the drop is the choice that keeps the drawn sizes exactly Poisson (then capped).

All draws come from the one NumPy ``Generator`` given (the trainer seeds it with
``bench.seeds.derive_seed(dataset, fold, method, seed, "resample")``): the sizes first
(query by query, ``n_derived`` each), then every document index, in one vectorised call
each, so the result is a deterministic function of the generator's state.

>>> d = resample_queries(np.array([0, 3, 3, 5]), 2, 200, np.random.default_rng(0))
>>> d.sizes.shape, d.sizes[2:4].tolist(), sorted(set(d.parent.tolist()))  # query 1 is empty: none
((6,), [0, 0], [0, 2])
>>> lo = d.offsets_of_parent[d.parent].repeat(np.diff(d.offsets))  # each document from its own query
>>> bool(np.all((d.doc_index >= lo) & (d.doc_index < d.offsets_of_parent[d.parent + 1].repeat(np.diff(d.offsets)))))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Derived:
    """Derived queries of a split: document indices into the split, their offsets and parents."""

    sizes: np.ndarray  # [Q * n_derived] drawn (capped) sizes, zeros included, query-major
    doc_index: np.ndarray  # [M] index into the split's documents
    offsets: np.ndarray  # [K + 1] offsets of the K non-empty derived queries into doc_index
    parent: np.ndarray  # [K] original query of each derived query
    offsets_of_parent: np.ndarray  # the original split's offsets [Q + 1]

    @property
    def n_queries(self) -> int:
        return int(self.parent.size)


def resample_queries(offsets: np.ndarray, n_derived: int, max_size: int, rng: np.random.Generator) -> Derived:
    """Draw ``n_derived`` derived queries per query (see the module docstring); vectorised.

    >>> d = resample_queries(np.array([0, 4]), 3, 2, np.random.default_rng(1))
    >>> d.sizes.tolist(), d.offsets.tolist()  # Poisson(4) draws capped at 2
    ([2, 2, 2], [0, 2, 4, 6])
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing, start at 0 and have one more entry than queries")
    if int(n_derived) < 1 or int(max_size) < 1:
        raise ValueError(f"need n_derived >= 1 and max_size >= 1, got {n_derived} and {max_size}")
    lengths = np.diff(offsets)
    parent_all = np.repeat(np.arange(lengths.size, dtype=np.int64), int(n_derived))
    sizes = np.minimum(rng.poisson(lengths[parent_all].astype(np.float64)), int(max_size)).astype(np.int64)
    keep = sizes > 0
    parent, kept = parent_all[keep], sizes[keep]
    doc_parent = np.repeat(parent, kept)
    draws = rng.integers(0, lengths[doc_parent]) if doc_parent.size else np.zeros(0, dtype=np.int64)
    doc_index = (offsets[doc_parent] + draws).astype(np.int64)
    new_offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
    return Derived(sizes, doc_index, new_offsets, parent, offsets)
