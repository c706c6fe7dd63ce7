"""bench.provenance: canonical JSON, protocol hashes, the run.json header."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.provenance import canonical_json, protocol_hash, run_header


def test_canonical_json_is_order_and_type_insensitive_and_rejects_nan():
    a = {"b": (1, np.float64(2.5)), "a": {"y": np.int64(1), "x": [True]}}
    b = {"a": {"x": [True], "y": 1}, "b": [1, 2.5]}
    assert canonical_json(a) == canonical_json(b) == '{"a":{"x":[true],"y":1},"b":[1,2.5]}'
    assert protocol_hash(a) == protocol_hash(b) and len(protocol_hash(a)) == 64
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


def test_run_header_names_the_run_and_hashes_its_protocol(tmp_path):
    protocol = {"kind": "neural", "seed": 2}
    header = run_header(kind="neural", identity={"dataset": "d", "fold": "F", "method": "m", "seed": np.int64(2)},
                        config={"loss": "ranknet"}, device_requested="auto", protocol=protocol,
                        fingerprint="f" * 64, prepared_dir=tmp_path)
    assert (header["dataset"], header["fold"], header["method"], header["seed"]) == ("d", "F", "m", 2)
    assert header["protocol_hash"] == protocol_hash(protocol)
    assert header["config"] == {"loss": "ranknet", "device_requested": "auto"}
    assert header["prepared_dir"] == str(tmp_path.resolve()) and "ltr-bench" in header["versions"]


def test_git_commit_leaves_out_the_folder_a_freeze_rewrites(tmp_path, monkeypatch):
    """Snakemake deletes a job's old outputs first: a re-freeze of committed baselines must not
    record its own deleted manifest as uncommitted changes (the rest of the tree still counts)."""
    import shutil
    import subprocess

    from bench import provenance

    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    (repo / "results" / "frozen").mkdir(parents=True)
    (repo / "results" / "frozen" / "manifest.json").write_text("{}")
    (repo / "README.md").write_text("x")
    shutil.copy(provenance.__file__, repo / "bench" / "provenance.py")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    monkeypatch.setattr(provenance, "__file__", str(repo / "bench" / "provenance.py"))
    (repo / "results" / "frozen" / "manifest.json").unlink()
    assert provenance.git_commit()[1] is True
    assert provenance.git_commit(outside=repo / "results" / "frozen")[1] is False
    (repo / "README.md").write_text("changed")
    assert provenance.git_commit(outside=repo / "results" / "frozen")[1] is True
