"""Integrity on read (bench.atomic.integrity, issue 21): one changed byte in any artefact a later
step trusts -- mtime kept, as bit rot or a bad copy leaves it -- stops the next reader with
one line naming the file and what to type to rebuild it; rebuilding gives the original bytes.

The study here is a tiny one laid out as the workflow lays it out (``results/prepared``,
``results/runs``, ``results/evaluated``, ``results/stats`` under a temporary working
directory), built with the real commands: prepare, ``ltr-bench linear``, ``evaluate``, ``stats``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.atomic.integrity import DIGESTS_FILE, digest_file, rebuild_hint, sidecar, verify
from bench.cli import main
from bench.data import load_prepared
from bench.data.prepared import ARRAYS, SPLITS, fingerprint
from bench.errors import IntegrityError
from bench.results import read_curve, read_frame, read_frames, read_metrics, read_run_info, read_scores
from helpers import TINY_OPTIONS, make_prepared

PREPARED = Path("results/prepared/syn/fold1")
RUN = Path("results/runs/main/syn/fold1/lr/seed0")
EVALUATED = Path("results/evaluated/t/syn/fold1.parquet")
STATS = Path("results/stats/t.parquet")
METRICS = ["ndcg@10", "map"]


def flip(path: Path, offset: int | None = None) -> None:
    """Flip one bit of one byte of ``path`` (the middle one by default), keeping its times."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if offset is None else offset] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns


def _linear(run: Path = RUN) -> list[str]:
    return ["linear", "--prepared", str(PREPARED), "--out", str(run), "--method", "lr", "--seed", "0",
            "--config", "cfg.yaml", "--device", "cpu", "--quiet"]


def _evaluate() -> list[str]:
    runs = [{"method": m, "seed": 0, "dir": str(RUN)} for m in ("lr", "lr2")]
    return ["evaluate", "--prepared", str(PREPARED), "--dataset", "syn", "--fold", "fold1",
            "--runs", json.dumps(runs), "--metrics", *METRICS, "--out", str(EVALUATED)]


def _stats() -> list[str]:
    return ["stats", "--inputs", str(EVALUATED), "--metrics", *METRICS, "--n-boot", "50", "--out", str(STATS)]


def _one_line_error(capsys, command: str, path: Path, hint: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith(f"ltr-bench {command}: error:")]
    assert len(lines) == 1, err
    assert f"{path}: contents changed since it was written" in lines[0], lines[0]
    assert hint in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def study(tmp_path, monkeypatch, capsys):
    """A tiny study under ``tmp_path`` (the working directory); the bytes of every artefact."""
    monkeypatch.chdir(tmp_path)
    make_prepared(PREPARED)
    Path("cfg.yaml").write_text(yaml.safe_dump({
        "train": {"early_stopping_metric": "ndcg@10"},
        "metrics": {"names": METRICS, "empty_query": "one", "ties": "stable"},
        "methods": {"lr": {"linear": "least_squares", "penalties": [0.0, 10.0]}},
    }))
    assert main(_linear()) == 0
    assert main(_evaluate()) == 0
    assert main(_stats()) == 0
    capsys.readouterr()
    files = [p for root in (PREPARED, RUN) for p in sorted(root.rglob("*")) if p.is_file()]
    files += [EVALUATED, sidecar(EVALUATED), STATS, sidecar(STATS)]
    return {p: p.read_bytes() for p in files}


def _same_bytes(original: dict, paths) -> None:
    for p in paths:
        assert p.read_bytes() == original[p], p


def test_every_artefact_carries_a_digest_that_matches(study):
    assert (PREPARED / DIGESTS_FILE).is_file() and (RUN / DIGESTS_FILE).is_file()
    listed = json.loads((PREPARED / DIGESTS_FILE).read_text())["files"]
    assert sorted(listed) == sorted(["meta.json", *(f"{s}/{a}.npy" for s in SPLITS for a in ARRAYS)])
    for name, digest in listed.items():
        assert digest == digest_file(PREPARED / name) and digest.startswith("xxh3_128:")
    listed = json.loads((RUN / DIGESTS_FILE).read_text())["files"]
    assert sorted(listed) == ["curve.csv", "metrics.parquet", "run.json", "scores.npy"]
    for path in (EVALUATED, STATS):
        assert sidecar(path).read_text().strip() == digest_file(path)
        verify(path)


