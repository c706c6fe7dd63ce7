"""A full disk, tried for real (issue 21): extract, prepare, a training run and the report on a
small tmpfs as the work directory.

Each stage is first run with room to spare (the reference), then on the same paths with the
disk filled (a filler file leaves only a few kB free): the command must stop with exactly one
line ``ltr-bench <command>: error: <path>: cannot write: no space left on the device (needs X,
Y free there); free some space and run the same command again`` and leave nothing
half-written (no temporary, no output; a training run keeps only its complete checkpoint and
its progress record, as a killed run does). With the check before writing switched off, the
same fill makes the write itself fail half-way: the line then gives what is free, and the
partial file is gone too. Then the filler is removed and the same command must complete with
the reference's bytes (volatile fields aside: timings, extraction times).

Slow, and needs root to mount the tmpfs; skipped with the reason otherwise. Run it with:

    python -m pytest -m slow tests/test_full_disk.py
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from bench import atomic
from bench.atomic.space import free_bytes
from bench.cli import main as cli_main
from bench.results import write_frame
from helpers import TINY_OPTIONS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs as the work directory needs root"),
]

PAGE = 4096
SIZE = "8m"
NO_SPACE = (r"cannot write: no space left on the device \((needs [\d.]+ (bytes|kB|MB), )?[\d.]+ (bytes|kB|MB) "
            r"free there\); free some space and run the same command again")


class SmallDisk:
    """A tmpfs mounted at ``root``; :meth:`fill` leaves ``leave`` bytes free, :meth:`free` undoes it."""

    def __init__(self, root: Path):
        self.root = root
        self.filler = root / "filler"

    def fill(self, leave: int) -> None:
        self.free()
        size = free_bytes(self.root) - leave
        with open(self.filler, "wb") as fh:
            os.posix_fallocate(fh.fileno(), 0, size)
        assert free_bytes(self.root) == leave

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def listing(self) -> dict[str, bytes]:
        """Every file and folder on the disk but the filler (hidden ones included), with its bytes."""
        return {p.relative_to(self.root).as_posix(): (p.read_bytes() if p.is_file() else b"<dir>")
                for p in sorted(self.root.rglob("*")) if p != self.filler}

    def temporaries(self) -> list[str]:
        return [name for name in self.listing() if name.endswith(".tmp")]


@pytest.fixture(scope="module")
def mounted(tmp_path_factory):
    root = tmp_path_factory.mktemp("small-disk")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(root)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {(proc.stderr or proc.stdout).strip()}")
    yield root
    subprocess.run(["umount", "-l", str(root)], check=False)


@pytest.fixture
def disk(mounted, monkeypatch):
    """The small disk, empty, as the current directory."""
    for p in sorted(mounted.iterdir()):
        subprocess.run(["rm", "-rf", str(p)], check=True)
    monkeypatch.chdir(mounted)
    return SmallDisk(mounted)


def _fails(capsys, argv: list[str], *paths: Path, needs: bool) -> str:
    """Run ``ltr-bench argv``: status 2 and exactly one line naming one of ``paths`` (besides a
    run's progress lines); returned."""
    capsys.readouterr()
    assert cli_main(argv) == 2
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("progress ")]
    assert len(lines) == 1, lines
    named = "|".join(re.escape(str(p)) for p in paths)
    assert re.fullmatch(rf"ltr-bench {argv[0]}: error: ({named}): {NO_SPACE}", lines[0]), lines[0]
    assert ("(needs " in lines[0]) == needs, lines[0]
    return lines[0]


@contextlib.contextmanager
def _checking_first(monkeypatch, check: bool):
    """With ``check=False`` the check before writing is off: the write itself meets the full disk
    half-way."""
    with monkeypatch.context() as patch:
        if not check:
            patch.setattr(atomic, "require_space", lambda path, sizes, doing="write": None)
            patch.setattr(atomic, "require_files", lambda sizes, doing="write": None)
        yield


CHECKS = {"checked first": False, "full half-way": True}


# ------------------------------------------------------------------ extract


def _archive() -> bytes:
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for split in ("train", "vali", "test"):
            rows = [f"{rng.integers(0, 3)} qid:{q} " + " ".join(f"{j}:{rng.random():.6f}" for j in range(1, 11))
                    for q in range(1, 41) for _ in range(10)]
            zf.writestr(f"Fold1/{split}.txt", "\n".join(rows) + "\n")
    return buf.getvalue()


def _extracted(root: Path) -> dict:
    """The extracted files' bytes and the manifest without extraction times."""
    manifest = json.loads((root / ".manifest.json").read_text())
    for entry in manifest["files"].values():
        entry.pop("mtime_ns")
    return {"manifest": manifest, **{p.relative_to(root).as_posix(): p.read_bytes()
                                     for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".manifest.json"}}


