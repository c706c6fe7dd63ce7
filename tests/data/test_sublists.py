"""bench.data.sublists: the one list sub-sampling every stage uses."""

from __future__ import annotations

import numpy as np

from bench.data.sublists import seeded_sublists, subsample_lists


def test_subsample_keeps_at_most_l_documents_per_query_in_their_order():
    offsets = np.array([0, 5, 6, 16])
    idx, new = subsample_lists(offsets, 3, np.random.default_rng(1))
    assert new.tolist() == [0, 3, 4, 7]
    for q in range(3):
        kept = idx[new[q]:new[q + 1]]
        assert np.all(np.diff(kept) > 0) and np.all((kept >= offsets[q]) & (kept < offsets[q + 1]))


def test_the_protocol_draw_depends_on_dataset_fold_split_and_size_only():
    offsets = np.arange(0, 201, 20)
    a = seeded_sublists(offsets, 5, dataset="d", fold="Fold1", split="test")
    b = seeded_sublists(offsets, 5, dataset="d", fold="Fold1", split="test")
    assert all(np.array_equal(x, y) for x, y in zip(a, b))  # every method and seed gets the same lists
    vali = seeded_sublists(offsets, 5, dataset="d", fold="Fold1", split="vali")
    assert not np.array_equal(a[0], vali[0])