def test_a_flipped_bit_in_the_training_features_stops_training(study, capsys):
    flip(PREPARED / "train" / "features.npy")
    assert main(_linear(Path("results/runs/main/syn/fold1/lr/seed1"))) == 2
    _one_line_error(capsys, "linear", PREPARED / "train" / "features.npy",
                    "`snakemake --cores 2 results/prepared/syn/fold1 --forcerun prepare`")
    assert not Path("results/runs/main/syn/fold1/lr/seed1").exists()
    # rebuilding (what the forcerun runs: prepare; here the cache check sees the damage too)
    logged = []
    from bench.data import prepare_fold

    prepare_fold("synthetic", "fold1", PREPARED, TINY_OPTIONS, log=logged.append)
    assert any("rebuilding" in m and "features.npy" in m for m in logged)
    _same_bytes(study, [p for p in study if PREPARED in p.parents and p.suffix == ".npy"])
    # meta.json records the time prepare took; everything else in it is the same
    before, after = json.loads(study[PREPARED / "meta.json"]), json.loads((PREPARED / "meta.json").read_text())
    assert {k: v for k, v in before.items() if k != "prepare_seconds"} == \
        {k: v for k, v in after.items() if k != "prepare_seconds"}
    load_prepared(PREPARED)


@pytest.mark.parametrize("name", ["test/labels.npy", "test/offsets.npy", "meta.json"])
def test_a_flipped_bit_in_what_evaluate_reads_stops_evaluate(study, capsys, name):
    flip(PREPARED / name)
    assert main(_evaluate()) == 2
    _one_line_error(capsys, "evaluate", PREPARED / name, "--forcerun prepare`")


def test_evaluate_checks_only_the_files_it_reads(study):
    flip(PREPARED / "train" / "features.npy")
    load_prepared(PREPARED, check=("test/labels",))  # the damaged features are not read
    with pytest.raises(IntegrityError, match=r"train/features\.npy: contents changed"):
        load_prepared(PREPARED)


def test_a_flipped_bit_in_a_runs_scores_stops_evaluate_and_retraining_restores_them(study, capsys):
    flip(RUN / "scores.npy")
    assert main(_evaluate()) == 2
    _one_line_error(capsys, "evaluate", RUN / "scores.npy",
                    f"`snakemake --cores 2 {RUN}/run.json --forcerun linear`")
    assert main(_linear()) == 0
    assert main(_evaluate()) == 0
    _same_bytes(study, [RUN / "scores.npy", EVALUATED])


@pytest.mark.parametrize("name,reader", [("scores.npy", read_scores), ("run.json", read_run_info),
                                         ("curve.csv", read_curve), ("metrics.parquet", read_metrics)])
def test_every_run_file_is_checked_by_its_reader(study, name, reader):
    reader(RUN)
    flip(RUN / name)
    with pytest.raises(IntegrityError, match=rf"{RUN / name}: contents changed .* rebuild it: `snakemake "
                                             rf"--cores 2 {RUN}/run.json --forcerun "):
        reader(RUN)
    with pytest.raises(IntegrityError) if name == "metrics.parquet" else _nothing():
        read_frames([RUN / "metrics.parquet"])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_flipped_bit_in_an_evaluated_frame_stops_stats_and_re_evaluating_restores_it(study, capsys):
    flip(EVALUATED)
    assert main(_stats()) == 2
    _one_line_error(capsys, "stats", EVALUATED, f"`snakemake --cores 2 {EVALUATED} --forcerun evaluate`")
    assert main(_evaluate()) == 0
    _same_bytes(study, [EVALUATED, sidecar(EVALUATED)])


