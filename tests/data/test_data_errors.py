"""Every user-facing failure of fetch, extract and prepare is one line; a bug keeps its traceback.

Tried as a user meets them, through ``ltr-bench`` itself (in-process): an archive whose members
collide (a file and a folder of the same name, in either order) or whose member name is longer
than the filesystem allows, an archive or source file that cannot be read, a folder where a
file belongs, a full disk. Each must print exactly one line ``ltr-bench <command>: error:
<message>`` naming the path, exit with status 2 and leave nothing half-written. Oracles: the
listing of the folders involved before and after, and the text of stderr.

Root reads any file whatever its mode, so an unreadable file is made so with ``chmod 000``
*and*, under root, by refusing it at ``open()`` exactly as the kernel would (``EACCES``). A full
disk is ``/dev/full`` (every write fails with ``ENOSPC``) or a refused ``write``.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main as cli_main
from bench.data import extract as extract_mod
from bench.data import prepare as prepare_mod
from bench.data import prepared as prepared_mod


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _tar(members: list[tuple[str, bytes | None]]) -> bytes:
    """A .tar.gz; ``None`` as data makes a folder member."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data or b""))
    return buf.getvalue()


def _listing(root: Path) -> dict[str, bytes]:
    """Every file and folder under ``root`` (hidden ones included) with its bytes."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(root.rglob("*"))}


def _one_line(capsys, command: str) -> str:
    """stderr of the last command: exactly one line, the suite's error line; returned."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ltr-bench {command}: error: "), lines[0]
    return lines[0]


