"""The suite's checksum bookkeeping stays out of data trees it did not create.

A hand-extracted tree (no ``.manifest.json``: the suite did not extract it) and hand-made
files passed with ``files=`` are the user's: verifying and preparing them must leave them
byte-for-byte unchanged, with no new file. The sha256 of a source file is cached instead
under a directory the suite owns (``ltr-bench prepare --checksum-cache``, default
``results/cache/source-sha256``), keyed by the file's absolute path, size and mtime.
Oracle: ``hashlib.sha256`` of the file's bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from bench.cli import main as cli_main
from bench.data import REGISTRY, checksum_cache, prepare_fold
from bench.data.fetch import fetch


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file and folder under ``root`` (hidden ones included) with its bytes."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(root.rglob("*"))}


def _svm(path: Path, rng, n_queries: int, n_features: int = 136) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for q in range(n_queries):
        for _ in range(int(rng.integers(2, 6))):
            feats = " ".join(f"{j + 1}:{rng.normal():.3f}" for j in range(n_features))
            rows.append(f"{int(rng.integers(0, 3))} qid:{q + 1} {feats}")
    path.write_text("\n".join(rows) + "\n")


@pytest.fixture
def user_tree(tmp_path, rng):
    """A hand-extracted MSLR fold in the user's own folder (the suite created nothing there)."""
    root = tmp_path / "user-data"
    for split, nq in (("train", 12), ("vali", 4), ("test", 5)):
        _svm(root / "mslr-web30k" / "extracted" / "Fold1" / f"{split}.txt", rng, nq)
    return root


def test_verify_and_prepare_leave_a_hand_extracted_tree_unchanged(user_tree, tmp_path):
    before = _snapshot(user_tree)
    # `fetch` of a tree extracted by hand (no archive to download: the manual route)
    manual = dataclasses.replace(REGISTRY["mslr-web30k"], manual=True)
    assert fetch(manual, user_tree, log=lambda m: None) == user_tree / "mslr-web30k" / "extracted"
    cache = tmp_path / "results" / "cache" / "source-sha256"
    out = tmp_path / "results" / "prepared" / "mslr-web30k" / "Fold1"
    fold = prepare_fold("mslr-web30k", "Fold1", out, raw_dir=user_tree, checksum_cache=cache, log=lambda m: None)
    prepare_fold("mslr-web30k", "Fold1", out, {"normalize": "zscore"}, raw_dir=user_tree,
                 checksum_cache=cache, log=lambda m: None)
    assert _snapshot(user_tree) == before  # no sidecar, no change
    train = user_tree / "mslr-web30k" / "extracted" / "Fold1" / "train.txt"
    assert fold.meta["sources"]["train"]["sha256"] == hashlib.sha256(train.read_bytes()).hexdigest()
    assert len(list(cache.glob("*.json"))) == 3  # one record per source file, in the suite's cache


def test_prepare_of_hand_made_files_leaves_their_folder_unchanged(tmp_path, rng):
    folder = tmp_path / "fixtures"
    files = {s: folder / f"{s}.txt" for s in ("train", "test")}
    for path in files.values():
        _svm(path, rng, 4, n_features=5)
    before = _snapshot(folder)
    prepare_fold("my-data", "Fold1", tmp_path / "p", files=files, log=lambda m: None)  # no cache at all
    prepare_fold("my-data", "Fold1", tmp_path / "q", files=files, checksum_cache=tmp_path / "c", log=lambda m: None)
    assert _snapshot(folder) == before


def test_cache_hits_and_invalidation(tmp_path, monkeypatch):
    src = tmp_path / "data" / "a.txt"
    src.parent.mkdir()
    src.write_bytes(b"0 qid:1 1:0.5\n")
    cache = tmp_path / "cache"
    calls = []
    real = checksum_cache.file_sha256
    monkeypatch.setattr(checksum_cache, "file_sha256", lambda p: calls.append(p) or real(p))
    first = checksum_cache.cached_sha256(src, cache)
    assert first == hashlib.sha256(src.read_bytes()).hexdigest() and len(calls) == 1
    assert checksum_cache.cached_sha256(src, cache) == first and len(calls) == 1  # hit: not re-read
    # the same path through a relative spelling is the same key
    monkeypatch.chdir(tmp_path)
    assert checksum_cache.cached_sha256(Path("data") / "a.txt", cache) == first and len(calls) == 1
    # content (size) change -> recomputed
    src.write_bytes(b"1 qid:1 1:0.5\n0 qid:1 1:0.7\n")
    second = checksum_cache.cached_sha256(src, cache)
    assert second == hashlib.sha256(src.read_bytes()).hexdigest() != first and len(calls) == 2
    # same size, new mtime -> recomputed
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert checksum_cache.cached_sha256(src, cache) == second and len(calls) == 3
    # no cache directory: always computed, nothing written anywhere
    assert checksum_cache.cached_sha256(src, None) == second and len(calls) == 4
    assert sorted(p.name for p in src.parent.iterdir()) == ["a.txt"]


def test_unwritable_cache_still_returns_the_checksum(tmp_path):
    src = tmp_path / "a.txt"
    src.write_bytes(b"x")
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder would go")
    assert checksum_cache.cached_sha256(src, blocker / "sub") == hashlib.sha256(b"x").hexdigest()


def test_cli_prepare_puts_the_cache_under_the_given_folder(user_tree, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = _snapshot(user_tree)
    out = tmp_path / "results" / "prepared" / "mslr-web30k" / "Fold1"
    assert cli_main(["prepare", "mslr-web30k", "--fold", "Fold1", "--out", str(out),
                     "--raw-dir", str(user_tree)]) == 0
    assert _snapshot(user_tree) == before
    assert len(list((tmp_path / "results" / "cache" / "source-sha256").glob("*.json"))) == 3  # the default
    assert cli_main(["prepare", "mslr-web30k", "--fold", "Fold1", "--out", str(out), "--force",
                     "--raw-dir", str(user_tree), "--checksum-cache", str(tmp_path / "elsewhere")]) == 0
    assert len(list((tmp_path / "elsewhere").glob("*.json"))) == 3 and _snapshot(user_tree) == before
