"""prepare_fold / load_prepared: layout, cache reuse and invalidation, atomicity, options.

Oracles: the parsed text (sklearn-equal reader) for stored arrays; numpy formulas computed
here independently for each normalisation (tolerance 1e-5 relative, float32 storage);
counting in plain Python for the ARF filter's guarantees.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from bench.cli import main as cli_main
from bench.data import load_prepared, prepare_fold, read_svmlight
from bench.data import prepared as prepared_mod


def _write_svm(path, X, y, qid):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{int(y[i])} qid:{qid[i]} " + " ".join(f"{j + 1}:{float(X[i, j])!r}" for j in range(X.shape[1]))
             for i in range(X.shape[0])]
    path.write_text("\n".join(lines) + "\n")


def _random_split(rng, n_queries, n_features=6, lengths=(1, 12), pos_rate=0.4):
    L = rng.integers(lengths[0], lengths[1] + 1, n_queries)
    qid = np.repeat(np.arange(1, n_queries + 1) * 3, L)
    X = np.round(rng.lognormal(0, 2, (qid.size, n_features)), 4)
    X[:, 0] = np.round(rng.normal(size=qid.size), 4)  # one signed column
    y = (rng.random(qid.size) < pos_rate) * rng.integers(1, 5, qid.size)
    return X, y, qid


@pytest.fixture
def mslr_raw(tmp_path, rng):
    """A hand-extracted MSLR tree under raw/mslr-web30k/extracted/Fold1 (136 dense features)."""
    root = tmp_path / "raw" / "mslr-web30k" / "extracted" / "Fold1"
    for split, nq in (("train", 30), ("vali", 8), ("test", 9)):
        _write_svm(root / f"{split}.txt", *_random_split(rng, nq, n_features=136))
    return tmp_path / "raw"


def test_layout_matches_contract_and_parsed_text(mslr_raw, tmp_path):
    out = tmp_path / "prep" / "mslr-web30k" / "Fold1"
    fold = prepare_fold("mslr-web30k", "fold1", out, raw_dir=mslr_raw, log=lambda m: None)
    assert fold.meta["fold"] == "Fold1" and fold.n_features == 136
    for split in ("train", "vali", "test"):
        X, y, q = read_svmlight(mslr_raw / "mslr-web30k" / "extracted" / "Fold1" / f"{split}.txt")
        sp = fold.splits[split]
        assert isinstance(sp.features, np.memmap)
        assert sp.features.dtype == np.float32 and sp.labels.dtype == np.float32
        assert sp.qids.dtype == np.int64 and sp.offsets.dtype == np.int64
        np.testing.assert_array_equal(sp.features, X)
        np.testing.assert_array_equal(sp.labels, y)
        np.testing.assert_array_equal(np.repeat(sp.qids, np.diff(sp.offsets)), q)
        assert sp.offsets[0] == 0 and sp.offsets[-1] == len(y) and sp.n_queries == len(np.unique(q))
        info = fold.meta["splits"][split]
        assert info["n_docs"] == len(y) and info["n_queries"] == sp.n_queries
    # sources are identified by the sha256 of the files
    train = mslr_raw / "mslr-web30k" / "extracted" / "Fold1" / "train.txt"
    assert fold.meta["sources"]["train"]["sha256"] == hashlib.sha256(train.read_bytes()).hexdigest()
    # fingerprint = sha256 over the stored arrays
    fold.verify()
    assert fold.fingerprint == load_prepared(out).fingerprint
    stats = fold.meta["train_feature_stats"]
    Xtr = np.asarray(fold.splits["train"].features, dtype=np.float64)
    np.testing.assert_allclose(stats["mean"], Xtr.mean(0), rtol=1e-9)
    np.testing.assert_allclose(stats["max"], Xtr.max(0))


def test_cache_reuse_and_invalidation(mslr_raw, tmp_path, monkeypatch):
    out = tmp_path / "p"
    first = prepare_fold("mslr-web30k", "Fold1", out, raw_dir=mslr_raw, log=lambda m: None)
    calls = []
    import bench.data.svmlight as svmlight  # prepare imports the parser when it parses a file

    real = svmlight.read_svmlight
    monkeypatch.setattr(svmlight, "read_svmlight", lambda *a, **k: calls.append(a) or real(*a, **k))
    again = prepare_fold("mslr-web30k", "Fold1", out, raw_dir=mslr_raw, log=lambda m: None)
    assert calls == [] and again.fingerprint == first.fingerprint
    # options change -> rebuilt
    z = prepare_fold("mslr-web30k", "Fold1", out, {"normalize": "zscore"}, raw_dir=mslr_raw,
                     log=lambda m: None)
    assert len(calls) == 3 and z.fingerprint != first.fingerprint
    # the same options spelled with defaults -> same key, reused
    prepare_fold("mslr-web30k", "Fold1", out, {"normalize": "zscore", "seed": 0}, raw_dir=mslr_raw,
                 log=lambda m: None)
    assert len(calls) == 3
    # input change -> rebuilt
    test = mslr_raw / "mslr-web30k" / "extracted" / "Fold1" / "test.txt"
    test.write_text(test.read_text() + "0 qid:999999 1:1\n")
    changed = prepare_fold("mslr-web30k", "Fold1", out, {"normalize": "zscore"}, raw_dir=mslr_raw,
                           log=lambda m: None)
    assert len(calls) == 6 and changed.meta["splits"]["test"]["n_queries"] == \
        z.meta["splits"]["test"]["n_queries"] + 1
    # --force rebuilds
    prepare_fold("mslr-web30k", "Fold1", out, {"normalize": "zscore"}, raw_dir=mslr_raw,
                 force=True, log=lambda m: None)
    assert len(calls) == 9


def test_failed_prepare_leaves_previous_cache_intact(mslr_raw, tmp_path, monkeypatch):
    out = tmp_path / "p"
    good = prepare_fold("mslr-web30k", "Fold1", out, raw_dir=mslr_raw, log=lambda m: None)
    before = sorted(p.name for p in tmp_path.iterdir())

    def boom(*a, **k):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(prepared_mod, "save_npy", boom)  # the writer of the arrays
    with pytest.raises(OSError, match="simulated"):
        prepare_fold("mslr-web30k", "Fold1", out, {"normalize": "zscore"}, raw_dir=mslr_raw,
                     log=lambda m: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no temporary left over
    assert load_prepared(out).fingerprint == good.fingerprint
    with pytest.raises(OSError):
        prepare_fold("mslr-web30k", "Fold1", tmp_path / "fresh", raw_dir=mslr_raw, log=lambda m: None)
    assert not (tmp_path / "fresh").exists()


def test_half_written_or_damaged_cache_is_rejected(mslr_raw, tmp_path):
    out = tmp_path / "p"
    prepare_fold("mslr-web30k", "Fold1", out, raw_dir=mslr_raw, log=lambda m: None)
    (out / "vali" / "labels.npy").unlink()
    with pytest.raises(ValueError, match=r"vali/labels\.npy: missing \(its digest is recorded\); rebuild it"):
        load_prepared(out)
    with pytest.raises(ValueError, match=r"vali/labels\.npy: cannot open"):
        load_prepared(out, check=False)
    rebuilt = prepare_fold("mslr-web30k", "Fold1", out, raw_dir=mslr_raw, log=lambda m: None)
    rebuilt.verify()
    np.save(out / "test" / "labels.npy", np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"test/labels\.npy: contents changed since it was written"):
        load_prepared(out)
    with pytest.raises(ValueError, match=r"test/labels\.npy: shape \(3,\), meta\.json says"):
        load_prepared(out, check=False)
    with pytest.raises(FileNotFoundError, match="meta.json: missing"):
        load_prepared(tmp_path / "nothing")


def test_normalisations_against_numpy(tmp_path, rng):
    files = {}
    for split, nq in (("train", 40), ("vali", 10), ("test", 10)):
        files[split] = tmp_path / f"{split}.txt"
        _write_svm(files[split], *_random_split(rng, nq))
    raw = {s: read_svmlight(p)[0].astype(np.float64) for s, p in files.items()}
    qids = {s: read_svmlight(p)[2] for s, p in files.items()}

    def run(opts):
        return prepare_fold("toy", "Fold1", tmp_path / json.dumps(opts, sort_keys=True), opts,
                            files=files, log=lambda m: None)

    z = run({"normalize": "zscore"})
    mu, sd = raw["train"].mean(0), raw["train"].std(0)
    for s in files:
        np.testing.assert_allclose(z.splits[s].features, (raw[s] - mu) / sd, rtol=1e-4, atol=1e-5)
    lz = run({"normalize": "log1p_zscore"})
    cols = np.asarray(lz.meta["normalization"]["log1p_columns"]) - 1
    assert 0 not in cols and len(cols) >= 3  # the signed column is never log-transformed
    t = {s: v.copy() for s, v in raw.items()}
    for s in t:
        t[s][:, cols] = np.log1p(np.maximum(t[s][:, cols], 0))
    mu, sd = t["train"].mean(0), t["train"].std(0)
    np.testing.assert_allclose(lz.splits["test"].features, (t["test"] - mu) / sd, rtol=1e-4, atol=1e-5)
    sl = run({"normalize": "signlog1p"})
    np.testing.assert_allclose(sl.splits["vali"].features,
                               np.sign(raw["vali"]) * np.log1p(np.abs(raw["vali"])), rtol=1e-6)
    qm = run({"normalize": "query_minmax"})
    for s in files:
        x, q = raw[s], qids[s]
        exp = np.empty_like(x)
        for v in np.unique(q):  # plain per-query loop as the oracle
            b = x[q == v]
            span = b.max(0) - b.min(0)
            exp[q == v] = np.where(span > 0, (b - b.min(0)) / np.where(span > 0, span, 1), 0)
        np.testing.assert_allclose(qm.splits[s].features, exp, rtol=1e-5, atol=1e-6)


def test_clip_handles_dbl_max_and_normalising_inf_is_an_error(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("1 qid:1 1:1.79769313486e+308 2:1\n0 qid:1 1:2 2:-1.79769313486e+308\n")
    test = tmp_path / "test.txt"
    test.write_text("1 qid:2 1:3 2:1\n")
    files = {"train": train, "vali": train, "test": test}
    with pytest.raises(ValueError, match="non-finite features.*set option 'clip'"):
        prepare_fold("t", "Fold1", tmp_path / "a", {"normalize": "zscore"}, files=files,
                     log=lambda m: None)
    f = prepare_fold("t", "Fold1", tmp_path / "b", {"clip": 1e6}, files=files, log=lambda m: None)
    assert np.asarray(f.splits["train"].features).tolist() == [[1e6, 1.0], [2.0, -1e6]]


def test_istella_validation_is_carved_from_train(tmp_path, rng):
    root = tmp_path / "raw" / "istella" / "extracted" / "full"
    _write_svm(root / "train.txt", *_random_split(rng, 80, n_features=220, lengths=(1, 4)))
    _write_svm(root / "test.txt", *_random_split(rng, 20, n_features=220, lengths=(1, 4)))
    f = prepare_fold("istella", "Fold1", tmp_path / "p", raw_dir=tmp_path / "raw", log=lambda m: None)
    tr, va = f.splits["train"], f.splits["vali"]
    assert va.n_queries == 20 and tr.n_queries == 60 and f.meta["vali_carved_from_train"]
    assert not set(tr.qids.tolist()) & set(va.qids.tolist())
    X, _, q = read_svmlight(root / "train.txt")
    rows = np.isin(q, va.qids)
    np.testing.assert_array_equal(va.features, X[rows])
    g = prepare_fold("istella", "Fold1", tmp_path / "p2", {"seed": 1}, raw_dir=tmp_path / "raw",
                     log=lambda m: None)
    assert set(g.splits["vali"].qids.tolist()) != set(va.qids.tolist())  # seeded, not fixed
    h = prepare_fold("istella", "Fold1", tmp_path / "p3", raw_dir=tmp_path / "raw", log=lambda m: None)
    np.testing.assert_array_equal(h.splits["vali"].qids, va.qids)  # same seed, same carve


def test_arf_filter(tmp_path, rng):
    L = np.array([30, 41, 60, 150, 200, 201, 500, 700, 45])
    n_pos = np.array([30, 20, 14, 15, 80, 16, 15, 200, 40])
    qid = np.repeat(np.arange(1, L.size + 1), L)
    y = np.concatenate([rng.permutation(np.r_[rng.integers(1, 5, p), np.zeros(n - p)])
                        for n, p in zip(L, n_pos)])
    X = np.arange(qid.size, dtype=np.float64)[:, None] * np.ones((1, 3))  # row id in every column
    files = {s: tmp_path / f"{s}.txt" for s in ("train", "vali", "test")}
    for p in files.values():
        _write_svm(p, X, y, qid)
    for replace in (True, False):
        f = prepare_fold("t", "Fold1", tmp_path / str(replace),
                         {"arf_filter": True, "arf_replace": replace}, files=files, log=lambda m: None)
        sp = f.splits["test"]
        # kept: > 40 docs and >= 15 positives; 30 docs, 14 positives are dropped
        assert sp.qids.tolist() == [2, 4, 5, 6, 7, 8, 9]
        lengths = np.diff(sp.offsets).tolist()
        assert lengths == [41, 150, 200, 200, 200, 200, 45]
        rows = np.asarray(sp.features[:, 0]).astype(np.int64)
        labels = np.asarray(sp.labels)
        for k in range(sp.n_queries):
            r = rows[sp.offsets[k]:sp.offsets[k + 1]]
            assert np.all(np.diff(r) >= 0)  # file order kept
            assert np.all(qid[r] == sp.qids[k])  # documents of that query only
            assert len(np.unique(r[labels[sp.offsets[k]:sp.offsets[k + 1]] > 0])) >= 15
            if not replace:
                assert len(np.unique(r)) == len(r)
        np.testing.assert_array_equal(labels, y[rows])
    # only the requested splits are filtered
    g = prepare_fold("t", "Fold1", tmp_path / "trainonly", {"arf_filter": True, "arf_splits": ["train"]},
                     files=files, log=lambda m: None)
    assert g.splits["test"].n_queries == L.size and g.splits["train"].n_queries == 7


@pytest.mark.parametrize("opts, fragment", [
    ({"normalise": "zscore"}, r"unknown option key\(s\) \['normalise'\]"),
    ({"normalize": "l2"}, "option 'normalize' must be one of"),
    ({"clip": -1}, "option 'clip'"),
    ({"vali_fraction": 1.5}, "option 'vali_fraction'"),
    ({"arf_min_docs": "40"}, "option 'arf_min_docs'"),
    ({"log1p_columns": [0]}, "option 'log1p_columns'"),
    ({"arf_splits": ["dev"]}, "option 'arf_splits'"),
])
def test_bad_options_name_the_key(tmp_path, opts, fragment):
    files = {"train": tmp_path / "x.txt", "test": tmp_path / "x.txt"}
    with pytest.raises(ValueError, match=fragment):
        prepare_fold("t", "Fold1", tmp_path / "p", opts, files=files, log=lambda m: None)


def test_synthetic_prepare_layout_and_cache(tmp_path):
    opts = {"n_queries": 30, "list_length": [2, 20], "n_features": 10, "seed": 3,
            "normalize": "zscore"}
    f = prepare_fold("synthetic", "Fold1", tmp_path / "s", opts, log=lambda m: None)
    assert {s: f.splits[s].n_queries for s in f.splits} == {"train": 30, "vali": 10, "test": 10}
    assert f.n_features == 10 and f.meta["options"]["seed"] == 3
    # each split has its own draw
    assert not np.array_equal(f.splits["vali"].labels[:5], f.splits["test"].labels[:5])
    again = prepare_fold("synthetic", "Fold1", tmp_path / "s", opts, log=lambda m: None)
    assert again.fingerprint == f.fingerprint
    other = prepare_fold("synthetic", "Fold2", tmp_path / "s2", opts, log=lambda m: None)
    assert other.fingerprint != f.fingerprint
    with pytest.raises(ValueError, match="option 'n_features' is required"):
        prepare_fold("synthetic", "Fold1", tmp_path / "s3", {"n_queries": 3, "list_length": 3},
                     log=lambda m: None)


def test_cli_prepare(tmp_path, capsys):
    out = tmp_path / "prepared" / "synthetic" / "Fold1"
    opts = json.dumps({"n_queries": 12, "list_length": 5, "n_features": 8, "seed": 0})
    assert cli_main(["prepare", "synthetic", "--fold", "Fold1", "--out", str(out),
                     "--options", opts]) == 0
    assert "fingerprint" in capsys.readouterr().out and (out / "meta.json").exists()
    (tmp_path / "o.json").write_text(opts)
    assert cli_main(["prepare", "synthetic", "--fold", "Fold1", "--out", str(out),
                     "--options", f"@{tmp_path / 'o.json'}"]) == 0
    assert cli_main(["prepare", "synthetic", "--fold", "Fold1", "--out", str(out),
                     "--options", '{"bogus": 1}']) == 2
    assert "unknown option key(s) ['bogus']" in capsys.readouterr().err
    assert cli_main(["prepare", "nope", "--fold", "Fold1", "--out", str(out)]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert cli_main(["datasets", "--raw-dir", str(tmp_path / "raw"),
                     "--prepared-dir", str(tmp_path / "prepared")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("synthetic"))
    assert line.split()[1:4] == ["generated", "generated", "1"]  # obtain, archive, prepared folds


def test_a_sample_cut_at_a_line_count_drops_each_files_last_query(tmp_path, rng):
    """``mslr-web30k-sample`` (rankeval's first 5,000 lines of MSLR Fold1 train and test): the last
    query of each file may be cut, so it is dropped before validation is carved from train; the
    dropped query ids are in meta.json. Oracle: the parsed files minus their last query id."""
    root = tmp_path / "raw" / "mslr-web30k-sample" / "extracted" / "rankeval" / "test" / "data"
    _write_svm(root / "msn1.fold1.train.5k.txt", *_random_split(rng, 41, n_features=136, lengths=(2, 6)))
    _write_svm(root / "msn1.fold1.test.5k.txt", *_random_split(rng, 9, n_features=136, lengths=(2, 6)))
    f = prepare_fold("mslr-web30k-sample", "Fold1", tmp_path / "p", raw_dir=tmp_path / "raw", log=lambda m: None)
    _, _, q_train = read_svmlight(root / "msn1.fold1.train.5k.txt")
    _, _, q_test = read_svmlight(root / "msn1.fold1.test.5k.txt")
    assert f.meta["last_query_dropped"] == {"train": int(q_train[-1]), "test": int(q_test[-1])}
    assert f.splits["test"].qids.tolist() == sorted(set(q_test.tolist()) - {q_test[-1]})
    kept = set(f.splits["train"].qids.tolist()) | set(f.splits["vali"].qids.tolist())
    assert kept == set(q_train.tolist()) - {q_train[-1]} and f.meta["vali_carved_from_train"]
    assert (f.splits["train"].n_queries, f.splits["vali"].n_queries) == (30, 10)  # 0.25 of the 40 kept
