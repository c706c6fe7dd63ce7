"""List sub-sampling: at most ``L`` documents per query, the one function every stage uses.

:func:`subsample_lists` keeps a random subset of each query's documents (in their original
order) from a given generator; :func:`seeded_sublists` is the protocol's fixed draw for
evaluation lists (``L_test``): seeded by ``(dataset, fold, split, "eval_lists", L)``, so it
is the same for every method and seed and paired tests stay paired. The trainer's
validation/test lists (``train.test_list_size``) and ``ltr-bench evaluate --list-sizes``
draw the test lists the same way.

>>> idx, off = seeded_sublists(np.array([0, 3, 5]), 2, dataset="d", fold="Fold1", split="test")
>>> off.tolist(), len(idx)
([0, 2, 4], 4)
"""

from __future__ import annotations

import numpy as np

from bench.seeds import numpy_generator


def subsample_lists(
    offsets: np.ndarray, list_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``list_size`` random documents per query, in their original order.

    Returns ``(doc_index [M], new_offsets [Q+1])``; vectorised (one lexsort over documents).

    >>> idx, off = subsample_lists(np.array([0, 5, 7]), 3, np.random.default_rng(0))
    >>> off.tolist(), bool(np.all(np.diff(idx[:3]) > 0)), idx[3:].tolist()
    ([0, 3, 5], True, [5, 6])
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    qidx = np.repeat(np.arange(lengths.size), lengths)
    keys = rng.random(qidx.size)
    order = np.lexsort((keys, qidx))  # grouped by query, random order within a query
    rank = np.arange(qidx.size) - offsets[qidx]
    keep = np.sort(order[rank < list_size])
    new_offsets = np.concatenate([[0], np.cumsum(np.minimum(lengths, list_size))]).astype(np.int64)
    return keep.astype(np.int64), new_offsets


def seeded_sublists(
    offsets: np.ndarray, list_size: int, *, dataset: str, fold: str, split: str
) -> tuple[np.ndarray, np.ndarray]:
    """The protocol's fixed ``L_test`` sub-sample of a split's queries (see the module doc)."""
    rng = numpy_generator(dataset, fold, split, "eval_lists", int(list_size))
    return subsample_lists(offsets, int(list_size), rng)