def test_a_flipped_bit_in_a_statistics_table_stops_its_reader_and_stats_restores_it(study):
    for offset in (0, None, -1):  # the magic, the middle, the footer's last byte
        flip(STATS, offset)
        with pytest.raises(IntegrityError, match=rf"{STATS}: contents changed .*"
                                                 rf"`snakemake --cores 2 {STATS} --forcerun stats`"):
            read_frame(STATS)
        flip(STATS, offset)
    read_frame(STATS)
    flip(STATS)
    assert main(_stats()) == 0
    _same_bytes(study, [STATS, sidecar(STATS)])


def test_a_damaged_digest_record_is_refused_too(study):
    flip(sidecar(EVALUATED), 12)
    with pytest.raises(IntegrityError, match=rf"{EVALUATED}: contents changed"):
        read_frame(EVALUATED)
    (RUN / DIGESTS_FILE).write_text("{not json")
    with pytest.raises(IntegrityError, match=rf"{RUN / DIGESTS_FILE}: damaged"):
        read_scores(RUN)


def test_artefacts_without_a_digest_are_read_with_one_warning(study, capsys):
    (RUN / DIGESTS_FILE).unlink()
    sidecar(EVALUATED).unlink()
    read_scores(RUN)
    read_scores(RUN)
    read_frame(EVALUATED)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert all("no digest (written before integrity checks); read unverified" in line for line in err)
    assert "--forcerun linear`" in err[0] and "--forcerun evaluate`" in err[1]


def test_rebuild_hints_outside_the_workflow_name_the_command(tmp_path):
    assert "ltr-bench prepare" in rebuild_hint(tmp_path / "fold" / "train" / "features.npy")
    assert "re-run the `ltr-bench` command" in rebuild_hint(tmp_path / "x.parquet")


def test_fingerprint_of_an_empty_split():
    empty = {"features": np.zeros((0, 3), np.float32), "labels": np.zeros(0, np.float32),
             "qids": np.zeros(0, np.int64), "offsets": np.zeros(1, np.int64)}
    full = {"features": np.ones((2, 3), np.float32), "labels": np.ones(2, np.float32),
            "qids": np.ones(1, np.int64), "offsets": np.array([0, 2], np.int64)}
    a = fingerprint({"train": full, "vali": empty, "test": full})
    assert a == fingerprint({"train": full, "vali": dict(empty), "test": full})
    assert a != fingerprint({"train": full, "vali": full, "test": full})


def test_write_frame_without_digest_writes_no_sidecar(tmp_path):
    from bench.results import write_frame

    write_frame(pd.DataFrame({"a": [1]}), tmp_path / "x.parquet", digest=False)
    assert not sidecar(tmp_path / "x.parquet").exists()


def test_a_tuned_methods_damaged_run_names_the_tuning_job_that_retrains_it(tmp_path, monkeypatch):
    """A tuned method's runs are its tuning's two jobs' (rules tune and tuned_runs): the hint names
    the job's record; configuration 1 (the method's own name) is the tuning's only on the fold and
    seeds its record names."""
    monkeypatch.chdir(tmp_path)
    record = tmp_path / "results/tuning/unified/syn-web/arf.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"fold": "Fold1", "seeds": [0]}))
    runs = "results/runs/unified/syn-web"
    tune = "`snakemake --cores 2 results/tuning/unified/syn-web/arf.json --forcerun tune`"
    assert rebuild_hint(f"{runs}/Fold1/arf/seed0/scores.npy").startswith(tune)
    assert rebuild_hint(f"{runs}/Fold1/arf+cfg2/seed0/scores.npy").startswith(tune)
    assert rebuild_hint(f"{runs}/Fold2/arf+tuned/seed1/scores.npy").startswith(
        "`snakemake --cores 2 results/tuning/unified/syn-web/arf+tuned.json --forcerun tuned_runs`")
    assert rebuild_hint(f"{runs}/Fold2/arf/seed0/scores.npy").startswith(
        f"`snakemake --cores 2 {runs}/Fold2/arf/seed0/run.json --forcerun")
