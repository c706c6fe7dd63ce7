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
:func:`check_reproduced` is the default study's check that its runs of the frozen methods give
the frozen files' bits: per query identical on the freezing platform, and on any other CPU
when both trained with pinned kernels (:mod:`bench.training.determinism`); within
``freeze.platform_tolerance`` of the means otherwise.

>>> protocol_hash({"a": 1, "b": [1, 2]}) == protocol_hash({"b": [1, 2], "a": 1})
True
>>> protocol_diff({"train": {"epochs": 3, "lr": 0.1}}, {"train": {"epochs": 5, "lr": 0.1}})
['train.epochs: frozen 3, current 5']
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from platform import libc_ver
from typing import Any

import numpy as np
import pandas as pd

from bench.atomic import atomic_path
from bench.config import kinds
from bench.data.extract import file_sha256
from bench.errors import FrozenMismatch, UsageError
from bench.provenance import canonical_json, git_commit, library_versions, platform_facts, protocol_hash
from bench.results import read_frames, read_record

FORMAT = 3  # 3: platform.libc, and pinned kernels (kernels_pinned) make the CPU's facts irrelevant
MANIFEST = "manifest.json"
BASELINES = "baselines"
#: what the manifest says the per-query bits depend on (measured: docs/compare.md, "What the bits depend on")
DEPENDS_ON = ("the code (code_version), the protocol (protocol_hash), the data (dataset_fingerprints) and the "
              "platform: torch's CPU capability and the ISA environment variables (pinned kernels: ATen's scalar "
              "build, MKL's COMPATIBLE branch), the C library, the computing libraries' versions, torch's thread "
              "count and, unless the kernels are pinned, the CPU model and SIMD flags (platform); another "
              "platform gives other bits that land within freeze.platform_tolerance of the means")
#: platform facts that pick no kernel of a pinned run (:func:`kernels_pinned`): with pinned kernels
#: on both sides a difference here still requires per-query identical results
CPU_FACTS = ("cpu", "cpu_isa")


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
    platform: dict[str, Any] | None = None,
    tuning: list[dict[str, Any]] | None = None,
) -> Path:
    """Write the frozen baselines of one dataset (one parquet per method) and the manifest;
    ``platform`` (:func:`current_platform` of the machine that trained them) is what a re-run
    must match to reproduce them bit for bit (with pinned kernels on both sides, all but the
    CPU's model and flags, :data:`CPU_FACTS`); ``tuning`` the tuning records
    (:mod:`bench.selection.tuning`) of the tuned baselines: the manifest keeps each one's chosen
    configuration, search space, budget and validation mean (:func:`tuning_facts`)."""
    out_dir = Path(out_dir)
    if per_query.empty:
        raise ValueError("nothing to freeze: the per-query frame is empty")
    commit, dirty = git_commit(outside=out_dir)
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
            "platform": platform,
            "bits_depend_on": DEPENDS_ON,
            "tuning": tuning_facts(tuning or [], per_query["method"].unique().tolist()),
            "files": files,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out_dir


def tuning_facts(records: list[dict[str, Any]], methods: list[str]) -> dict[str, Any]:
    """What the manifest says about tuning: per baseline its budget (configurations tried; 1 =
    trained once at its configured values), the chosen configuration and its settings, the
    validation mean that chose it, the search space; and the split and seeds that chose.

    >>> rec = {"fold": "Fold1", "seeds": [0], "budget": 3, "tuning": {"space_text": "train.lr ..."},
    ...        "methods": {"m": {"chosen": "m+cfg2", "chosen_label": "lr = 0.01", "chosen_settings": {"train.lr": 0.01},
    ...                          "metric": "ndcg@10", "points": [{"name": "m+cfg2", "mean": 0.9}]}}}
    >>> tuning_facts([rec], ["m", "n"])["methods"]["n"]
    {'budget': 1, 'chosen': 'n', 'chosen_label': 'default (not tuned)'}
    """
    out: dict[str, Any] = {"methods": {}}
    for record in records:
        (method, entry), = record["methods"].items()
        out.update(fold=record["fold"], seeds=record["seeds"])
        out["methods"][method] = {
            "budget": record["budget"], "chosen": entry["chosen"], "chosen_label": entry["chosen_label"],
            "chosen_settings": entry["chosen_settings"], "metric": entry["metric"], "space": record["tuning"]["space_text"],
            "validation_mean": next(p["mean"] for p in entry["points"] if p["name"] == entry["chosen"])}
    for method in sorted(set(methods) - set(out["methods"])):
        out["methods"][method] = {"budget": 1, "chosen": method, "chosen_label": "default (not tuned)"}
    out["methods"] = dict(sorted(out["methods"].items()))
    return out


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


