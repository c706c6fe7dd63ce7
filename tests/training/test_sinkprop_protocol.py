"""SinkProp's own protocol (bench.training.sinkprop_protocol, sinkprop_run, bench.data.resample).

Oracles and tolerances: the derived-query sizes against scipy's Poisson law (chi-square
goodness of fit at a fixed seed, p > 1e-3, and the capped mass P(N >= 200) within 4 standard
errors); document draws against the uniform law; the initialiser against ``numpy.linalg.lstsq``
(1e-8); the objective's gradient (regulariser and the chunked full batch) against central
finite differences (1e-6 relative); the chunked objective against one unchunked batch
(1e-12); the annealing schedule against within-query variances computed here by a plain
loop; validation scores recomputed by ``bench.metrics``; the run's short-cut Hungarian
ranking against :func:`bench.losses.sinkprop.shortcut_hungarian` called one query at a time
(itself checked against brute force in tests/losses/test_sinkprop_ranking.py), exactly.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from bench.config.settings import resolve_sinkprop_section
from bench.data import load_prepared
from bench.data.resample import resample_queries
from bench.errors import ConfigError
from bench.losses.sinkprop import shortcut_hungarian, sinkprop
from bench.metrics import evaluate, summarize
from bench.training import sinkprop_protocol as sp
from bench.training.cli import run_job
from bench.training.linear import predict, ridge_path
from helpers import make_letor_fold, make_prepared

METRICS = ["ndcg@1", "ndcg@10"]
SMALL = {"derived_queries": 20, "max_derived_size": 200, "init_penalties": [0.0], "penalties": [0.01, 1.0],
         "sigma_start": 1.0, "sigma_factor": 2.0, "stages": 3, "lbfgs_iterations": 4, "lbfgs_history": 5,
         "patience": None}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    # positive label weights (psi_loc) so that a linear scorer can learn the labels
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1", psi_loc=2.0)


def _config(**proto) -> dict:
    return {
        "model": {"type": "mlp", "hidden": [], "batch_norm": False, "dropout": 0.0},
        "train": {"early_stopping_metric": "ndcg@10"},
        "metrics": {"names": METRICS, "empty_query": "one", "ties": "stable"},
        "methods": {"sinkprop": {"loss": "sinkprop"}, "listnet": {"loss": "listnet"}},
        "sinkprop_protocol": {**SMALL, **proto},
    }


# ----------------------------------------------------------------------------- resampling


def test_derived_sizes_are_poisson_with_the_query_size_as_mean():
    n, draws = 12, 40000
    d = resample_queries(np.array([0, n]), draws, 200, np.random.default_rng(0))
    sizes = d.sizes
    assert sizes.shape == (draws,)
    law = stats.poisson(n)
    edges = np.arange(3, 23)  # cells: <= 3, 4 .. 22, >= 23
    observed = np.array([(sizes <= 3).sum(), *[(sizes == k).sum() for k in edges[1:]], (sizes >= 23).sum()])
    expected = draws * np.array([law.cdf(3), *law.pmf(edges[1:]), law.sf(22)])
    assert observed.sum() == draws and np.isclose(expected.sum(), draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert abs(sizes.mean() - n) < 4 * np.sqrt(n / draws)


def test_sizes_are_capped_at_max_size_with_the_poisson_tail_mass():
    n, draws, cap = 210, 20000, 200
    d = resample_queries(np.array([0, n]), draws, cap, np.random.default_rng(1))
    assert d.sizes.max() == cap and d.sizes.min() > 0
    p = stats.poisson(n).sf(cap - 1)  # P(N >= cap): every such draw becomes exactly cap
    assert abs((d.sizes == cap).mean() - p) < 4 * np.sqrt(p * (1 - p) / draws)
    np.testing.assert_array_equal(np.diff(d.offsets), d.sizes)


def test_documents_are_drawn_uniformly_with_replacement_from_their_own_query():
    offsets = np.array([0, 5, 9, 9, 40])
    d = resample_queries(offsets, 2000, 200, np.random.default_rng(2))
    lens = np.diff(d.offsets)
    lo = np.repeat(offsets[d.parent], lens)
    hi = np.repeat(offsets[d.parent + 1], lens)
    assert np.all((d.doc_index >= lo) & (d.doc_index < hi))
    assert 2 not in set(d.parent.tolist())  # the empty query yields no derived query
    first = d.doc_index[np.repeat(d.parent, lens) == 0]
    counts = np.bincount(first, minlength=5)
    assert stats.chisquare(counts).pvalue > 1e-3  # uniform over the query's 5 documents
    # with replacement: some derived query of query 0 repeats a document
    starts = d.offsets[:-1][d.parent == 0]
    assert any(len(set(d.doc_index[s:e].tolist())) < e - s for s, e in zip(starts, starts + lens[d.parent == 0]))


def test_size_zero_draws_yield_no_derived_query():
    draws = 20000
    d = resample_queries(np.array([0, 1]), draws, 200, np.random.default_rng(3))
    zeros = (d.sizes == 0).mean()
    p0 = np.exp(-1.0)
    assert abs(zeros - p0) < 4 * np.sqrt(p0 * (1 - p0) / draws)
    assert d.n_queries == int((d.sizes > 0).sum()) and np.all(np.diff(d.offsets) > 0)


def test_resampling_is_deterministic_given_the_seed():
    offsets = np.array([0, 7, 30, 31])
    a, b = (resample_queries(offsets, 20, 200, np.random.default_rng(9)) for _ in range(2))
    c = resample_queries(offsets, 20, 200, np.random.default_rng(10))
    for name in ("sizes", "doc_index", "offsets", "parent"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.doc_index, c.doc_index)


# ----------------------------------------------------------------------------- objective and schedule


def test_regulariser_gradient_matches_finite_differences():
    w0 = torch.randn(6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = (w0 + 0.3).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda v: sp.regulariser(v, w0, 0.7), (w,), eps=1e-6, atol=1e-8)
    sp.regulariser(w, w0, 0.7).backward()
    torch.testing.assert_close(w.grad, 2 * 0.7 * (w.detach() - w0), rtol=0, atol=1e-15)


def _objective(prepared, penalty=0.3, sigma=0.8):
    train = load_prepared(prepared).splits["train"]
    derived = resample_queries(np.asarray(train.offsets), 3, 200, np.random.default_rng(0))
    chunks = sp.derived_chunks(train.features, train.labels, derived, torch.device("cpu"))
    w0 = torch.from_numpy(ridge_path(train.features, train.labels).coefficients(0.0)[0])
    return sp.Objective(sinkprop, chunks, w0, 0.1, penalty, sigma), train, derived


def test_full_batch_objective_gradient_matches_finite_differences(prepared):
    obj, _, _ = _objective(prepared)
    w = (obj.w0 + 0.05 * torch.arange(obj.w0.numel(), dtype=torch.float64)).requires_grad_(True)
    obj.evaluate(w, backward=True)
    grad, h = w.grad.clone(), 1e-6
    numeric = torch.zeros_like(grad)
    with torch.no_grad():
        for i in range(w.numel()):
            e = torch.zeros_like(grad)
            e[i] = h
            numeric[i] = (obj.evaluate(w + e, backward=False) - obj.evaluate(w - e, backward=False)) / (2 * h)
    torch.testing.assert_close(grad, numeric, rtol=1e-6, atol=1e-9)


def test_chunked_objective_equals_one_unchunked_batch(prepared, monkeypatch):
    """Many small chunks (weighted by their share of lists) give the mean over all lists."""
    monkeypatch.setattr(sp, "CHUNK_ENTRIES", 500)
    obj, train, derived = _objective(prepared, penalty=0.0)
    assert len(obj.chunks) > 5
    w = obj.w0.clone()
    with torch.no_grad():
        value = obj.evaluate(w, backward=False)
    # reference: every contributing derived query in one padded batch, by hand
    labels = np.asarray(train.labels, dtype=np.float64)
    x = torch.from_numpy(np.asarray(train.features, dtype=np.float64))
    lists = [derived.doc_index[s:e] for s, e in zip(derived.offsets[:-1], derived.offsets[1:])]
    lists = [ix for ix in lists if ix.size >= 2 and labels[ix].max() > 0]
    length = max(ix.size for ix in lists)
    scores = torch.zeros(len(lists), length, dtype=torch.float64)
    y = torch.zeros_like(scores)
    mask = torch.zeros(len(lists), length, dtype=torch.bool)
    for r, ix in enumerate(lists):
        scores[r, : ix.size] = x[ix] @ w + 0.1
        y[r, : ix.size] = torch.from_numpy(labels[ix])
        mask[r, : ix.size] = True
    assert sum(c.mask.shape[0] for c in obj.chunks) == len(lists)
    assert abs(value - float(sinkprop(scores, y, mask, sigma=obj.sigma))) <= 1e-12


def test_sigma_schedule_is_scaled_by_the_initialisers_within_query_variance(prepared, tmp_path):
    assert sp.sigma_schedule(2.0, 2.0, 3, scale=0.5) == [1.0, 0.5, 0.25]
    assert sp.sigma_schedule(1.0, 3.0, 2) == [1.0, 1.0 / 3.0]
    out = run_job(_config(sigma_start=1.5, sigma_factor=3.0), prepared, tmp_path / "run", method="sinkprop",
                    seed=0, device="cpu", quiet=True)
    res = json.loads((out / "run.json").read_text())["result"]
    train = load_prepared(prepared).splits["train"]
    w, b = ridge_path(train.features, train.labels).coefficients(0.0)
    s, off = predict(train.features, w, b), np.asarray(train.offsets)
    v = np.mean([np.var(s[a:z]) for a, z in zip(off[:-1], off[1:]) if z - a >= 2])  # by hand, query by query
    np.testing.assert_allclose(res["sigma_scale"], v, rtol=1e-12)
    np.testing.assert_allclose(res["sigmas"], [1.5 * v, 1.5 * v / 3, 1.5 * v / 9], rtol=1e-12)
    curve = pd.read_csv(out / "curve.csv")
    np.testing.assert_allclose(curve["sigma"].dropna().to_numpy(), res["sigmas"] * 2, rtol=1e-12)


# ----------------------------------------------------------------------------- the run


def test_init_is_the_least_squares_fit_and_a_huge_penalty_keeps_it(prepared, tmp_path):
    out = run_job(_config(penalties=[1e9], stages=2), prepared, tmp_path / "run", method="sinkprop", seed=0,
                    device="cpu", quiet=True)
    info = json.loads((out / "run.json").read_text())
    res = info["result"]
    fold = load_prepared(prepared)
    train, vali = fold.splits["train"], fold.splits["vali"]
    a = np.c_[np.asarray(train.features, dtype=np.float64), np.ones(train.n_docs)]
    ref = np.linalg.lstsq(a, np.asarray(train.labels, dtype=np.float64), rcond=None)[0]
    np.testing.assert_allclose(res["weights"], ref[:-1], rtol=0, atol=1e-6)  # pinned by lambda = 1e9
    assert abs(res["intercept"] - ref[-1]) <= 1e-8  # the intercept is the initialiser's, exactly
    frame = evaluate(predict(vali.features, ref[:-1], ref[-1]).astype(np.float32), np.asarray(vali.labels),
                     np.asarray(vali.offsets), ["ndcg@10"])
    assert abs(res["init"]["vali"] - summarize(frame)["ndcg@10"]) <= 1e-6
    assert info["kind"] == "sinkprop_protocol" and info["protocol"]["sinkprop_protocol"]["penalties"] == [1e9]


def test_a_short_run_is_never_worse_than_its_initialiser_on_validation(prepared, tmp_path):
    out = run_job(_config(test_ranking="scores"), prepared, tmp_path / "run", method="sinkprop", seed=0, device="cpu",
                  quiet=True)
    info = json.loads((out / "run.json").read_text())
    res = info["result"]
    assert res["best_vali"] >= res["init"]["vali"] and all(v >= res["init"]["vali"] for v in res["vali_by_penalty"])
    assert res["penalty"] == SMALL["penalties"][int(np.argmax(res["vali_by_penalty"]))]
    # the chosen weights are graded as recorded, and they score the test split
    fold = load_prepared(prepared)
    vali, test = fold.splits["vali"], fold.splits["test"]
    w = np.array(res["weights"])
    frame = evaluate(predict(vali.features, w, res["intercept"]).astype(np.float32), np.asarray(vali.labels),
                     np.asarray(vali.offsets), ["ndcg@10"])
    assert summarize(frame)["ndcg@10"] == res["best_vali"]
    np.testing.assert_array_equal(np.load(out / "scores.npy"),
                                  predict(test.features, w, res["intercept"]).astype(np.float32))
    curve = pd.read_csv(out / "curve.csv")
    assert curve["stage"].tolist() == [0, 1, 2, 3, 1, 2, 3]
    assert curve["vali_ndcg@10"].max() == res["best_vali"]
    assert res["derived_queries"]["drawn"] == 20 * train_queries(fold)
    assert 0 < res["derived_queries"]["used"] <= res["derived_queries"]["non_empty"] <= res["derived_queries"]["drawn"]
    # training-only timing: each function evaluation and each stage's closing evaluation is one
    # pass over the derived documents; an epoch is a stage (6 here)
    passes = sum(res["function_evaluations_by_penalty"]) + 6
    assert info["train_docs"] == res["derived_queries"]["documents"] * passes
    assert 0 < info["train_seconds"] < info["wall_time_s"]
    assert info["seconds_per_epoch"] * 6 == pytest.approx(info["train_seconds"], rel=1e-9)
    assert info["train_seconds"] < curve["seconds"].sum()  # a stage's seconds include its grading


def train_queries(fold) -> int:
    return fold.splits["train"].n_queries


def test_patience_stops_a_penalty_after_stages_without_improvement(prepared, tmp_path):
    out = run_job(_config(penalties=[1e9], stages=4, patience=1), prepared, tmp_path / "run", method="sinkprop",
                    seed=0, device="cpu", quiet=True)
    curve = pd.read_csv(out / "curve.csv")
    assert curve["stage"].tolist() == [0, 1]  # lambda = 1e9 cannot move: no stage improves


def test_reruns_are_bit_identical_on_cpu(prepared, tmp_path):
    outs = [run_job(_config(), prepared, tmp_path / f"r{i}", method="sinkprop", seed=3, device="cpu", quiet=True)
            for i in range(2)]
    for name in ("scores.npy", "metrics.parquet"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    a, b = (pd.read_csv(o / "curve.csv").drop(columns="seconds") for o in outs)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    other = run_job(_config(), prepared, tmp_path / "seed4", method="sinkprop", seed=4, device="cpu", quiet=True)
    assert (other / "scores.npy").read_bytes() != (outs[0] / "scores.npy").read_bytes()  # the seed resamples


# ----------------------------------------------------------------------------- test-time ranking


def by_hand_hungarian(features, offsets, res: dict) -> np.ndarray:
    """Minus the 1-based short-cut Hungarian rank of every document, one query at a time."""
    tr = res["test_ranking"]
    s = predict(features, np.array(res["weights"]), res["intercept"]).astype(np.float32).astype(np.float64)
    out = np.empty(s.size)
    for a, z in zip(offsets[:-1], offsets[1:]):
        one = torch.from_numpy(s[a:z])[None, :]
        order = shortcut_hungarian(one, torch.ones_like(one, dtype=torch.bool), sigma=tr["sigma"], top=tr["top"],
                                   n_iter=tr["n_iter"], eps=tr["eps"])[0]
        out[a + order] = -np.arange(1.0, z - a + 1)
    return out.astype(np.float32)


@pytest.fixture(scope="module")
def both_rankings(prepared, tmp_path_factory):
    """The same training ranked both ways: the default (short-cut Hungarian, top 10) and by the scores."""
    tmp = tmp_path_factory.mktemp("rankings")
    cfg = _config(stages=2, penalties=[0.01])
    cfg["methods"]["sinkprop"]["params"] = {"eps": 0.05, "n_iter": 3}  # the test-time matrix takes the loss's
    return {name: run_job({**cfg, "sinkprop_protocol": {**cfg["sinkprop_protocol"], **extra}}, prepared,
                          tmp / name, method="sinkprop", seed=0, device="cpu", quiet=True)
            for name, extra in (("default", {}), ("scores", {"test_ranking": "scores"}),
                                ("exact", {"ranking_top": None}))}


def test_the_default_test_ranking_is_the_short_cut_hungarian_one_on_the_chosen_weights(prepared, both_rankings):
    out = both_rankings["default"]
    res = json.loads((out / "run.json").read_text())["result"]
    tr = res["test_ranking"]
    assert (tr["used"], tr["top"], tr["n_iter"], tr["eps"]) == ("shortcut_hungarian", 10, 3, 0.05)
    assert tr["sigma"] == res["sigmas"][max(res["best_stage"], 1) - 1]
    test = load_prepared(prepared).splits["test"]
    offsets = np.asarray(test.offsets)
    scores = np.load(out / "scores.npy")
    np.testing.assert_array_equal(scores, by_hand_hungarian(test.features, offsets, res))
    frame = evaluate(scores, np.asarray(test.labels), offsets, METRICS)
    metrics = pd.read_parquet(out / "metrics.parquet")
    np.testing.assert_array_equal(metrics["ndcg@10"].to_numpy(), frame["ndcg@10"].to_numpy())
    assert res["test_means"] == tr["test_means"]["shortcut_hungarian"] == summarize(frame, METRICS)
    linear = predict(test.features, np.array(res["weights"]), res["intercept"]).astype(np.float32)
    assert tr["test_means"]["scores"] == summarize(evaluate(linear, np.asarray(test.labels), offsets, METRICS), METRICS)
    ranks = [np.argsort(np.argsort(-linear[a:z], kind="stable")) for a, z in zip(offsets[:-1], offsets[1:])]
    differ = sum(not np.array_equal(r, -scores[a:z] - 1) for r, a, z in zip(ranks, offsets[:-1], offsets[1:]))
    assert tr["queries_reordered"] == differ


def test_ranking_by_the_scores_keeps_the_linear_scores_and_records_the_same_two_means(prepared, both_rankings):
    runs = {n: json.loads((o / "run.json").read_text())["result"] for n, o in both_rankings.items()}
    assert runs["scores"]["weights"] == runs["default"]["weights"]  # the ranking never touches training
    assert runs["scores"]["test_ranking"]["test_means"] == runs["default"]["test_ranking"]["test_means"]
    assert runs["scores"]["test_means"] == runs["scores"]["test_ranking"]["test_means"]["scores"]
    test = load_prepared(prepared).splits["test"]
    linear = predict(test.features, np.array(runs["scores"]["weights"]), runs["scores"]["intercept"])
    np.testing.assert_array_equal(np.load(both_rankings["scores"] / "scores.npy"), linear.astype(np.float32))


def test_the_exact_assignment_over_whole_lists_ranks_as_the_scores(both_rankings):
    """``ranking_top: null``: under Sec. 4.2's matrix the exact Eq. (5) permutation is the score order."""
    res = json.loads((both_rankings["exact"] / "run.json").read_text())["result"]
    tr = res["test_ranking"]
    assert tr["top"] is None and tr["queries_reordered"] == 0
    assert tr["test_means"]["shortcut_hungarian"] == tr["test_means"]["scores"]


