"""Frozen baselines: per-query results of every baseline, pinned to a protocol and the data.

Layout of ``results/frozen/<profile>/<dataset>/``::

    manifest.json             what the results are valid for (below)
    baselines/<method>.parquet   per-query test metrics of one baseline, every fold and seed
                                 (columns dataset, fold, seed, method, query, metrics,
                                 <metric>:dropped)

``manifest.json`` holds the study protocol (:func:`bench.config.plan.study_protocol`: data
recipe, folds, model, schedule, seeds, metric conventions -- never the methods) and its
canonical sha256 (:func:`protocol_hash`), the dataset fingerprint of every fold (the
``fingerprint`` of the prepared fold's meta.json: sha256 over its arrays), the code version
(package version, git commit, dirty flag), library versions, and the sha256 of every results
file. Refreshing it is the explicit ``freeze`` target, never a side effect.

:func:`check_frozen` is what ``compare`` runs before training anything: it refuses, naming
what differs, when a results file fails its checksum, when the protocol differs (listing
each differing field with both values) or when a fold's dataset fingerprint differs.

>>> protocol_hash({"a": 1, "b": [1, 2]}) == protocol_hash({"b": [1, 2], "a": 1})
True
>>> protocol_diff({"train": {"epochs": 3, "lr": 0.1}}, {"train": {"epochs": 5, "lr": 0.1}})
['train.epochs: frozen 3, current 5']
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from bench.atomic import atomic_path
from bench.data.extract import file_sha256
from bench.errors import FrozenMismatch, UsageError
from bench.provenance import canonical_json, git_commit, library_versions, protocol_hash
from bench.results import read_frames

FORMAT = 1
MANIFEST = "manifest.json"
BASELINES = "baselines"


def protocol_diff(frozen: Any, current: Any, prefix: str = "") -> list[str]:
    """Every field where two protocols differ, as ``path: frozen X, current Y`` lines."""
    if isinstance(frozen, dict) and isinstance(current, dict):
        out = []
        for key in sorted(set(frozen) | set(current), key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in frozen:
                out.append(f"{where}: absent in the frozen protocol, current {json.dumps(current[key])}")
            elif key not in current:
                out.append(f"{where}: frozen {json.dumps(frozen[key])}, absent in the current protocol")
            else:
                out.extend(protocol_diff(frozen[key], current[key], where))
        return out
    if canonical_json(frozen) != canonical_json(current):
        return [f"{prefix or '<protocol>'}: frozen {json.dumps(frozen)}, current {json.dumps(current)}"]
    return []


def fold_fingerprints(prepared_dirs: list[str | Path]) -> dict[str, str]:
    """Fold name -> dataset fingerprint, from each prepared fold's meta.json."""
    out = {}
    for d in prepared_dirs:
        meta_path = Path(d) / "meta.json"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FrozenMismatch(f"{meta_path}: prepared fold not found (run the prepare step first)") from None
        out[str(meta["fold"])] = str(meta["fingerprint"])
    return out


