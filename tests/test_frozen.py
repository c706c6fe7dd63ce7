"""Frozen baselines: manifest contents and the three refusals (protocol, data, tampering)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bench import frozen as fz
from bench.config import plan
from bench.config import validate as cv
from bench.report.cli import compare_stats
from bench.results import write_frame
from bench.training import determinism


def _prepared(root: Path, fold: str, fingerprint: str) -> Path:
    d = root / fold
    d.mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"fold": fold, "fingerprint": fingerprint}))
    return d


def _per_query(methods, seeds=(0, 1), n=30, shift=None):
    rng = np.random.default_rng(7)
    rows = []
    base = rng.random(n)
    for i, method in enumerate(methods):
        for seed in seeds:
            value = np.clip(base + (shift or {}).get(method, 0.02 * i) + 0.01 * rng.standard_normal(n), 0, 1)
            rows.append(pd.DataFrame({"dataset": "syn", "fold": "Fold1", "seed": seed, "method": method,
                                      "query": np.arange(n), "ndcg@10": value, "ndcg@10:dropped": False}))
    return pd.concat(rows, ignore_index=True)


PROTOCOL = {"dataset": {"name": "syn", "options": {"n_queries": 10}}, "train": {"epochs": 3, "lr": 0.001},
            "seeds": [0, 1], "evaluation": {"empty_query": "one", "ties": "stable"}, "metrics": ["ndcg@10"]}


@pytest.fixture
def frozen(tmp_path):
    prepared = [_prepared(tmp_path / "prep", "Fold1", "f" * 64)]
    out = fz.freeze(_per_query(["ranknet", "listnet"]), tmp_path / "frozen" / "syn", profile="test",
                    dataset="syn", protocol=PROTOCOL, prepared_dirs=prepared)
    return out, prepared


def test_manifest_records_protocol_hash_fingerprints_versions_and_checksums(frozen):
    out, _ = frozen
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["protocol_hash"] == fz.protocol_hash(PROTOCOL)
    assert manifest["protocol"] == PROTOCOL
    assert manifest["dataset_fingerprints"] == {"Fold1": "f" * 64}
    assert manifest["methods"] == ["listnet", "ranknet"]
    assert {"git_commit", "git_dirty", "ltr-bench"} <= set(manifest["code_version"])
    assert {"torch", "numpy", "lightgbm"} <= set(manifest["versions"])
    assert sorted(manifest["files"]) == ["baselines/listnet.parquet", "baselines/ranknet.parquet"]
    for rel, digest in manifest["files"].items():
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest
    frame = fz.load_frozen(out, fz.check_frozen(out, PROTOCOL, {"Fold1": "f" * 64}))
    assert len(frame) == 2 * 2 * 30


def test_refuses_changed_protocol_naming_the_field(frozen):
    out, _ = frozen
    changed = json.loads(json.dumps(PROTOCOL))
    changed["train"]["epochs"] = 5
    with pytest.raises(fz.FrozenMismatch, match=r"train\.epochs: frozen 3, current 5"):
        fz.check_frozen(out, changed, {"Fold1": "f" * 64})
    changed = json.loads(json.dumps(PROTOCOL))
    changed["seeds"] = [0, 1, 2]
    with pytest.raises(fz.FrozenMismatch, match=r"seeds: frozen \[0, 1\], current \[0, 1, 2\]"):
        fz.check_frozen(out, changed, {"Fold1": "f" * 64})


def test_refuses_changed_data_naming_the_fold(frozen):
    out, _ = frozen
    with pytest.raises(fz.FrozenMismatch, match=r"dataset fingerprint of syn Fold1 differs: frozen f{64}, current 0{64}"):
        fz.check_frozen(out, PROTOCOL, {"Fold1": "0" * 64})
    with pytest.raises(fz.FrozenMismatch, match="fold Fold2 is prepared now but has no frozen baselines"):
        fz.check_frozen(out, PROTOCOL, {"Fold1": "f" * 64, "Fold2": "1" * 64})


def test_refuses_tampered_or_missing_file_naming_it(frozen):
    out, _ = frozen
    target = out / "baselines" / "ranknet.parquet"
    frame = pd.read_parquet(target)
    frame.loc[0, "ndcg@10"] = 1.0
    frame.to_parquet(target, index=False)
    with pytest.raises(fz.FrozenMismatch, match=r"ranknet\.parquet fails its checksum: manifest sha256 [0-9a-f]{64}, "):
        fz.check_frozen(out, PROTOCOL, {"Fold1": "f" * 64})
    target.unlink()
    with pytest.raises(fz.FrozenMismatch, match=r"ranknet\.parquet is missing"):
        fz.check_frozen(out, PROTOCOL, {"Fold1": "f" * 64})
    (out / "manifest.json").unlink()
    with pytest.raises(fz.FrozenMismatch, match="snakemake --cores 2 freeze"):
        fz.check_frozen(out, PROTOCOL, {"Fold1": "f" * 64})


def test_check_frozen_cli_refuses_with_the_reason(frozen, capsys):
    from bench.cli import main

    out, prepared = frozen
    changed = dict(PROTOCOL, metrics=["ndcg@5"])
    status = main(["check-frozen", "--frozen", str(out), "--protocol", json.dumps(changed),
                   "--prepared", *map(str, prepared)])
    assert status == 2
    assert "refusing to compare" in capsys.readouterr().err
    ok = out.parent / "ok.json"
    assert main(["check-frozen", "--frozen", str(out), "--protocol", json.dumps(PROTOCOL),
                 "--prepared", *map(str, prepared), "--out", str(ok)]) == 0
    assert json.loads(ok.read_text())["protocol_hash"] == fz.protocol_hash(PROTOCOL)


def test_compare_stats_pairs_new_loss_with_every_frozen_baseline(frozen):
    out, _ = frozen
    new = pd.concat([_per_query(["squared_hinge"], shift={"squared_hinge": 0.2}),
                     _per_query(["other"], shift={"other": 0.19})], ignore_index=True)
    spec = {"protocol": PROTOCOL, "metrics": ["ndcg@10"], "stats": {"n_boot": 0}}
    done = compare_stats(out, new, spec, {"Fold1": "f" * 64})
    assert done.new == ["squared_hinge", "other"]
    pairs = sorted(zip(done.baselines.method, done.baselines.reference))
    assert pairs == [("other", "listnet"), ("other", "ranknet"), ("squared_hinge", "listnet"),
                     ("squared_hinge", "ranknet")]
    assert set(done.baselines.family) == {"baselines"} and done.baselines.significant.all()
    assert list(zip(done.pairs.method, done.pairs.reference)) == [("squared_hinge", "other")]
    assert done.marks[done.marks.is_best].method.tolist() == ["squared_hinge"]
    with pytest.raises(fz.FrozenMismatch, match="clash"):
        compare_stats(out, _per_query(["ranknet"]), spec, {"Fold1": "f" * 64})


def test_study_protocol_hash_is_stable_across_key_order():
    cfg = cv.load_config()
    proto = plan.study_protocol(cfg, "unified", "syn-web")
    shuffled = json.loads(json.dumps(proto, sort_keys=False))
    shuffled = {k: shuffled[k] for k in reversed(list(shuffled))}
    assert fz.protocol_hash(proto) == fz.protocol_hash(shuffled)


def test_example_loss_matches_a_brute_force_oracle_and_ignores_padding():
    from examples.my_loss import pairwise_squared_hinge

    rng = np.random.default_rng(3)
    s = rng.normal(size=7)
    y = rng.integers(0, 3, size=7).astype(float)
    terms = [max(0.0, 1.0 - (s[i] - s[j])) ** 2 for i in range(7) for j in range(7) if y[i] > y[j]]
    oracle = sum(terms) / len(terms)
    st = torch.tensor(s[None], dtype=torch.float64, requires_grad=True)
    yt = torch.tensor(y[None], dtype=torch.float64)
    mask = torch.ones(1, 7, dtype=torch.bool)
    value = pairwise_squared_hinge(st, yt, mask)
    assert value.item() == pytest.approx(oracle, rel=1e-12)
    # padding invariance: value and gradient on real items unchanged, zero gradient on padding
    sp = torch.cat([st.detach(), torch.tensor([[9.0, -9.0]], dtype=torch.float64)], 1).requires_grad_(True)
    yp = torch.cat([yt, torch.tensor([[5.0, 0.0]], dtype=torch.float64)], 1)
    mp = torch.cat([mask, torch.zeros(1, 2, dtype=torch.bool)], 1)
    padded = pairwise_squared_hinge(sp, yp, mp)
    assert padded.item() == pytest.approx(value.item(), rel=1e-12)
    (g,) = torch.autograd.grad(value, st)
    (gp,) = torch.autograd.grad(padded, sp)
    assert torch.allclose(gp[:, :7], g) and torch.all(gp[:, 7:] == 0)
    assert torch.autograd.gradcheck(lambda x: pairwise_squared_hinge(x, yt, mask), (st,))
    # no pair at all: zero that still backpropagates
    flat = pairwise_squared_hinge(st, torch.zeros_like(yt), mask)
    assert flat.item() == 0.0 and flat.requires_grad


# ----------------------------------------------------------------------------- reproduction of the frozen baselines

METRICS = ["ndcg@10"]
TOLERANCE = {"ndcg@10": 0.01}
HERE = {"cpu": "x", "cpu_isa": ["avx2"], "torch_threads": 1}


def test_drifts_count_rows_and_measure_per_query_and_mean_differences():
    frozen = _per_query(["ranknet", "listnet"])
    current = frozen.copy()
    rows = current.index[(current.method == "listnet") & (current["query"] < 3)]
    current.loc[rows, "ndcg@10"] += 0.1  # 3 queries x 2 seeds differ by 0.1 (clipped values stay comparable)
    found = {d.method: d for d in fz.drifts(frozen, current, METRICS)}
    assert found["ranknet"].identical and found["ranknet"].max_abs == {"ndcg@10": 0.0}
    listnet = found["listnet"]
    assert (listnet.rows, listnet.rows_differ) == (60, 6)
    assert listnet.max_abs["ndcg@10"] == pytest.approx(0.1)
    assert listnet.mean_diff["ndcg@10"] == pytest.approx(6 * 0.1 / 60)
    current.loc[rows[0], "ndcg@10:dropped"] = True  # a flipped drop flag is a difference too
    assert {d.method: d.rows_differ for d in fz.drifts(frozen, current, METRICS)}["listnet"] == 6
    with pytest.raises(fz.FrozenMismatch, match="'ranknet' is frozen but was not trained now"):
        fz.drifts(frozen, current[current.method != "ranknet"], METRICS)
    with pytest.raises(fz.FrozenMismatch, match="rows are in only one of"):
        fz.drifts(frozen, current[current.seed == 0], METRICS)


def test_verdict_identical_on_the_freezing_platform_within_tolerance_elsewhere():
    same = fz.Drift("a", 60, 0, {"ndcg@10": 0.0}, {"ndcg@10": 0.0})
    small = fz.Drift("b", 60, 5, {"ndcg@10": 0.5}, {"ndcg@10": -0.004})
    large = fz.Drift("c", 60, 9, {"ndcg@10": 1.0}, {"ndcg@10": 0.02})
    assert fz.verdict([same], METRICS, differences=[], tolerance=TOLERANCE) == (
        True, "frozen baselines reproduced: 1/1 methods, per query identical")
    ok, line = fz.verdict([same, small], METRICS, differences=[], tolerance=TOLERANCE)
    assert not ok and "on the platform they were frozen on: 1/2 methods differ per query: b (5 of 60 rows" in line
    ok, line = fz.verdict([same, small], METRICS, differences=["cpu_isa"], tolerance=TOLERANCE)
    assert ok and "within the cross-platform tolerance: 2/2 methods (1 per query identical" in line and "cpu_isa" in line
    ok, line = fz.verdict([small, large], METRICS, differences=["cpu"], tolerance=TOLERANCE)
    assert not ok and "1/2 methods land outside the cross-platform tolerance" in line and "c (9 of 60" in line
    ok, line = fz.verdict([large], METRICS, differences=["cpu"], tolerance={})
    assert ok and "not judged (no freeze.platform_tolerance): ndcg@10" in line
    assert fz.platform_differences(None, HERE) == ["unrecorded"]
    assert fz.platform_differences(HERE, {**HERE, "cpu_isa": ["avx512f"]}) == ["cpu_isa"]


def _freeze_here(tmp_path, frame, platform=HERE):
    prepared = [_prepared(tmp_path / "prep", "Fold1", "f" * 64)]
    out = fz.freeze(frame, tmp_path / "frozen" / "syn", profile="test", dataset="syn", protocol=PROTOCOL,
                    prepared_dirs=prepared, platform=platform)
    return out, prepared


def test_check_reproduced_records_and_the_cli_fails_naming_the_refreeze(tmp_path, capsys):
    from bench.cli import main

    frozen = _per_query(["ranknet", "listnet"])
    out, prepared = _freeze_here(tmp_path, frozen)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["platform"] == HERE and "platform" in manifest["bits_depend_on"]
    record = fz.check_reproduced(out, frozen, protocol=PROTOCOL, fingerprints={"Fold1": "f" * 64}, platform=HERE,
                                 tolerance=TOLERANCE)
    assert record["ok"] and record["line"] == "frozen baselines reproduced: 2/2 methods, per query identical"
    changed = dict(PROTOCOL, seeds=[0, 1, 2])
    record = fz.check_reproduced(out, frozen, protocol=changed, fingerprints={"Fold1": "f" * 64}, platform=HERE,
                                 tolerance=TOLERANCE)
    assert record["ok"] is None and record["line"].startswith("frozen baselines not compared: protocol differs")
    record = fz.check_reproduced(out, frozen[frozen.method == "ranknet"], protocol=PROTOCOL,
                                 fingerprints={"Fold1": "f" * 64}, platform=HERE, tolerance=TOLERANCE)
    assert record["ok"] is False and "'listnet' is frozen but was not trained now; re-freeze: `snakemake" in record["line"]
    drifted = frozen.copy()
    drifted.loc[drifted.method == "ranknet", "ndcg@10"] += 1e-9
    path = tmp_path / "current.parquet"
    write_frame(drifted, path)
    args = ["check-reproduced", "--frozen", str(out), "--per-query", str(path), "--prepared", *map(str, prepared),
            "--protocol", json.dumps(PROTOCOL), "--tolerance", json.dumps(TOLERANCE), "--threads", "1",
            "--out", str(tmp_path / "rec.json")]
    fz_platform = fz.current_platform
    try:
        fz.current_platform = lambda threads: HERE  # the machine that froze them
        assert main(args) == 2
    finally:
        fz.current_platform = fz_platform
    err = capsys.readouterr().err
    assert "frozen baselines NOT reproduced on the platform they were frozen on: 1/2 methods differ" in err
    assert "snakemake --cores 2 freeze --forcerun train gbdt linear tune tuned_runs" in err
    assert json.loads((tmp_path / "rec.json").read_text())["ok"] is False


PINNED = {**HERE, "torch_cpu_capability": "DEFAULT", "isa_variables": dict(determinism.PINNED_ENV), "libc": "glibc 2.36"}


def test_pinned_kernels_on_both_sides_require_identity_on_another_cpu(tmp_path):
    """Frozen and re-run with pinned kernels on CPUs that differ in model and flags only: the CPU
    picks no kernel, so identity is required and a one-bit drift fails naming the method."""
    frozen = _per_query(["ranknet", "listnet"])
    out, _ = _freeze_here(tmp_path, frozen, platform=PINNED)
    other_cpu = {**PINNED, "cpu": "y", "cpu_isa": ["avx2", "avx512f"]}
    check = {"protocol": PROTOCOL, "fingerprints": {"Fold1": "f" * 64}, "tolerance": TOLERANCE}
    record = fz.check_reproduced(out, frozen, platform=other_cpu, **check)
    assert record["ok"] and record["pinned"] and record["line"] == (
        "frozen baselines reproduced: 2/2 methods, per query identical (pinned kernels; this machine differs from "
        "the freezing one only in cpu, cpu_isa, which pick no pinned kernel)")
    drifted = frozen.copy()
    drifted.loc[drifted.method == "ranknet", "ndcg@10"] += 1e-9  # far inside the tolerance
    record = fz.check_reproduced(out, drifted, platform=other_cpu, **check)
    assert record["ok"] is False
    assert record["line"].startswith("frozen baselines NOT reproduced with pinned kernels on another CPU: 1/2 methods "
                                     "differ per query: ranknet (60 of 60 rows;")
    assert "only in cpu, cpu_isa" in record["line"] and "re-freeze: `snakemake" in record["line"]
    # native kernels on this side (or another C library): the tolerance judges, naming the kernels
    native = {**other_cpu, "torch_cpu_capability": "AVX2", "isa_variables": {}}
    record = fz.check_reproduced(out, drifted, platform=native, **check)
    assert record["ok"] and not record["pinned"]
    assert "within the cross-platform tolerance" in record["line"]
    assert "differs from the freezing one in cpu, cpu_isa, isa_variables, torch_cpu_capability" in record["line"]
    record = fz.check_reproduced(out, drifted, platform={**other_cpu, "libc": "glibc 2.31"}, **check)
    assert record["ok"] and record["pinned"] and "differs from the freezing one in libc" in record["line"]


def test_kernels_pinned_needs_atens_scalar_build_and_mkls_compatible_branch():
    assert fz.kernels_pinned(PINNED) and fz.kernels_pinned({**PINNED, "isa_variables": {"MKL_CBWR": "compatible,strict"}})
    assert not fz.kernels_pinned({**PINNED, "torch_cpu_capability": "AVX2"})  # the variable came too late
    assert not fz.kernels_pinned({**PINNED, "isa_variables": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2"}})
    assert not fz.kernels_pinned(None) and not fz.kernels_pinned(HERE)
    facts = fz.current_platform(1)
    assert facts["libc"] and facts["torch_cpu_capability"] == str(torch.backends.cpu.get_cpu_capability())


def test_committed_baselines_match_the_default_protocol_and_record_their_platform():
    """The committed default baselines were frozen under today's default protocol, from a clean
    commit, with the platform facts their bits depend on (a changed protocol needs a re-freeze)."""
    frozen_dir = Path(__file__).resolve().parents[1] / "results" / "frozen" / "default" / "syn-web"
    manifest = json.loads((frozen_dir / "manifest.json").read_text())
    cfg = cv.load_config()
    assert manifest["protocol_hash"] == fz.protocol_hash(plan.study_protocol(cfg, cfg["freeze"]["protocol"], "syn-web"))
    assert manifest["methods"] == sorted(plan.freeze_methods(cfg))
    assert manifest["format"] == fz.FORMAT and manifest["code_version"]["git_dirty"] is False
    assert {"cpu", "cpu_isa", "torch_cpu_capability", "libraries", "torch_threads"} <= set(manifest["platform"])
    assert manifest["platform"]["torch_threads"] == cfg["threads"]
    # frozen with pinned kernels (bench.training.determinism), so any CPU can reproduce them per query
    assert fz.kernels_pinned(manifest["platform"]) and manifest["platform"]["isa_variables"] == determinism.PINNED_ENV