def test_hungarian_scores_batch_equals_one_query_at_a_time(monkeypatch):
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 60, size=40)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    s = rng.standard_cauchy(size=int(offsets[-1])).astype(np.float32).astype(np.float64)
    settings = {"sigma": 0.5, "top": 4, "n_iter": 5, "eps": 0.1}
    monkeypatch.setattr(sp, "CHUNK_ENTRIES", 3000)  # many chunks and bins
    got = sp.hungarian_scores(s, offsets, settings, torch.device("cpu"))
    res = {"test_ranking": settings, "weights": [1.0], "intercept": 0.0}
    np.testing.assert_array_equal(got, by_hand_hungarian(s[:, None], offsets, res))
    assert (got != -sp.rank_within(s, offsets)).any()  # eps = 0.1 on heavy tails: some tails reorder


def test_config_errors_name_the_key(prepared, tmp_path):
    with pytest.raises(ConfigError, match=r"sinkprop_protocol\.stages': 0 is less than the minimum of 1"):
        resolve_sinkprop_section({"stages": 0})
    with pytest.raises(ConfigError, match=r"sinkprop_protocol\.penalties\.0': -1.0 is less than the minimum of 0"):
        resolve_sinkprop_section({"penalties": [-1.0]})
    with pytest.raises(ConfigError, match=r"sinkprop_protocol\.test_ranking': 'mode' is not one of"):
        resolve_sinkprop_section({"test_ranking": "mode"})
    with pytest.raises(ConfigError, match=r"sinkprop_protocol\.ranking_top': 0 is less than the minimum of 1"):
        resolve_sinkprop_section({"ranking_top": 0})
    with pytest.raises(ConfigError, match=r"sinkprop_protocol\.derived_query': unknown key"):
        resolve_sinkprop_section({"derived_query": 3})
    with pytest.raises(ConfigError, match=r"^config key 'model': the SinkProp protocol trains a linear scorer"):
        run_job({**_config(), "model": {"type": "mlp", "hidden": [8]}}, prepared, tmp_path / "a",
                  method="sinkprop", seed=0, device="cpu", quiet=True)
    with pytest.raises(ConfigError, match=r"methods\.listnet\.loss: the SinkProp protocol anneals 'sigma'"):
        run_job(_config(), prepared, tmp_path / "b", method="listnet", seed=0, device="cpu", quiet=True)
    cfg = _config()
    cfg["methods"]["sinkprop"]["params"] = {"sigma": 0.5}
    with pytest.raises(ConfigError, match=r"methods\.sinkprop\.params\.sigma: set by the SinkProp protocol"):
        run_job(cfg, prepared, tmp_path / "c", method="sinkprop", seed=0, device="cpu", quiet=True)
    assert not any((tmp_path / n).exists() for n in "abc")