def freeze(
    per_query: pd.DataFrame,
    out_dir: str | Path,
    *,
    profile: str,
    dataset: str,
    protocol: dict[str, Any],
    prepared_dirs: list[str | Path],
) -> Path:
    """Write the frozen baselines of one dataset (one parquet per method) and the manifest."""
    out_dir = Path(out_dir)
    if per_query.empty:
        raise ValueError("nothing to freeze: the per-query frame is empty")
    commit, dirty = git_commit()
    versions = library_versions()
    with atomic_path(out_dir, is_dir=True) as tmp:
        (tmp / BASELINES).mkdir()
        files = {}
        for method, frame in per_query.groupby("method", sort=True):
            rel = f"{BASELINES}/{method}.parquet"
            frame = frame.sort_values(["fold", "seed", "query"], kind="stable").reset_index(drop=True)
            frame.to_parquet(tmp / rel, index=False)
            files[rel] = file_sha256(tmp / rel)
        manifest = {
            "format": FORMAT,
            "profile": profile,
            "dataset": dataset,
            "protocol": protocol,
            "protocol_hash": protocol_hash(protocol),
            "dataset_fingerprints": fold_fingerprints(prepared_dirs),
            "methods": sorted(per_query["method"].unique().tolist()),
            "code_version": {"ltr-bench": versions.get("ltr-bench"), "git_commit": commit, "git_dirty": dirty},
            "versions": versions,
            "files": files,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out_dir


def read_manifest(frozen_dir: str | Path) -> dict[str, Any]:
    path = Path(frozen_dir) / MANIFEST
    if not path.exists():
        raise FrozenMismatch(
            f"{path}: no frozen baselines here; build them with `snakemake --cores 2 freeze` (an explicit target)"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FrozenMismatch(f"{path}: manifest is not valid JSON ({exc})") from None


def verify_files(frozen_dir: str | Path, manifest: dict[str, Any]) -> None:
    """Every results file listed in the manifest exists and has its recorded sha256."""
    for rel, expected in sorted(manifest["files"].items()):
        path = Path(frozen_dir) / rel
        if not path.exists():
            raise FrozenMismatch(f"frozen file {path} is missing (listed in {MANIFEST})")
        actual = file_sha256(path)
        if actual != expected:
            raise FrozenMismatch(
                f"frozen file {path} fails its checksum: manifest sha256 {expected}, file sha256 {actual}"
            )


def check_frozen(frozen_dir: str | Path, protocol: dict[str, Any], fingerprints: dict[str, str]) -> dict[str, Any]:
    """Refuse (``FrozenMismatch`` naming what differs) unless files, protocol and data all match."""
    manifest = read_manifest(frozen_dir)
    verify_files(frozen_dir, manifest)
    current_hash = protocol_hash(protocol)
    if manifest["protocol_hash"] != current_hash:
        diffs = protocol_diff(manifest["protocol"], protocol)
        detail = "; ".join(diffs) if diffs else "the recorded protocol does not hash to the recorded hash"
        raise FrozenMismatch(
            f"protocol differs from the frozen one in {Path(frozen_dir)} (hash {manifest['protocol_hash'][:12]} "
            f"frozen, {current_hash[:12]} current): {detail}"
        )
    frozen_fp = manifest["dataset_fingerprints"]
    for fold in sorted(set(frozen_fp) | set(fingerprints)):
        if fold not in fingerprints:
            raise FrozenMismatch(f"dataset fingerprint: fold {fold} is frozen but not prepared now")
        if fold not in frozen_fp:
            raise FrozenMismatch(f"dataset fingerprint: fold {fold} is prepared now but has no frozen baselines")
        if frozen_fp[fold] != fingerprints[fold]:
            raise FrozenMismatch(
                f"dataset fingerprint of {manifest['dataset']} {fold} differs: frozen {frozen_fp[fold]}, "
                f"current {fingerprints[fold]} (the prepared data changed)"
            )
    return manifest


def load_frozen(frozen_dir: str | Path, manifest: dict[str, Any]) -> pd.DataFrame:
    """The frozen per-query frame of every baseline (call after :func:`check_frozen`)."""
    frames = [pd.read_parquet(Path(frozen_dir) / rel) for rel in sorted(manifest["files"])]
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- CLI


def _cli_freeze(args) -> int:
    try:
        protocol = json.loads(args.protocol)
        per_query = read_frames(args.per_query)
        freeze(per_query, args.out, profile=args.profile, dataset=args.dataset, protocol=protocol,
               prepared_dirs=args.prepared)
    except (ValueError, FrozenMismatch) as exc:
        raise UsageError(str(exc)) from exc
    print(f"froze {per_query['method'].nunique()} baselines of {args.dataset} into {args.out}")
    return 0


def _cli_check(args) -> int:
    try:
        manifest = check_frozen(args.frozen, json.loads(args.protocol), fold_fingerprints(args.prepared))
    except (FrozenMismatch, json.JSONDecodeError) as exc:
        raise UsageError(f"refusing to compare: {exc}") from exc
    if args.out:
        with atomic_path(args.out) as tmp:
            tmp.write_text(json.dumps({"frozen": str(args.frozen), "protocol_hash": manifest["protocol_hash"],
                                       "dataset_fingerprints": manifest["dataset_fingerprints"]}, indent=2) + "\n")
    print(f"{args.frozen}: checksums, protocol and dataset fingerprints match")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench freeze`` and ``ltr-bench check-frozen``."""
    p = subparsers.add_parser("freeze", help="store per-query baseline results with a manifest")
    p.add_argument("--per-query", required=True, nargs="+", help="evaluated per-query parquet files")
    p.add_argument("--prepared", required=True, nargs="+", help="prepared fold directories (fingerprints)")
    p.add_argument("--protocol", required=True, help="the study protocol as JSON")
    p.add_argument("--profile", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--out", required=True, help="results/frozen/<profile>/<dataset>")
    p.set_defaults(func=_cli_freeze)
    c = subparsers.add_parser("check-frozen", help="verify frozen baselines against the current protocol and data")
    c.add_argument("--frozen", required=True, help="results/frozen/<profile>/<dataset>")
    c.add_argument("--protocol", required=True, help="the current study protocol as JSON")
    c.add_argument("--prepared", required=True, nargs="+", help="current prepared fold directories")
    c.add_argument("--out", help="write a small JSON stamp here when everything matches")
    c.set_defaults(func=_cli_check)