def _deny_reading(monkeypatch, path: Path) -> None:
    """Make ``path`` unreadable as a file of another user with mode 000 is."""
    path.chmod(0)
    if os.geteuid() != 0:
        return
    denied = os.path.realpath(path)

    def guard(real):
        def opener(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == denied:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
            return real(file, *args, **kwargs)
        return opener

    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    monkeypatch.setattr(io, "open", guard(io.open))


@pytest.fixture
def user_raw(tmp_path, monkeypatch):
    """A user's raw folder and a registry override whose mslr-web10k is ``archive`` as placed
    there by hand; ``place(data)`` puts it and returns the ltr-bench fetch arguments."""
    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "user-raw"
    group = raw / "mslr-web10k"
    group.mkdir(parents=True)

    def place(data: bytes) -> list[str]:
        (group / "MSLR-WEB10K.zip").write_bytes(data)
        override = tmp_path / "registry.json"
        override.write_text(json.dumps({"mslr-web10k": {
            "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "file_sha256": {}, "urls": []}}))
        return ["fetch", "mslr-web10k", "--raw-dir", str(raw), "--registry", str(override),
                "--checksum-cache", str(tmp_path / "cache")]

    place.group = group
    return place


# ------------------------------------------------------------------ archives

COLLISIONS = {
    "zip, file then folder": lambda: _zip([("Fold1", b"x"), ("Fold1/train.txt", b"y")]),
    "zip, folder then file": lambda: _zip([("Fold1/train.txt", b"y"), ("Fold1", b"x")]),
    "zip, folder entry then file": lambda: _zip([("Fold1/", b""), ("Fold1", b"x")]),
    "zip, file then folder entry": lambda: _zip([("Fold1", b"x"), ("Fold1/", b"")]),
    "tar, file then folder": lambda: _tar([("Fold1", b"x"), ("Fold1/train.txt", b"y")]),
    "tar, folder then file": lambda: _tar([("Fold1/train.txt", b"y"), ("Fold1", b"x")]),
}


@pytest.mark.parametrize("build", COLLISIONS.values(), ids=COLLISIONS.keys())
def test_colliding_members_are_one_line_and_leave_nothing(user_raw, build, capsys):
    args = user_raw(build())
    before = _listing(user_raw.group)
    assert cli_main(args) == 2
    line = _one_line(capsys, "fetch")
    assert str(user_raw.group / "MSLR-WEB10K.zip") in line
    assert "'Fold1' is both a file and a folder in the archive" in line
    assert _listing(user_raw.group) == before  # no extracted/, no temporary


@pytest.mark.parametrize("build", [_zip, _tar], ids=["zip", "tar"])
def test_member_name_too_long_is_one_line_and_leaves_nothing(user_raw, build, capsys):
    name = "Fold1/" + "n" * 300 + ".txt"  # one component over the 255 bytes of ext4, xfs, tmpfs
    args = user_raw(build([(name, b"1 qid:1 1:0.5\n")]))
    before = _listing(user_raw.group)
    assert cli_main(args) == 2
    line = _one_line(capsys, "fetch")
    assert str(user_raw.group / "MSLR-WEB10K.zip") in line and "longer than the filesystem" in line
    assert "(310 bytes)" in line and len(line) < 600  # the name is shortened, not printed whole
    assert _listing(user_raw.group) == before


def test_encrypted_zip_member_is_one_line_and_leaves_nothing(user_raw, capsys):
    data = bytearray(_zip([("Fold1/train.txt", b"1 qid:1 1:0.5\n")]))
    # set bit 0 of the general purpose flags, what a password-protected member carries, in
    # the local header (offset 6) and the central directory entry (offset 8)
    data[data.index(b"PK\x03\x04") + 6] |= 0x1
    data[data.index(b"PK\x01\x02") + 8] |= 0x1
    args = user_raw(bytes(data))
    before = _listing(user_raw.group)
    assert cli_main(args) == 2
    line = _one_line(capsys, "fetch")
    assert "member 'Fold1/train.txt' is encrypted" in line and str(user_raw.group / "MSLR-WEB10K.zip") in line
    assert _listing(user_raw.group) == before


def test_unreadable_archive_is_one_line(user_raw, monkeypatch, capsys):
    args = user_raw(_zip([("Fold1/train.txt", b"1 qid:1 1:0.5\n")]))
    archive = user_raw.group / "MSLR-WEB10K.zip"
    _deny_reading(monkeypatch, archive)
    assert cli_main(args) == 2
    line = _one_line(capsys, "fetch")
    assert f"{archive}: cannot read: permission denied" in line and "ls -l" in line
    assert sorted(p.name for p in user_raw.group.iterdir()) == ["MSLR-WEB10K.zip"]  # not moved aside


def test_a_folder_in_the_archives_place_is_one_line_and_kept(user_raw, capsys):
    args = user_raw(b"placeholder")
    archive = user_raw.group / "MSLR-WEB10K.zip"
    archive.unlink()
    (archive / "inside").mkdir(parents=True)
    assert cli_main(args) == 2
    line = _one_line(capsys, "fetch")
    assert f"{archive}: cannot read: a folder is there where a file is expected" in line
    assert (archive / "inside").is_dir() and not list(user_raw.group.glob("*.corrupt"))


def test_a_file_in_the_place_of_extracted_is_one_line_and_kept(user_raw, capsys):
    args = user_raw(_zip([("Fold1/train.txt", b"1 qid:1 1:0.5\n")]))
    (user_raw.group / "extracted").write_text("the user's notes")
    before = _listing(user_raw.group)
    assert cli_main(args) == 2
    line = _one_line(capsys, "fetch")
    assert f"{user_raw.group / 'extracted'}: cannot write: a file is there where a folder is expected" in line
    assert _listing(user_raw.group) == before  # not renamed away, no .old.tmp


def test_full_disk_while_extracting_is_one_line_and_leaves_nothing(user_raw, monkeypatch, capsys):
    args = user_raw(_zip([("Fold1/train.txt", b"1 qid:1 1:0.5\n")]))
    before = _listing(user_raw.group)

    def full(src, dst, length=0):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(extract_mod.shutil, "copyfileobj", full)
    assert cli_main(args) == 2
    line = _one_line(capsys, "fetch")
    assert f"{user_raw.group / 'extracted'}: cannot write: no space left on the device (needs 4.1 kB, " in line
    assert "B free there); free some space and run the same command again" in line  # the zip's size, rounded to blocks
    assert _listing(user_raw.group) == before


def test_full_disk_while_downloading_is_one_line_not_a_retry(tmp_path, monkeypatch, capsys):
    """``/dev/full`` as the partial download: every write fails with ENOSPC, for real."""
    from bench.data import fetch as fetch_mod

    class Response(io.BytesIO):
        status, headers = 200, {"Content-Length": "10"}

    calls = []
    monkeypatch.setattr(fetch_mod, "_open", lambda url, start, timeout: calls.append(url) or Response(b"x" * 10))
    monkeypatch.setattr(fetch_mod.time, "sleep", lambda s: None)
    dest = tmp_path / "raw" / "a.zip"
    dest.parent.mkdir()
    (tmp_path / "raw" / "a.zip.part").symlink_to("/dev/full")
    with pytest.raises(fetch_mod.FileAccessError, match=r"a\.zip\.part: cannot write: no space left"):
        fetch_mod.download("http://127.0.0.1:9/a.zip", dest, None, 10, progress=False)
    assert len(calls) == 1 and not dest.exists()  # not retried as an interrupted transfer


# ------------------------------------------------------------------ fetch writes nothing of its own

def test_fetch_leaves_the_users_raw_folder_untouched(user_raw, tmp_path, capsys):
    args = user_raw(_zip([(f"Fold1/{s}.txt", b"1 qid:1 1:0.5\n") for s in ("train", "vali", "test")]))
    before = _listing(user_raw.group)
    assert cli_main(args + ["--no-extract"]) == 0  # verify only
    assert _listing(user_raw.group) == before  # no .verified.json, nothing at all
    records = list((tmp_path / "cache").glob("*.json"))
    assert len(records) == 1  # the verification record, in the suite's cache
    record = json.loads(records[0].read_text())
    archive = user_raw.group / "MSLR-WEB10K.zip"
    assert record["path"] == str(archive.resolve())
    assert record["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    capsys.readouterr()
    assert cli_main(args) == 0  # extract: the one thing added is extracted/
    after = _listing(user_raw.group)
    assert {k: v for k, v in after.items() if not k.startswith("extracted")} == before
    assert "verifying" not in capsys.readouterr().out  # the record spared a second hash
    registry = args[args.index("--registry") + 1]
    assert cli_main(["datasets", "--raw-dir", args[3], "--registry", registry,
                     "--checksum-cache", str(tmp_path / "cache")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("mslr-web10k"))
    assert "verified" in line


# ------------------------------------------------------------------ prepare

@pytest.fixture
def user_files(tmp_path, monkeypatch):
    """A hand-made train and test file registered as dataset ``mine`` (a registry override)."""
    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "raw"
    fold = raw / "mine" / "extracted" / "Fold1"
    fold.mkdir(parents=True)
    for split in ("train", "test"):  # four queries: vali is carved from train
        (fold / f"{split}.txt").write_text("".join(f"1 qid:{q} 1:0.5 2:0.1\n0 qid:{q} 1:0.2 2:0.3\n"
                                                   for q in range(1, 5)))
    override = tmp_path / "registry.json"
    override.write_text(json.dumps({"mine": {
        "title": "mine", "n_features": 2, "label_range": [0, 4], "licence": "own", "homepage": "-",
        "splits": {"train": "{fold}/train.txt", "test": "{fold}/test.txt"}}}))
    return fold, ["prepare", "mine", "--fold", "Fold1", "--raw-dir", str(raw), "--registry", str(override)]


def test_unreadable_source_file_is_one_line_and_prepares_nothing(user_files, tmp_path, monkeypatch, capsys):
    fold, args = user_files
    _deny_reading(monkeypatch, fold / "train.txt")
    out = tmp_path / "prepared" / "mine" / "Fold1"
    assert cli_main(args + ["--out", str(out)]) == 2
    line = _one_line(capsys, "prepare")
    assert f"{fold / 'train.txt'}: cannot read: permission denied" in line
    assert not (tmp_path / "prepared").exists()  # failed before anything was written
    assert cli_main(args + ["--fold", "Fold7", "--out", str(out)]) == 2  # and a fold it does not have
    assert "dataset 'mine' has no fold 'Fold7'; folds: Fold1" in _one_line(capsys, "prepare")


def test_out_not_writable_or_disk_full_is_one_line_and_leaves_nothing(user_files, tmp_path, monkeypatch, capsys):
    fold, args = user_files
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the output folder's parent should be")
    assert cli_main(args + ["--out", str(blocker / "Fold1")]) == 2
    line = _one_line(capsys, "prepare")
    assert f"{blocker / 'Fold1'}: cannot write (at {blocker}): a file is there where a folder is expected" in line

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(prepared_mod, "save_npy", full)  # the writer of the arrays
    parent = tmp_path / "prepared"
    parent.mkdir()
    assert cli_main(args + ["--out", str(parent / "Fold1")]) == 2
    line = _one_line(capsys, "prepare")
    assert f"{parent / 'Fold1'}: cannot write: no space left on the device" in line
    assert list(parent.iterdir()) == []  # no half-written fold, no temporary


def test_a_file_in_the_place_of_out_is_one_line_and_kept(user_files, tmp_path, capsys):
    fold, args = user_files
    out = tmp_path / "Fold1-out"
    out.write_text("not a prepared fold")
    assert cli_main(args + ["--out", str(out)]) == 2
    assert f"{out}: cannot write: a file is there where a folder is expected" in _one_line(capsys, "prepare")
    assert out.read_text() == "not a prepared fold" and sorted(p.name for p in tmp_path.glob(".*")) == []


def test_missing_split_file_is_one_line(user_files, tmp_path, capsys):
    fold, args = user_files
    (fold / "test.txt").unlink()
    assert cli_main(args + ["--out", str(tmp_path / "p")]) == 2
    line = _one_line(capsys, "prepare")
    assert "no file matches Fold1/test.txt for mine Fold1 test" in line and str(fold.parent) in line


# ------------------------------------------------------------------ bugs keep their traceback

def test_unknown_dataset_is_one_line_but_a_keyerror_bug_keeps_its_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for command in (["fetch", "nope"], ["prepare", "nope", "--fold", "Fold1", "--out", "p"]):
        assert cli_main(command) == 2
        assert "unknown dataset 'nope'; known: " in _one_line(capsys, command[0])

    def bug(*a, **k):
        return {}["a key the code forgot"]

    from bench.data import fetch as fetch_mod

    monkeypatch.setattr(fetch_mod, "fetch", bug)
    with pytest.raises(KeyError, match="a key the code forgot"):
        cli_main(["fetch", "mslr-web10k", "--raw-dir", str(tmp_path / "raw")])
    monkeypatch.setattr(prepare_mod, "prepare_fold", bug)
    with pytest.raises(KeyError, match="a key the code forgot"):
        cli_main(["prepare", "synthetic", "--fold", "Fold1", "--out", str(tmp_path / "p")])

    def value_bug(*a, **k):
        return np.zeros(2).reshape(3)

    monkeypatch.setattr(prepare_mod, "prepare_fold", value_bug)
    with pytest.raises(ValueError, match="cannot reshape"):  # a ValueError from a bug is not "usage"
        cli_main(["prepare", "synthetic", "--fold", "Fold1", "--out", str(tmp_path / "p")])


def test_bad_synthetic_and_registry_input_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli_main(["synthetic", "--out", "s.npz", "--options", '{"n_querys": 3}']) == 2
    assert "--options: unknown key(s) ['n_querys']" in _one_line(capsys, "synthetic")
    assert cli_main(["synthetic", "--out", "s.npz", "--options",
                     '{"n_queries": 3, "list_length": 4, "n_features": 6, "columns": "both"}']) == 2
    assert "columns must be 'shared' or 'per_query'" in _one_line(capsys, "synthetic")
    assert not (tmp_path / "s.npz").exists()
    (tmp_path / "f").write_text("a file")
    assert cli_main(["synthetic", "--out", "f/s.npz", "--options",
                     '{"n_queries": 3, "list_length": 4, "n_features": 6}']) == 2
    assert "f/s.npz: cannot write (at f): a file is there where a folder is expected" in _one_line(capsys, "synthetic")
    bad = tmp_path / "r.json"
    bad.write_text("[1, 2")
    assert cli_main(["fetch", "mslr-web10k", "--registry", str(bad)]) == 2
    assert f"{bad}: cannot read registry override" in _one_line(capsys, "fetch")