def test_letor_fixture_run_is_graded_and_stopped_under_the_letor4_convention(tmp_path):
    """Validation (the initialiser's score, early stopping) and test use the dataset's convention."""
    fold = make_letor_fold(tmp_path / "letor")
    cfg = _config(stages=2, penalties=[0.1])
    cfg["metrics"] = {"names": ["ndcg@10", "map"], "empty_query": "one", "ties": "stable", "convention": "letor4"}
    out = run_job(cfg, fold, tmp_path / "run", method="sinkprop", seed=0, device="cpu", quiet=True)
    res = json.loads((out / "run.json").read_text())["result"]
    vali = load_prepared(fold).splits["vali"]
    train = load_prepared(fold).splits["train"]
    w, b = ridge_path(train.features, train.labels).coefficients(0.0)
    graded = {c: summarize(evaluate(predict(vali.features, w, b).astype(np.float32), np.asarray(vali.labels),
                                    np.asarray(vali.offsets), ["ndcg@10"], convention=c))["ndcg@10"]
              for c in ("letor4", "default")}
    assert graded["letor4"] != graded["default"]  # the fixture's queries without relevant documents differ
    assert res["init"]["vali"] == graded["letor4"] and res["best_vali"] >= graded["letor4"]
    assert (pd.read_parquet(out / "metrics.parquet")["convention"] == "letor4").all()
    # both test rankings are graded under it too
    test = load_prepared(fold).splits["test"]
    for name, means in res["test_ranking"]["test_means"].items():
        scores = (predict(test.features, np.array(res["weights"]), res["intercept"]).astype(np.float32)
                  if name == "scores" else by_hand_hungarian(test.features, np.asarray(test.offsets), res))
        frame = evaluate(scores, np.asarray(test.labels), np.asarray(test.offsets), ["ndcg@10", "map"],
                         convention="letor4")
        assert means == summarize(frame, ["ndcg@10", "map"])
