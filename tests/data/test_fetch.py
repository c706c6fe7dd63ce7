"""fetch / download / extract, for real, against an HTTP server on 127.0.0.1.

The server (http.server in a thread, loopback only, port chosen by the OS) serves archives
built here in the layouts of docs/datasets.md ("The datasets") and supports Range requests; fault switches
cut a transfer short, ignore Range, or serve a truncated file. Registry entries get the
test archive's URL, size and sha256 through ``dataclasses.replace`` or a JSON override.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import socket
import stat
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main as cli_main
from bench.data import REGISTRY, read_svmlight
from bench.data.extract import ExtractError, extract_archive
from bench.data.fetch import (
    ChecksumError,
    DownloadError,
    HostUnreachable,
    ManualDownloadRequired,
    TransferInterrupted,
    archive_state,
    download,
    fetch,
    find_split_file,
)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):  # noqa: N802 (http.server API)
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        body = srv.files.get(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and not srv.ignore_range:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = srv.cut_after.pop(self.path, None)
        payload = body[start:] if cut is None else body[start:start + cut]
        self.wfile.write(payload)
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.files, srv.cut_after, srv.requests, srv.ignore_range = {}, {}, [], False
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.shutdown()
    srv.server_close()


def _svm(rng, n_queries=3, n_features=136, dense=True, extra=""):
    rows = []
    for q in range(1, n_queries + 1):
        for _ in range(int(rng.integers(1, 5))):
            if dense:
                idx = np.arange(1, n_features + 1)
            else:
                idx = np.sort(rng.choice(np.arange(1, n_features + 1), 10, replace=False))
            feats = " ".join(f"{i}:{rng.normal():.5f}" for i in idx)
            rows.append(f"{rng.integers(0, 5)} qid:{q} {feats}{extra}")
    return ("\n".join(rows) + "\n").encode("latin-1")


def _zip(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _tar(members: dict, mode="w:gz", special=()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for info in special:
            tf.addfile(info)
    return buf.getvalue()


def _mslr_zip(rng) -> bytes:
    return _zip({f"Fold{k}/{s}.txt": _svm(rng) for k in range(1, 6) for s in ("train", "vali", "test")})


def _entry(name, url, data, **kw):
    return dataclasses.replace(REGISTRY[name], urls=(url,), size=len(data),
                               sha256=hashlib.sha256(data).hexdigest(), file_sha256={}, **kw)


def test_mslr_zip_download_extract_and_parse(server, tmp_path, rng):
    data = _mslr_zip(rng)
    server.files["/mslr.zip"] = data
    ds = _entry("mslr-web30k", server.url + "/mslr.zip", data)
    cache = tmp_path / "cache"
    out = fetch(ds, tmp_path, progress=False, checksum_cache=cache, log=lambda m: None)
    assert out == tmp_path / "mslr-web30k" / "extracted"
    assert (tmp_path / "mslr-web30k" / "MSLR-WEB30K.zip").read_bytes() == data
    assert sorted(p.name for p in (tmp_path / "mslr-web30k").iterdir()) == ["MSLR-WEB30K.zip", "extracted"]
    manifest = json.loads((out / ".manifest.json").read_text())
    assert len(manifest["files"]) == 15 and manifest["archive_sha256"] == ds.sha256
    for fold in ("Fold1", "Fold5"):
        X, y, q = read_svmlight(find_split_file(ds, tmp_path, fold, "vali"), 136, label_range=(0, 4))
        assert X.shape[1] == 136
    assert archive_state(ds, tmp_path, cache) == "verified"
    assert archive_state(ds, tmp_path) == "present, not verified"  # no record without the cache
    # second fetch: nothing downloaded again
    n = len(server.requests)
    fetch(ds, tmp_path, progress=False, checksum_cache=cache, log=lambda m: None)
    assert len(server.requests) == n


def test_known_file_checksums_are_checked(server, tmp_path, rng):
    data = _mslr_zip(rng)
    server.files["/m.zip"] = data
    ds = dataclasses.replace(_entry("mslr-web30k", server.url + "/m.zip", data),
                             file_sha256={"Fold1/train.txt": "0" * 64})
    with pytest.raises(ExtractError, match="Fold1/train.txt.*differs from the published"):
        fetch(ds, tmp_path, progress=False, log=lambda m: None)


def test_interrupted_transfer_resumes_with_range(server, tmp_path):
    data = os.urandom(300_000)
    server.files["/a.bin"] = data
    server.cut_after["/a.bin"] = 100_000
    dest = tmp_path / "a.bin"
    sha = hashlib.sha256(data).hexdigest()
    with pytest.raises(TransferInterrupted, match="run the same command again to resume"):
        download(server.url + "/a.bin", dest, sha, len(data), retries=0, progress=False)
    part = tmp_path / "a.bin.part"
    assert part.stat().st_size == 100_000 and not dest.exists()
    download(server.url + "/a.bin", dest, sha, len(data), retries=0, progress=False)
    assert dest.read_bytes() == data and not part.exists()
    assert server.requests[-1] == ("/a.bin", "bytes=100000-")


def test_interruption_is_retried_within_one_call(server, tmp_path):
    data = os.urandom(200_000)
    server.files["/b.bin"] = data
    server.cut_after["/b.bin"] = 50_000
    dest = download(server.url + "/b.bin", tmp_path / "b.bin", hashlib.sha256(data).hexdigest(),
                    len(data), retries=2, progress=False)
    assert dest.read_bytes() == data
    assert [r for _, r in server.requests] == [None, "bytes=50000-"]


def test_server_ignoring_range_restarts(server, tmp_path):
    data = os.urandom(100_000)
    server.files["/c.bin"] = data
    server.ignore_range = True
    (tmp_path / "c.bin.part").write_bytes(data[:30_000])
    download(server.url + "/c.bin", tmp_path / "c.bin", hashlib.sha256(data).hexdigest(),
             len(data), progress=False)
    assert (tmp_path / "c.bin").read_bytes() == data


def test_wrong_checksum_moves_aside_and_extracts_nothing(server, tmp_path, rng):
    data = _mslr_zip(rng)
    server.files["/m.zip"] = data
    ds = dataclasses.replace(_entry("mslr-web30k", server.url + "/m.zip", data), sha256="ab" * 32)
    with pytest.raises(ChecksumError, match="sha256 mismatch: expected abab.*moved aside to"):
        fetch(ds, tmp_path, progress=False, log=lambda m: None)
    group = tmp_path / "mslr-web30k"
    assert (group / "MSLR-WEB30K.zip.corrupt").exists()
    assert not (group / "MSLR-WEB30K.zip").exists() and not (group / "extracted").exists()


def test_truncated_file_on_server_fails_size_check(server, tmp_path):
    data = os.urandom(50_000)
    server.files["/t.bin"] = data[:40_000]
    with pytest.raises(ChecksumError, match="size 40000 bytes, expected 50000"):
        download(server.url + "/t.bin", tmp_path / "t.bin", hashlib.sha256(data).hexdigest(),
                 len(data), progress=False)
    assert (tmp_path / "t.bin.corrupt").stat().st_size == 40_000


def test_http_404_names_url_and_what_to_do(server, tmp_path):
    ds = dataclasses.replace(REGISTRY["istella-s"], urls=(server.url + "/gone.tar.gz",))
    with pytest.raises(DownloadError, match=r"gone\.tar\.gz: HTTP 404.*--url.*place it at") as info:
        fetch(ds, tmp_path, progress=False, log=lambda m: None)
    assert str(tmp_path / "istella-s" / "istella-s-letor.tar.gz") in str(info.value)


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on (bound by the OS, then released): connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return port


def _assert_offline_message(msg: str, archive: Path) -> None:
    """What an offline fetch must say: cannot reach, --url, the exact path; no resume claimed."""
    assert "cannot reach" in msg and "--url" in msg and str(archive.resolve()) in msg
    assert "interrupted" not in msg and "partial" not in msg and "resume" not in msg
    assert not archive.with_name(archive.name + ".part").exists() and not archive.exists()


def test_refused_connection_says_cannot_reach_names_url_and_path(tmp_path, closed_port):
    ds = _entry("mslr-web10k", f"http://127.0.0.1:{closed_port}/MSLR-WEB10K.zip", b"x" * 10)
    with pytest.raises(HostUnreachable) as info:
        fetch(ds, tmp_path, progress=False, retries=1, log=lambda m: None)
    msg = str(info.value)
    _assert_offline_message(msg, tmp_path / "mslr-web10k" / "MSLR-WEB10K.zip")
    assert f"cannot reach 127.0.0.1:{closed_port}: the connection was refused" in msg and "2 attempt(s)" in msg
    assert ds.homepage in msg and ds.sha256 in msg  # where to get it by hand, and what it is checked against
    assert list(tmp_path.iterdir()) == []  # no empty mslr-web10k/ left behind


def test_a_failed_download_removes_only_the_empty_folders_it_created(tmp_path, closed_port):
    url = f"http://127.0.0.1:{closed_port}/f.zip"
    with pytest.raises(HostUnreachable):
        download(url, tmp_path / "raw" / "group" / "f.zip", None, retries=0, progress=False)
    assert not (tmp_path / "raw").exists()  # both created by the call, both empty
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "mine.txt").write_text("the user's")
    with pytest.raises(HostUnreachable):
        download(url, tmp_path / "raw" / "group" / "f.zip", None, retries=0, progress=False)
    assert [p.name for p in (tmp_path / "raw").iterdir()] == ["mine.txt"]  # the user's folder stays


def test_unresolvable_host_says_the_name_does_not_resolve(tmp_path):
    dest = tmp_path / "a" / "MSLR-WEB10K.zip"
    with pytest.raises(HostUnreachable, match=r"cannot reach ltr-bench-offline\.invalid: its name does not resolve") as info:
        download("http://ltr-bench-offline.invalid/MSLR-WEB10K.zip", dest, None, retries=0, progress=False)
    _assert_offline_message(str(info.value), dest)


def test_silent_host_times_out_as_unreachable(tmp_path):
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/f.zip"
        with pytest.raises(HostUnreachable, match=r"no answer within 0\.2 s") as info:
            download(url, tmp_path / "f.zip", None, retries=0, timeout=0.2, progress=False)
    _assert_offline_message(str(info.value), tmp_path / "f.zip")


def test_unreachable_host_keeps_and_names_an_earlier_partial_file(tmp_path, closed_port):
    part = tmp_path / "f.zip.part"
    part.write_bytes(b"y" * 1234)
    with pytest.raises(HostUnreachable, match=r"the partial file .*f\.zip\.part \(1234 bytes, from an earlier run\) is kept"):
        download(f"http://127.0.0.1:{closed_port}/f.zip", tmp_path / "f.zip", None, retries=0, progress=False)
    assert part.read_bytes() == b"y" * 1234


def test_transfer_broken_before_any_data_claims_no_partial_file(server, tmp_path):
    server.files["/e.bin"] = os.urandom(1000)
    server.cut_after["/e.bin"] = 0  # headers, then the connection closes
    with pytest.raises(TransferInterrupted, match="before any data arrived.*no partial file is kept"):
        download(server.url + "/e.bin", tmp_path / "e.bin", None, retries=0, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_cli_offline_fetch_and_datasets_paths(tmp_path, closed_port, capsys, monkeypatch):
    """Offline: one line naming --url and the path; `datasets` shows that path and the archive's
    state as it goes from missing to placed by hand to verified."""
    monkeypatch.chdir(tmp_path)
    data = _mslr_zip(np.random.default_rng(0))
    override = tmp_path / "reg.json"
    override.write_text(json.dumps({"mslr-web10k": {
        "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "file_sha256": {},
        "urls": [f"http://127.0.0.1:{closed_port}/MSLR-WEB10K.zip"]}}))
    common = ["--raw-dir", "raw", "--registry", str(override)]
    archive = (tmp_path / "raw" / "mslr-web10k" / "MSLR-WEB10K.zip").resolve()

    def datasets_line() -> list[str]:
        assert cli_main(["datasets", *common, "--prepared-dir", "prep"]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("mslr-web10k"))
        assert line.endswith(f"  {archive}")
        return line

    assert "  missing  " in datasets_line()
    assert cli_main(["fetch", "mslr-web10k", *common]) == 2
    err = capsys.readouterr().err.strip()  # one line: the heartbeat's first line would come 30 s in
    assert len(err.splitlines()) == 1 and err.startswith("ltr-bench fetch: error: mslr-web10k: cannot reach")
    _assert_offline_message(err, archive)
    assert not (tmp_path / "raw").exists()  # a failed fetch leaves no empty raw/mslr-web10k/
    archive.parent.mkdir(parents=True)
    archive.write_bytes(data)  # fetched by hand, placed where the message said
    assert "  present, not verified  " in datasets_line()
    assert cli_main(["fetch", "mslr-web10k", *common]) == 0  # no network needed: verified and extracted
    capsys.readouterr()
    assert "  verified  " in datasets_line()


def test_manual_dataset_missing_says_where_and_from_where(tmp_path):
    with pytest.raises(ManualDownloadRequired) as info:
        fetch(REGISTRY["yahoo-set1"], tmp_path, log=lambda m: None)
    msg = str(info.value)
    assert str((tmp_path / "yahoo" / "dataset.tgz").resolve()) in msg
    assert "webscope" in msg.lower() and "dataset.tgz" in msg


def test_yahoo_nested_manual_archive_verified_and_extracted(tmp_path, rng):
    inner = _tar({f"set{k}.{s}.txt": _svm(rng, n_features=700, dense=False, extra=" # x")
                  for k in (1, 2) for s in ("train", "valid", "test")}, mode="w:bz2")
    outer = _tar({"ltrc_yahoo.tar.bz2": inner})
    (tmp_path / "yahoo").mkdir()
    (tmp_path / "yahoo" / "dataset.tgz").write_bytes(outer)
    ds = dataclasses.replace(REGISTRY["yahoo-set2"], sha256=hashlib.sha256(outer).hexdigest())
    assert archive_state(ds, tmp_path) == "present, not verified"
    out = fetch(ds, tmp_path, log=lambda m: None)
    assert not (out / "ltrc_yahoo.tar.bz2").exists()
    X, _, _ = read_svmlight(find_split_file(ds, tmp_path, "Fold1", "vali"), 700)
    assert X.shape[1] == 700
    # a wrong hand-placed archive is moved aside with the expected checksum in the message
    bad = dataclasses.replace(REGISTRY["yahoo-set1"], group="yahoo-bad", sha256="cd" * 32)
    (tmp_path / "yahoo-bad").mkdir()
    (tmp_path / "yahoo-bad" / "dataset.tgz").write_bytes(outer)
    with pytest.raises(ChecksumError, match="expected cdcd"):
        fetch(bad, tmp_path, log=lambda m: None)


def test_istella_tar_gz_layout(server, tmp_path, rng):
    train = _svm(rng, n_features=220) + b"1 qid:99 1:1.79769313486e+308 # caf\xe9\n"
    data = _tar({"full/train.txt": train, "full/test.txt": _svm(rng, n_features=220)})
    server.files["/istella.tar.gz"] = data
    ds = _entry("istella", server.url + "/istella.tar.gz", data)
    fetch(ds, tmp_path, progress=False, log=lambda m: None)
    assert find_split_file(ds, tmp_path, "Fold1", "vali") is None
    X, _, _ = read_svmlight(find_split_file(ds, tmp_path, "Fold1", "train"), 220)
    assert np.isinf(X[-1, 0])


def _special(name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.mark.parametrize("build, fragment", [
    (lambda: _tar({"/etc/evil.txt": b"x"}), "absolute path"),
    (lambda: _tar({"Fold1/../../evil.txt": b"x"}), "'..' escapes"),
    (lambda: _tar({"a.txt": b"x"}, special=[_special("link", tarfile.SYMTYPE, "../../etc/passwd")]),
     "points outside"),
    (lambda: _tar({"a.txt": b"x"}, special=[_special("hard", tarfile.LNKTYPE, "/etc/passwd")]),
     "points outside"),
    (lambda: _tar({"a.txt": b"x"}, special=[_special("dev", tarfile.CHRTYPE)]), "device file"),
    (lambda: _tar({"a.txt": b"x"}, special=[_special("fifo", tarfile.FIFOTYPE)]), "device file"),
    (lambda: _zip({"../evil.txt": b"x"}), "'..' escapes"),
    (lambda: _zip({"/abs.txt": b"x"}), "absolute path"),
    (lambda: _zip({"C:\\win.txt": b"x"}), "absolute path"),
])
def test_malicious_members_are_refused(tmp_path, build, fragment):
    archive = tmp_path / "evil.archive"
    archive.write_bytes(build())
    dest = tmp_path / "out" / "extracted"
    with pytest.raises(ExtractError, match=fragment):
        extract_archive(archive, dest)
    assert not dest.exists() and list((tmp_path / "out").iterdir()) == []
    assert not (tmp_path / "evil.txt").exists()


def test_zip_symlink_member_refused(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    (tmp_path / "l.zip").write_bytes(buf.getvalue())
    with pytest.raises(ExtractError, match="symbolic link"):
        extract_archive(tmp_path / "l.zip", tmp_path / "x")


def test_links_inside_the_tree_are_materialised(tmp_path):
    data = _tar({"d/a.txt": b"hello"}, special=[_special("d/b.txt", tarfile.SYMTYPE, "a.txt")])
    (tmp_path / "ok.tgz").write_bytes(data)
    extract_archive(tmp_path / "ok.tgz", tmp_path / "x")
    b = tmp_path / "x" / "d" / "b.txt"
    assert not b.is_symlink() and b.read_bytes() == b"hello"


def test_corrupt_archive_is_reported(tmp_path):
    data = _tar({"big.txt": os.urandom(200_000)})
    (tmp_path / "cut.tgz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ExtractError, match="truncated or corrupt"):
        extract_archive(tmp_path / "cut.tgz", tmp_path / "x")
    (tmp_path / "page.zip").write_bytes(b"<html>not found</html>")
    with pytest.raises(ExtractError, match="HTML error page"):
        extract_archive(tmp_path / "page.zip", tmp_path / "y")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def _rar_bytes() -> bytes:
    return b"Rar!\x1a\x07\x00" + b"\x00" * 64


def test_rar_without_extractor_names_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    (tmp_path / "MQ2007.rar").write_bytes(_rar_bytes())
    with pytest.raises(ExtractError, match="unrar.*7z.*bsdtar.*apt-get install unrar"):
        extract_archive(tmp_path / "MQ2007.rar", tmp_path / "x")


def _fake_unrar(bin_dir: Path, script_body: str) -> None:
    bin_dir.mkdir()
    tool = bin_dir / "unrar"
    tool.write_text("#!/bin/sh\n# fake unrar for tests: args x -o+ -y -idq ARCHIVE DEST/\n"
                    'DEST="$6"\n' + script_body)
    tool.chmod(0o755)


def test_rar_with_extractor_on_path(tmp_path, monkeypatch, rng):
    body = _svm(rng, n_features=46, extra=" #docid = GX000-00-0000000 inc = 1")
    src = tmp_path / "payload.txt"
    src.write_bytes(body)
    _fake_unrar(tmp_path / "bin", 'for f in 1 2 3 4 5; do for s in train vali test; do\n'
                f'mkdir -p "$DEST/MQ2007/Fold$f"; cp {src} "$DEST/MQ2007/Fold$f/$s.txt"; done; done\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    group = tmp_path / "raw" / "mq2007"
    group.mkdir(parents=True)
    (group / "MQ2007.rar").write_bytes(_rar_bytes())
    ds = dataclasses.replace(REGISTRY["mq2007"], md5=None)
    fetch(ds, tmp_path / "raw", log=lambda m: None)
    X, y, q = read_svmlight(find_split_file(ds, tmp_path / "raw", "Fold3", "test"), 46)
    assert X.shape[1] == 46


def test_rar_tool_output_with_outside_link_is_refused(tmp_path, monkeypatch):
    _fake_unrar(tmp_path / "bin", 'mkdir -p "$DEST/MQ2008"; ln -s /etc/passwd "$DEST/MQ2008/x"\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    (tmp_path / "MQ2008.rar").write_bytes(_rar_bytes())
    with pytest.raises(ExtractError, match="points outside"):
        extract_archive(tmp_path / "MQ2008.rar", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_cli_fetch_with_registry_override_and_mirror(server, tmp_path, rng, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --checksum-cache is relative: results/cache/source-sha256
    data = _mslr_zip(rng)
    server.files["/mirror/MSLR-WEB10K.zip"] = data
    override = tmp_path / "reg.json"
    override.write_text(json.dumps({"mslr-web10k": {
        "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "file_sha256": {},
        "urls": [server.url + "/stale-link"]}}))
    raw = tmp_path / "raw"
    rc = cli_main(["fetch", "mslr-web10k", "--raw-dir", str(raw), "--registry", str(override),
                   "--url", server.url + "/mirror/MSLR-WEB10K.zip"])
    assert rc == 0 and (raw / "mslr-web10k" / "extracted" / "Fold2" / "test.txt").exists()
    assert all(p != "/stale-link" for p, _ in server.requests)
    capsys.readouterr()
    rc = cli_main(["datasets", "--raw-dir", str(raw), "--registry", str(override),
                   "--prepared-dir", str(tmp_path / "prep")])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("mslr-web10k"))
    assert rc == 0 and "verified" in line
    assert len(list((tmp_path / "results" / "cache" / "source-sha256").glob("*.json"))) == 1  # the record
    assert "missing" in next(x for x in out.splitlines() if x.startswith("mslr-web30k"))
    # a 404 through the CLI is a user error with exit status 2
    rc = cli_main(["fetch", "mslr-web10k", "--raw-dir", str(tmp_path / "raw2"),
                   "--registry", str(override)])
    assert rc == 2 and "HTTP 404" in capsys.readouterr().err


def test_registry_override_errors_name_the_key(tmp_path):
    from bench.data.registry import load_registry

    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"mslr-web30k": {"sha": "x"}}))
    with pytest.raises(ValueError, match=r"r\.json: entry 'mslr-web30k': unknown field\(s\) \['sha'\]"):
        load_registry(bad)


def test_pip_download_moves_the_source_distribution_into_place_or_says_where_to_put_it(tmp_path, monkeypatch):
    """``mslr-web30k-sample`` is fetched with pip from the registry: the command asks for the
    source distribution alone; the one file pip wrote becomes the archive; anything else is a
    DownloadError naming where to place the file (no pip process runs here: subprocess.run is faked)."""
    import subprocess
    import sys

    from bench.data.fetch import pip_download

    ds = REGISTRY["mslr-web30k-sample"]
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        out = Path(cmd[cmd.index("-d") + 1])
        (out / ds.archive).write_bytes(b"sdist")
        return subprocess.CompletedProcess(cmd, 0, "Saved\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    archive = tmp_path / "raw" / ds.raw_group / ds.archive
    assert pip_download(ds, archive, log=lambda m: None) == archive and archive.read_bytes() == b"sdist"
    cmd = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"] and "rankeval==0.8.2" in cmd
    assert cmd[cmd.index("--no-binary") + 1] == "rankeval" and "--no-deps" in cmd
    assert not any(p.name.startswith(".pip-") for p in archive.parent.iterdir())  # its temporary folder is gone

    def failing_run(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for rankeval==0.8.2")

    monkeypatch.setattr(subprocess, "run", failing_run)
    with pytest.raises(DownloadError, match=r"No matching distribution.*place it at .*rankeval-0.8.2.tar.gz"):
        pip_download(ds, tmp_path / "other" / ds.archive, log=lambda m: None)
