"""The LETOR-only way to run (config/letor.yaml) on a hand-extracted LETOR 4.0 tree.

A user who has only MQ2008, extracted by hand under ``resources/raw/mq2008/extracted/``, runs
the documented command with the documented ``--config`` override and gets ``sinkprop_letor``
graded under LETOR 4.0's convention; asking for a collection whose archive is missing fails
naming where to put it. The collection here is a small generated file in the real MQ2008
layout and line format (CRLF, ``#docid = ... inc = ... prob = ...`` tails, queries without a
relevant document, lists shorter than 10). That the ``letor4`` values equal the official
``Eval-Score-4.0.pl`` is tested against the script's own output in tests/test_metrics_letor.py;
here the oracle for the wiring is: the exported score file, read back line by line beside the
raw test file (parsed here with plain string splitting), graded by the metric code, equals the
run's per-query frame exactly.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pandas as pd
import pytest

from bench.metrics import evaluate_with_convention
from tests.test_workflow import ENV, _copy_workflow, snakemake

# the LETOR study end to end takes about a minute: `slow` (the metric equality with the official
# script is in tests/test_metrics_letor.py, in the default run)
pytestmark = pytest.mark.slow

LETOR = ("all", "--configfile", "config/paper.yaml", "config/letor.yaml")
METRICS = [f"ndcg@{k}" for k in range(1, 11)] + ["map"] + [f"precision@{k}" for k in (1, 3, 5, 10)]


def _write_split(path, rng, n_queries: int, first_qid: int) -> None:
    """LETOR 4.0 lines: ``label qid:Q 1:v .. 46:v #docid = ... inc = ... prob = ...``, CRLF."""
    lines = []
    for q in range(n_queries):
        n = int(rng.integers(3, 25))
        labels = rng.choice(3, size=n, p=[0.6, 0.3, 0.1])
        if q % 5 == 0:
            labels[:] = 0  # MQ2008 has many queries without a relevant document
        feats = rng.random((n, 46)) * 0.5
        feats[:, 0] += labels * 0.3  # one informative feature, so every method can learn
        for i in range(n):
            cols = " ".join(f"{j + 1}:{feats[i, j]:.6f}" for j in range(46))
            lines.append(f"{labels[i]} qid:{first_qid + q} {cols} #docid = GX{q:03d}-{i:02d} "
                         f"inc = 1 prob = 0.{i % 10}\r\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(lines).encode("ascii"))


def _read_letor(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """labels, query offsets and qids of a LETOR file, in line order (an independent parser)."""
    labels, qids = [], []
    for line in path.read_text(encoding="ascii").splitlines():
        fields = line.split("#", 1)[0].split()
        labels.append(float(fields[0]))
        qids.append(fields[1].split(":", 1)[1])
    qids = np.array(qids)
    starts = np.flatnonzero(np.r_[True, qids[1:] != qids[:-1]])
    return np.array(labels), np.r_[starts, len(qids)], qids[starts]


def ltr_bench(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["ltr-bench", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def letor_study(tmp_path_factory):
    root = _copy_workflow(tmp_path_factory.mktemp("letor"))
    rng = np.random.default_rng(2008)
    fold = root / "resources/raw/mq2008/extracted/MQ2008/Fold1"
    for split, n, first in (("train", 40, 10000), ("vali", 15, 20000), ("test", 20, 30000)):
        _write_split(fold / f"{split}.txt", rng, n, first)
    proc = snakemake("--cores", "2", *LETOR, "--config",
                     "tables={sinkprop_letor: {datasets: [mq2008], folds: [Fold1]}}",
                     cwd=root, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


def test_letor_profile_builds_only_the_letor_table_graded_by_letor4(letor_study):
    tables = sorted(p.name for p in (letor_study / "reports/letor/tables").iterdir())
    assert tables == ["sinkprop_letor.html", "sinkprop_letor.md", "sinkprop_letor.tex"]
    text = (letor_study / "reports/letor/tables/sinkprop_letor.md").read_text()
    assert "MQ2008" in text and "Eval-Score-4.0" in text
    for metric in ("NDCG@1", "NDCG@10", "MAP"):
        assert metric in text
    # LETOR's published baselines: no stored source covers MQ2008, and the caption says so
    assert "No stored source has LETOR's published numbers for MQ2008" in text and "| published" not in text
    assert (letor_study / "reports/letor/report.html").stat().st_size > 0


def test_the_hand_extracted_tree_is_left_as_the_user_made_it(letor_study):
    tree = letor_study / "resources/raw/mq2008/extracted"
    files = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
    assert files == ["MQ2008/Fold1/test.txt", "MQ2008/Fold1/train.txt", "MQ2008/Fold1/vali.txt"]


def test_each_run_equals_its_exported_scores_graded_in_file_order(letor_study):
    test_file = letor_study / "resources/raw/mq2008/extracted/MQ2008/Fold1/test.txt"
    labels, offsets, qids = _read_letor(test_file)
    evaluated = pd.read_parquet(letor_study / "results/letor/evaluated/sinkprop_letor/mq2008/Fold1.parquet")
    assert set(evaluated["convention"]) == {"letor4"}
    runs = sorted((letor_study / "results/runs/letor/mq2008/Fold1").glob("*/seed0"))
    assert {run.parent.name for run in runs} == set(evaluated["method"])
    for run in runs:
        out = run.parent / "exported.txt"
        proc = ltr_bench("export-scores", "--run", str(run), "--out", str(out), cwd=letor_study)
        assert proc.returncode == 0, proc.stderr
        scores = np.array([float(s) for s in out.read_text().splitlines()])
        assert scores.shape == labels.shape
        oracle = evaluate_with_convention(scores, labels, offsets, METRICS, "letor4")
        # the frame the significance tests read, and the run's own per-query frame
        ours = evaluated[evaluated["method"] == run.parent.name]
        own = pd.read_parquet(run / "metrics.parquet")
        assert list(ours["query"].astype(str)) == list(qids) == list(own["query"].astype(str))
        assert set(METRICS) <= set(ours.columns) and set(METRICS) <= set(own.columns)  # P@k in both frames
        for metric in METRICS:  # exact: the same float64 operations on the same doubles
            np.testing.assert_array_equal(ours[metric].to_numpy(), oracle[metric].to_numpy(), err_msg=metric)
        for metric in set(METRICS) & set(own.columns):
            np.testing.assert_array_equal(own[metric].to_numpy(), oracle[metric].to_numpy(), err_msg=metric)


def test_a_letor_collection_without_its_archive_fails_saying_where_to_put_it(letor_study):
    proc = snakemake("--cores", "1", *LETOR, "--config",
                     "tables={sinkprop_letor: {datasets: [mq2008, ohsumed], folds: [Fold1]}}",
                     cwd=letor_study)
    assert proc.returncode != 0
    log = letor_study / "results/logs/fetch/ohsumed.log"
    text = proc.stdout + proc.stderr + (log.read_text() if log.exists() else "")
    assert "OHSUMED.rar" in text and "place it at" in text
    assert str(letor_study / "resources/raw/letor3-ohsumed") in text