# ----------------------------------------------------------------------------- do the current runs reproduce them?


def refreeze_command(profile: str) -> str:
    """What to type to re-freeze a profile's baselines from the current code: retrain the frozen
    methods' runs (every rule that trains runs, a tuning's two among them), re-evaluate, rewrite
    the folder; then commit it."""
    rules = " ".join(kinds.training_rules())
    return (f"`snakemake --cores 2 freeze --forcerun {rules}` (with the study's --configfile) from a clean "
            f"commit, then commit results/frozen/{profile}/")


@dataclass(frozen=True)
class Drift:
    """How far one method's current per-query results land from its frozen ones.

    ``rows``: the ``(fold, seed, query)`` rows compared; ``rows_differ``: rows where any metric
    (or its ``:dropped`` flag) differs in any bit; per metric, ``max_abs`` the largest per-query
    ``|current - frozen|`` and ``mean_diff`` the current mean minus the frozen mean over the
    rows that neither side drops.
    """

    method: str
    rows: int
    rows_differ: int
    max_abs: dict[str, float]
    mean_diff: dict[str, float]

    @property
    def identical(self) -> bool:
        return self.rows_differ == 0


def drifts(frozen: pd.DataFrame, current: pd.DataFrame, metrics: list[str]) -> list[Drift]:
    """Per method of the frozen frame, its :class:`Drift` (``FrozenMismatch`` if rows are missing)."""
    keys = ["method", "fold", "seed", "query"]
    out = []
    for method, old in frozen.groupby("method", sort=True):
        new = current[current["method"] == method]
        if new.empty:
            raise FrozenMismatch(f"method {method!r} is frozen but was not trained now")
        pair = old.merge(new, on=keys, how="outer", suffixes=("_frozen", "_current"), indicator=True)
        unpaired = int((pair["_merge"] != "both").sum())
        if unpaired:
            raise FrozenMismatch(f"method {method!r}: {unpaired} (fold, seed, query) rows are in only one of the "
                                 "frozen and the current results (other folds, seeds or queries)")
        differ = np.zeros(len(pair), dtype=bool)
        max_abs, mean_diff = {}, {}
        for metric in metrics:
            a, b = pair[f"{metric}_frozen"].to_numpy(np.float64), pair[f"{metric}_current"].to_numpy(np.float64)
            differ |= ~((a == b) | (np.isnan(a) & np.isnan(b)))
            flag = f"{metric}:dropped"
            kept = np.ones(len(pair), dtype=bool)
            if f"{flag}_frozen" in pair:
                fa, fb = pair[f"{flag}_frozen"].to_numpy(bool), pair[f"{flag}_current"].to_numpy(bool)
                differ |= fa != fb
                kept = ~(fa | fb)
            gap = np.abs(b - a)
            max_abs[metric] = float(np.nanmax(gap)) if len(gap) else 0.0
            mean_diff[metric] = float(np.nanmean(b[kept]) - np.nanmean(a[kept])) if kept.any() else 0.0
        out.append(Drift(str(method), len(pair), int(differ.sum()), max_abs, mean_diff))
    return out


def current_platform(threads: int) -> dict[str, Any]:
    """This process's platform facts (:func:`bench.provenance.platform_facts`) and its C library,
    whose maths functions ATen's scalar kernels call."""
    return {**platform_facts(threads), "libc": " ".join(libc_ver()).strip() or "unknown"}