@pytest.mark.parametrize("half_way", CHECKS.values(), ids=CHECKS.keys())
def test_extract(disk, capsys, monkeypatch, half_way):
    data = _archive()
    group = disk.root / "raw" / "mslr-web10k"
    group.mkdir(parents=True)
    (group / "MSLR-WEB10K.zip").write_bytes(data)
    (disk.root / "registry.json").write_text(json.dumps({"mslr-web10k": {
        "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "file_sha256": {}, "urls": []}}))
    argv = ["fetch", "mslr-web10k", "--raw-dir", str(disk.root / "raw"), "--registry", "registry.json",
            "--checksum-cache", "cache"]
    assert cli_main(argv) == 0  # with room: the reference
    reference = _extracted(group / "extracted")
    subprocess.run(["rm", "-rf", str(group / "extracted")], check=True)
    before = disk.listing()
    disk.fill(leave=8 * PAGE)  # the archive unpacks to 144 kB
    with _checking_first(monkeypatch, not half_way):
        _fails(capsys, argv, group / "extracted", needs=not half_way)
    assert disk.listing() == before  # no extracted/, no temporary
    disk.free()
    assert cli_main(argv) == 0
    assert _extracted(group / "extracted") == reference


# ------------------------------------------------------------------ prepare


def _prepared(root: Path) -> dict:
    """The prepared arrays' bytes and meta.json without its timing."""
    meta = json.loads((root / "meta.json").read_text())
    meta.pop("prepare_seconds")
    return {"meta": meta, **{p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.npy"))}}


@pytest.mark.parametrize("half_way", CHECKS.values(), ids=CHECKS.keys())
def test_prepare(disk, capsys, monkeypatch, half_way):
    out = disk.root / "prepared" / "synthetic" / "fold1"
    argv = ["prepare", "synthetic", "--fold", "fold1", "--out", str(out), "--options", json.dumps(TINY_OPTIONS),
            "--checksum-cache", "cache"]
    assert cli_main(argv) == 0
    reference = _prepared(out)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    before = disk.listing()
    disk.fill(leave=6 * PAGE)  # the fold takes 21 pages
    with _checking_first(monkeypatch, not half_way):
        _fails(capsys, argv, out, needs=not half_way)
    assert disk.listing() == before  # no fold, no temporary
    disk.free()
    assert cli_main(argv) == 0
    assert _prepared(out) == reference


# ------------------------------------------------------------------ a training run

CONFIG = {
    "model": {"type": "mlp", "hidden": [16, 8]},
    "train": {"epochs": 2, "batch_size": 8, "list_size": 12, "eval_batch_size": 7},
    "metrics": {"names": ["ndcg@5", "ndcg@10"], "empty_query": "one", "ties": "stable"},
    "methods": {"ranknet": {"loss": "ranknet"}},
}


def _run(root: Path) -> dict:
    """The run's scores and per-query metrics (bytes) and its curve without timings."""
    curve = pd.read_csv(root / "curve.csv").drop(columns="seconds")
    return {"scores": (root / "scores.npy").read_bytes(), "metrics": (root / "metrics.parquet").read_bytes(),
            "curve": curve.to_csv(index=False)}


@pytest.fixture
def training(disk):
    """A prepared fold and a config on the small disk; the train command's arguments."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    assert cli_main(["prepare", "synthetic", "--fold", "fold1", "--out", "prepared", "--options",
                     json.dumps(TINY_OPTIONS), "--checksum-cache", "cache"]) == 0
    (disk.root / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    yield ["train", "--prepared", "prepared", "--out", str(disk.root / "runs" / "seed0"), "--method", "ranknet",
           "--seed", "0", "--config", "config.yaml", "--device", "cpu", "--quiet", "--threads", "1"]
    torch.set_num_threads(threads)


# what fills the disk -> (pages left free, where the checkpoint goes, the file the line names)
WHERE = {
    "progress record": (0, None, "runs/.seed0.progress.json"),
    "checkpoint of epoch 2": (18, None, "runs/.seed0.ckpt/last.pt"),  # room for one checkpoint (10 pages)
    "run directory": (3, "elsewhere", "runs/seed0"),  # the run's files take 5 pages
}


@pytest.mark.parametrize("half_way", CHECKS.values(), ids=CHECKS.keys())
@pytest.mark.parametrize("where", WHERE, ids=WHERE)
def test_training_run(disk, training, capsys, monkeypatch, tmp_path, where, half_way):
    pages, checkpoints, named = WHERE[where]
    argv = training + (["--checkpoint-dir", str(tmp_path / "ckpt")] if checkpoints else [])
    out = disk.root / "runs" / "seed0"
    assert cli_main(argv) == 0
    reference = _run(out)
    subprocess.run(["rm", "-rf", str(out)], check=True)
    before = disk.listing()
    disk.fill(leave=pages * PAGE)
    with _checking_first(monkeypatch, not half_way):
        _fails(capsys, argv, disk.root / named, needs=not half_way)
    left = {name: data for name, data in disk.listing().items() if before.get(name) != data}
    assert not disk.temporaries() and not out.exists()
    # what a failed run keeps, as a killed one does: its progress record and complete checkpoints
    assert set(left) <= {"runs", "runs/.seed0.progress.json", "runs/.seed0.ckpt", "runs/.seed0.ckpt/last.pt"}
    if "runs/.seed0.progress.json" in left:
        json.loads(left["runs/.seed0.progress.json"])
    if "runs/.seed0.ckpt/last.pt" in left:
        import torch

        assert torch.load(disk.root / "runs/.seed0.ckpt/last.pt", weights_only=True)["epoch"] == 1
    disk.free()
    capsys.readouterr()
    assert cli_main(argv) == 0
    assert _run(out) == reference
    assert not disk.temporaries() and not (disk.root / "runs/.seed0.ckpt").exists()


# ------------------------------------------------------------------ the report


def _stats_and_scaling(where: Path) -> tuple[Path, Path]:
    """A statistics table and a perf CSV, the inputs of `ltr-bench table` and `figure`."""
    stats = pd.DataFrame(
        [("mslr", "ndcg@10", "a", 0.45, 0.01, 100, True, True), ("mslr", "ndcg@10", "b", 0.44, 0.02, 100, False, True),
         ("mslr", "arp", "a", 45.5, 0.5, 90, False, False), ("mslr", "arp", "b", 45.1, 0.4, 90, True, True)],
        columns=["dataset", "metric", "method", "mean", "std_over_seeds", "n_queries", "is_best", "not_worse"])
    stats["p_value"] = stats["p_adjusted"] = 0.5
    write_frame(stats, where / "stats.parquet")
    L = np.array([125, 1000, 2197, 3375], dtype=float)
    pd.DataFrame({"loss": ["ranknet"] * 4, "variant": [np.nan] * 4, "L": L, "seconds": 2e-6 * L**2,
                  "peak_mb": 3e-5 * L**2}).to_csv(where / "scaling.csv", index=False)
    return where / "stats.parquet", where / "scaling.csv"


SPEC = {"name": "demo", "title": "Demo table", "datasets": [{"name": "mslr", "label": "MSLR"}],
        "methods": [{"name": "a", "label": "Alpha"}, {"name": "b", "label": "Beta"}], "metrics": ["ndcg@10", "arp"],
        "seeds": [0, 1, 2], "stats": {"test": "t", "correction": "holm", "alpha": 0.05},
        "evaluation": {"empty_query": "zero", "ties": "stable"}}


@pytest.mark.parametrize("half_way", CHECKS.values(), ids=CHECKS.keys())
def test_report(disk, capsys, monkeypatch, tmp_path, half_way):
    stats, scaling = _stats_and_scaling(tmp_path)
    tables = disk.root / "reports" / "tables"
    figures = disk.root / "reports" / "figures"
    md, tex, html, png, pdf = (tables / "demo.md", tables / "demo.tex", tables / "demo.html",
                               figures / "scaling.png", figures / "scaling.pdf")
    commands = {  # outputs -> command; checked first, the line names the first output, half-way the one being written
        (md, tex, html): ["table", "demo", "--stats", str(stats), "--spec", json.dumps(SPEC), "--md", str(md),
                          "--tex", str(tex), "--html", str(html)],
        (png, pdf): ["figure", "scaling_figure", "--spec", '{"steps": 100, "batch_lists": 16}', "--input", str(scaling),
                     "--png", str(png), "--pdf", str(pdf)],
    }
    for argv in commands.values():
        assert cli_main(argv) == 0
    reference = disk.listing()
    subprocess.run(["rm", "-rf", str(disk.root / "reports")], check=True)
    (tables.mkdir(parents=True), figures.mkdir(parents=True))
    for outputs, argv in commands.items():
        before = disk.listing()
        disk.fill(leave=PAGE)  # each writes two or three files of one page or more
        with _checking_first(monkeypatch, not half_way):
            line = _fails(capsys, argv, *(outputs if half_way else outputs[:1]), needs=not half_way)
        assert disk.listing() == before, line  # none of the formats, no temporary
        disk.free()
        assert cli_main(argv) == 0
    assert disk.listing() == reference
