"""generate_synthetic: PiRank Appendix E semantics, seeding, the mslr-like preset, learnability.

Oracles: the Appendix E label formula recomputed here from the returned features (exact);
MSLR-WEB30K Fold1 sizes from docs/datasets.md, "The datasets" (exact counts); the preset grade distribution
within 1 percentage point; learnability = a LightGBM regressor's held-out Spearman
correlation with the labels (> 0.5; 0 for random scores).
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from scipy.stats import spearmanr

from bench.data import generate_synthetic
from bench.data.synthetic import query_lengths


def test_shapes_dtypes_and_appendix_e_labels():
    X, y, qid = generate_synthetic(20, 7, 12, seed=5, n_query_features=3, real_labels=True)
    assert X.shape == (140, 12) and X.dtype == np.float32 and y.dtype == np.float32
    assert qid.dtype == np.int64 and np.array_equal(np.unique(qid), np.arange(1, 21))
    gamma = X[:, 9:]
    # query features are constant within a query
    for q in (1, 7, 20):
        assert np.all(gamma[qid == q] == gamma[qid == q][0])
    # labels = clip(sum_k gamma_k x_{c_k}, 0, 4) for one shared column set c
    found = False
    for c in permutations(range(9), 3):
        s = np.einsum("nk,nk->n", X[:, list(c)].astype(np.float64), gamma.astype(np.float64))
        if np.allclose(np.clip(s, 0, 4), y, atol=1e-5):
            found = True
            break
    assert found
    Xi, yi, _ = generate_synthetic(20, 7, 12, seed=5, n_query_features=3)
    np.testing.assert_array_equal(Xi, X)
    np.testing.assert_array_equal(yi, np.rint(y))  # integer grades by default


def test_seeding():
    a = generate_synthetic(10, (3, 9), 8, seed=1)
    b = generate_synthetic(10, (3, 9), 8, seed=1)
    c = generate_synthetic(10, (3, 9), 8, seed=2)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0])


def test_task_seed_shares_label_columns_across_splits():
    """Same task_seed -> same columns c: labels from split A's formula explain split B."""
    kw = dict(n_query_features=2, real_labels=True, task_seed=99)
    Xa, ya, _ = generate_synthetic(30, 5, 8, seed=1, **kw)
    Xb, yb, _ = generate_synthetic(30, 5, 8, seed=2, **kw)
    cols = [c for c in permutations(range(6), 2)
            if np.allclose(np.clip(np.einsum("nk,nk->n", Xa[:, list(c)], Xa[:, 6:]), 0, 4), ya, atol=1e-5)]
    assert len(cols) == 1
    sb = np.einsum("nk,nk->n", Xb[:, list(cols[0])], Xb[:, 6:])
    np.testing.assert_allclose(np.clip(sb, 0, 4), yb, atol=1e-5)


def test_list_length_distributions():
    rng = np.random.default_rng(0)
    assert np.all(query_lengths(5, 4, rng) == 4)
    u = query_lengths(1000, (2, 6), rng)
    assert u.min() == 2 and u.max() == 6
    ln = query_lengths(5000, {"dist": "lognormal", "mean": 50, "sigma": 0.5, "min": 1, "max": 400},
                       rng, total_docs=250_000)
    assert ln.sum() == 250_000 and ln.min() >= 1 and ln.max() <= 400
    with pytest.raises(ValueError, match="list_length must be"):
        query_lengths(3, "long", rng)
    with pytest.raises(ValueError, match="impossible"):
        query_lengths(3, 5, rng, total_docs=100)


def test_mslr_like_preset_matches_fold1_shape():
    X, y, qid = generate_synthetic(seed=0, preset="mslr-like", split="test")
    L = np.bincount(qid)[1:]
    assert X.shape == (753_611, 136) and L.size == 6_306
    assert abs(L.mean() - 119.5) < 0.1 and L.max() > 700 and L.max() <= 1251
    pos = np.bincount(qid, weights=y > 0)[1:]
    assert abs((pos == 0).mean() - 0.0318) < 0.003
    frac = np.bincount(y.astype(np.int64), minlength=5) / y.size
    np.testing.assert_allclose(frac, [0.51, 0.32, 0.135, 0.025, 0.01], atol=0.01)
    small = generate_synthetic(100, None, None, seed=0, preset="mslr-like")
    assert small[0].shape[1] == 136 and np.unique(small[2]).size == 100


def test_default_profile_is_learnable():
    import lightgbm as lgb

    X, y, qid = generate_synthetic(300, 20, 16, seed=0)
    train = qid <= 200
    model = lgb.LGBMRegressor(n_estimators=150, learning_rate=0.1, num_leaves=15, verbose=-1,
                              n_jobs=1).fit(X[train], y[train])
    rho = spearmanr(model.predict(X[~train]), y[~train]).statistic
    noise = spearmanr(np.random.default_rng(0).random((~train).sum()), y[~train]).statistic
    assert rho > 0.5 and abs(noise) < 0.1


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown preset"):
        generate_synthetic(seed=0, preset="yahoo-like")
    with pytest.raises(ValueError, match="n_query_features"):
        generate_synthetic(3, 3, 4, seed=0, n_query_features=3)
    with pytest.raises(ValueError, match="required without a preset"):
        generate_synthetic(3, None, 4, seed=0)
    with pytest.raises(ValueError, match="columns must be"):
        generate_synthetic(3, 3, 4, seed=0, columns="random")


def test_psi_loc_makes_labels_learnable_by_a_linear_scorer():
    """With zero-mean query weights (the paper's psi) labels hinge on gamma * x, which no
    linear function of the features ranks; shifted weights make labels monotone in the label
    columns. Oracle: the least-squares linear fit's Spearman correlation with the labels."""
    from scipy.stats import spearmanr

    from bench.data import generate_synthetic

    def linear_fit_rho(psi_loc):
        X, y, _ = generate_synthetic(300, 20, 16, seed=3, n_query_features=4, psi_loc=psi_loc)
        A = np.c_[X, np.ones(len(X))]
        w, *_ = np.linalg.lstsq(A, y, rcond=None)
        return spearmanr(A @ w, y).statistic

    assert linear_fit_rho(0.0) < 0.2
    assert linear_fit_rho(2.0) > 0.6