def kernels_pinned(facts: dict[str, Any] | None) -> bool:
    """Whether runs with these platform facts computed with kernels that no CPU picks: ATen's
    scalar build (capability DEFAULT) and MKL's COMPATIBLE branch (``MKL_CBWR``), the pinned
    kernels of :mod:`bench.training.determinism` (each run refuses to train unless they act)."""
    if not facts:
        return False
    cbwr = str((facts.get("isa_variables") or {}).get("MKL_CBWR", ""))
    return facts.get("torch_cpu_capability") == "DEFAULT" and cbwr.split(",")[0].upper() == "COMPATIBLE"


def platform_differences(frozen: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """The platform facts in which this machine differs from the one that froze the baselines
    (``["unrecorded"]`` for a manifest without them)."""
    if not frozen:
        return ["unrecorded"]
    return [key for key in sorted(set(frozen) | set(current)) if frozen.get(key) != current.get(key)]


def pinned_both(frozen: dict[str, Any] | None, current: dict[str, Any]) -> bool:
    """Whether the frozen runs and the current ones both computed with pinned kernels."""
    return kernels_pinned(frozen) and kernels_pinned(current)


def _worst(items: list[Drift], metrics: list[str]) -> str:
    parts = []
    for d in items:
        metric = max(metrics, key=lambda m: abs(d.mean_diff[m]))
        parts.append(f"{d.method} ({d.rows_differ} of {d.rows} rows; largest |mean difference| "
                     f"{metric} {d.mean_diff[metric]:+.4f})")
    return ", ".join(parts)


def verdict(found: list[Drift], metrics: list[str], *, differences: list[str],
            tolerance: dict[str, float], ignored: list[str] | None = None) -> tuple[bool, str]:
    """``(passes, the one line)``: on the platform that froze them (no ``differences``) every
    method must be per query identical; on another platform every mean must land within
    ``tolerance`` (per metric, absolute; a metric without an entry is reported, not judged).
    ``ignored``: the differences that pick no kernel (:data:`CPU_FACTS` when both sides ran
    pinned kernels): named in the line, and identity is still required."""
    n = len(found)
    same = [d for d in found if d.identical]
    pinned = (f" (pinned kernels; this machine differs from the freezing one only in {', '.join(ignored)}, "
              "which pick no pinned kernel)") if ignored else ""
    if len(same) == n:
        return True, f"frozen baselines reproduced: {n}/{n} methods, per query identical{pinned}"
    differ = [d for d in found if not d.identical]
    if not differences:
        where = "with pinned kernels on another CPU" if ignored else "on the platform they were frozen on"
        return False, (f"frozen baselines NOT reproduced {where}: {len(differ)}/{n} methods differ per query: "
                       f"{_worst(differ, metrics)}{pinned}")
    outside = [d for d in differ if any(m in tolerance and abs(d.mean_diff[m]) > tolerance[m] for m in metrics)]
    where = f"this machine differs from the freezing one in {', '.join(differences)}"
    if outside:
        return False, (f"frozen baselines NOT reproduced: {len(outside)}/{n} methods land outside the cross-platform "
                       f"tolerance ({where}): {_worst(outside, metrics)}")
    unjudged = [m for m in metrics if m not in tolerance]
    note = f"; not judged (no freeze.platform_tolerance): {', '.join(unjudged)}" if unjudged else ""
    return True, (f"frozen baselines reproduced within the cross-platform tolerance: {n}/{n} methods ({len(same)} per "
                  f"query identical; {where}); largest differences: {_worst(differ, metrics)}{note}")


def check_reproduced(frozen_dir: str | Path, per_query: pd.DataFrame, *, protocol: dict[str, Any],
                     fingerprints: dict[str, str], platform: dict[str, Any],
                     tolerance: dict[str, float]) -> dict[str, Any]:
    """Compare the current runs of the frozen methods with the frozen files: the record the
    default study writes (``ok``: True, False, or None when the protocol or the data changed and
    there is nothing to compare; ``line``: what it prints)."""
    manifest = read_manifest(frozen_dir)
    verify_files(frozen_dir, manifest)  # a tampered frozen file is never "not comparable"
    record: dict[str, Any] = {"frozen": str(frozen_dir), "manifest_sha256": file_sha256(Path(frozen_dir) / MANIFEST),
                              "frozen_platform": manifest.get("platform"), "platform": platform,
                              "code_version": manifest["code_version"], "created_at": manifest["created_at"]}
    try:
        check_frozen(frozen_dir, protocol, fingerprints)
    except FrozenMismatch as exc:
        return {**record, "ok": None, "line": f"frozen baselines not compared: {exc}; re-freeze: "
                                              f"{refreeze_command(manifest['profile'])}"}
    metrics = list(manifest["protocol"]["metrics"])
    missing = [c for c in metrics if c not in per_query.columns]
    if missing:
        raise FrozenMismatch(f"the current per-query results lack the frozen metrics {missing}")
    differences = platform_differences(manifest.get("platform"), platform)
    # pinned kernels on both sides: the CPU picks none of them, so only the other facts may excuse a difference
    ignored = [d for d in differences if d in CPU_FACTS] if pinned_both(manifest.get("platform"), platform) else []
    binding = [d for d in differences if d not in ignored]
    try:
        found = drifts(load_frozen(frozen_dir, manifest), per_query, metrics)
    except FrozenMismatch as exc:  # other methods, folds or seeds than the frozen ones
        return {**record, "ok": False, "line": f"frozen baselines NOT reproduced: {exc}; re-freeze: "
                                               f"{refreeze_command(manifest['profile'])}"}
    ok, line = verdict(found, metrics, differences=binding, tolerance=tolerance, ignored=ignored)
    if not ok:
        line += f"; if the change is intended, re-freeze: {refreeze_command(manifest['profile'])}"
    return {**record, "ok": ok, "line": line, "platform_differences": differences, "tolerance": tolerance,
            "pinned": pinned_both(manifest.get("platform"), platform), "metrics": metrics,
            "methods": [asdict(d) for d in found]}


# ----------------------------------------------------------------------------- CLI


def _cli_freeze(args) -> int:
    try:
        protocol = json.loads(args.protocol)
        per_query = read_frames(args.per_query)
        records = [read_record(p) for p in args.tuning]
        freeze(per_query, args.out, profile=args.profile, dataset=args.dataset, protocol=protocol,
               prepared_dirs=args.prepared, platform=current_platform(args.threads), tuning=records)
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


def _cli_reproduced(args) -> int:
    try:
        tolerance = json.loads(args.tolerance)
        record = check_reproduced(args.frozen, read_frames(args.per_query), protocol=json.loads(args.protocol),
                                  fingerprints=fold_fingerprints(args.prepared),
                                  platform=current_platform(args.threads), tolerance=tolerance)
    except (FrozenMismatch, json.JSONDecodeError) as exc:
        raise UsageError(str(exc)) from exc
    with atomic_path(args.out) as tmp:
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if record["ok"] is False:
        raise UsageError(record["line"])
    print(record["line"])
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
    p.add_argument("--threads", type=int, required=True, help="torch threads the runs trained with (platform facts)")
    p.add_argument("--tuning", nargs="*", default=[], help="the tuned baselines' tuning records (ltr-bench tune)")
    p.set_defaults(func=_cli_freeze)
    r = subparsers.add_parser("check-reproduced", help="do the current runs reproduce the frozen baselines?")
    r.add_argument("--frozen", required=True, help="results/frozen/<profile>/<dataset>")
    r.add_argument("--per-query", required=True, nargs="+", help="evaluated per-query parquet files of the current runs")
    r.add_argument("--prepared", required=True, nargs="+", help="current prepared fold directories")
    r.add_argument("--protocol", required=True, help="the current study protocol as JSON")
    r.add_argument("--tolerance", required=True, help="JSON {metric: largest |mean difference|} on another platform")
    r.add_argument("--threads", type=int, required=True, help="torch threads the runs trained with (platform facts)")
    r.add_argument("--out", required=True, help="the record (JSON) the compare page reads")
    r.set_defaults(func=_cli_reproduced)
    c = subparsers.add_parser("check-frozen", help="verify frozen baselines against the current protocol and data")
    c.add_argument("--frozen", required=True, help="results/frozen/<profile>/<dataset>")
    c.add_argument("--protocol", required=True, help="the current study protocol as JSON")
    c.add_argument("--prepared", required=True, nargs="+", help="current prepared fold directories")
    c.add_argument("--out", help="write a small JSON stamp here when everything matches")
    c.set_defaults(func=_cli_check)
