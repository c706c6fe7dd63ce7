"""Run outputs and provenance shared by the neural trainer and the GBDT baselines.

A run directory (``results/runs/<experiment>/<dataset>/<fold>/<method>/seed<k>/``) holds
exactly four files, written together by :func:`write_run` as one atomic directory (so a
failed run leaves nothing behind):

- ``scores.npy``: float32, one score per test document in test-split order. When the
  evaluation lists are sub-sampled (``train.test_list_size`` = ``L_test``), documents left
  out of every evaluation list hold NaN (they were not scored by the protocol).
- ``metrics.parquet``: :func:`bench.metrics.evaluate`'s per-query frame for the test split
  (query ids from the prepared ``qids``) with leading columns ``dataset, fold, method, seed``.
- ``curve.csv``: one row per epoch (GBDT: per boosting round): ``epoch, step, lr, tau,
  train_loss, seconds`` and one ``vali_<metric>`` column per validation metric.
- ``run.json``: provenance, keys listed in :data:`RUN_JSON_KEYS`.

The **protocol** is what two runs must share for their per-query metrics to be compared:
preprocessing options, dataset and fold, list sizes, model, optimisation schedule, seed,
metric conventions. It excludes the method itself (loss name, loss hyperparameters and
temperature schedule; for GBDT the library, objective and its parameters), so a new loss
trained under the frozen protocol of the baselines gets the same hash. Its hash is the
sha256 of :func:`canonical_json`.

>>> protocol_hash({"b": [1, 2.5], "a": "x"}) == protocol_hash({"a": "x", "b": (1, 2.5)})
True
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.atomic import atomic_path
from bench.errors import ConfigError, UsageError

RUN_JSON_KEYS = (
    "kind",
    "dataset",
    "fold",
    "method",
    "seed",
    "config",
    "protocol",
    "protocol_hash",
    "dataset_fingerprint",
    "prepared_dir",
    "git_commit",
    "versions",
    "device",
    "device_name",
    "wall_time_s",
    "peak_memory",
    "finished_at",
    "result",
)

DEFAULT_METRICS = [
    "ndcg@1",
    "ndcg@3",
    "ndcg@5",
    "ndcg@10",
    "ndcg@15",
    "ndcg@max",
    "mrr",
    "opa",
    "arp",
    "recall@30@15",
]
METRIC_DEFAULTS: dict[str, Any] = {"names": DEFAULT_METRICS, "empty_query": "one", "ties": "stable"}

_LIBRARIES = ("numpy", "scipy", "pandas", "pyarrow", "torch", "lightgbm", "xgboost", "ltr-bench")


def load_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML or JSON run configuration (JSON is valid YAML) into a dict."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file ({exc.strerror})") from exc
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{where}: not valid YAML/JSON ({exc})") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(f"{p}: the config must be a mapping with a 'methods' key")
    return cfg


def method_entry(config: dict[str, Any], method: str) -> dict[str, Any]:
    """``config['methods'][method]``, or a :class:`ConfigError` listing the known methods."""
    methods = config.get("methods")
    if not isinstance(methods, dict) or not methods:
        raise ConfigError("methods: the config has no 'methods' mapping")
    if method not in methods:
        raise ConfigError(f"methods.{method}: unknown method; known methods: {', '.join(sorted(methods))}")
    entry = methods[method]
    if not isinstance(entry, dict):
        raise ConfigError(f"methods.{method}: expected a mapping, got {type(entry).__name__}")
    return entry


def _plain(obj: Any) -> Any:
    """Recursively turn tuples, numpy scalars and arrays into plain JSON types."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free, ASCII JSON; NaN/inf rejected (they have no canonical form).

    >>> canonical_json({"z": 1, "a": [True, None, 0.1]})
    '{"a":[true,null,0.1],"z":1}'
    """
    return json.dumps(_plain(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def protocol_hash(protocol: dict[str, Any]) -> str:
    """sha256 hex digest of :func:`canonical_json` of ``protocol``."""
    return hashlib.sha256(canonical_json(protocol).encode("ascii")).hexdigest()


def resolve_metrics_config(cfg: Any, *, key: str = "metrics") -> dict[str, Any]:
    """``metrics`` config: a list of names, or ``{names, empty_query, ties}``; defaults filled.

    >>> resolve_metrics_config(["ndcg@10", "mrr"])
    {'names': ['ndcg@10', 'mrr'], 'empty_query': 'one', 'ties': 'stable'}
    """
    if cfg is None:
        cfg = {}
    if isinstance(cfg, (list, tuple)):
        cfg = {"names": list(cfg)}
    if not isinstance(cfg, dict):
        raise ConfigError(f"{key}: expected a list of metric names or a mapping, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - set(METRIC_DEFAULTS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key; known keys: {', '.join(METRIC_DEFAULTS)}")
    out = {**METRIC_DEFAULTS, **cfg}
    names = out["names"]
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{key}.names: expected a non-empty list of metric names, got {names!r}")
    from bench.metrics import EMPTY_QUERY_CHOICES, TIES_CHOICES, parse_metric

    for i, name in enumerate(names):
        try:
            parse_metric(name)
        except ValueError as exc:
            raise ConfigError(f"{key}.names[{i}]: {exc}") from exc
    if out["empty_query"] not in EMPTY_QUERY_CHOICES:
        raise ConfigError(f"{key}.empty_query: must be one of {EMPTY_QUERY_CHOICES}, got {out['empty_query']!r}")
    if out["ties"] not in TIES_CHOICES:
        raise ConfigError(f"{key}.ties: must be one of {TIES_CHOICES}, got {out['ties']!r}")
    out["names"] = list(dict.fromkeys(names))
    return out


def evaluate_split(
    scores: np.ndarray,
    labels: np.ndarray,
    offsets: np.ndarray,
    metrics: dict[str, Any],
    names: list[str] | None = None,
    query_ids: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per-query metrics through :func:`bench.metrics.evaluate`, the suite's only metric code."""
    from bench.metrics import evaluate

    return evaluate(
        np.asarray(scores),
        np.asarray(labels),
        np.asarray(offsets),
        list(names if names is not None else metrics["names"]),
        empty_query=metrics["empty_query"],
        ties=metrics["ties"],
        query_ids=query_ids,
    )


def subsample_lists(
    offsets: np.ndarray, list_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``list_size`` random documents per query, in their original order.

    Returns ``(doc_index [M], new_offsets [Q+1])``; vectorised (one lexsort over documents).

    >>> idx, off = subsample_lists(np.array([0, 5, 7]), 3, np.random.default_rng(0))
    >>> off.tolist(), bool(np.all(np.diff(idx[:3]) > 0)), idx[3:].tolist()
    ([0, 3, 5], True, [5, 6])
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    qidx = np.repeat(np.arange(lengths.size), lengths)
    keys = rng.random(qidx.size)
    order = np.lexsort((keys, qidx))  # grouped by query, random order within a query
    rank = np.arange(qidx.size) - offsets[qidx]
    keep = np.sort(order[rank < list_size])
    new_offsets = np.concatenate([[0], np.cumsum(np.minimum(lengths, list_size))]).astype(np.int64)
    return keep.astype(np.int64), new_offsets


def git_commit() -> tuple[str, bool | None]:
    """``(commit, dirty)`` of the checkout holding this package, or ``("unknown", None)``."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    return (head or "unknown"), bool(status.strip())


def library_versions() -> dict[str, str]:
    """Python, platform and the versions of the libraries a result depends on."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in _LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    if "torch" in sys.modules:
        import torch

        out["torch_cuda"] = str(torch.version.cuda)
    return out


def cpu_name() -> str:
    """CPU model name (from /proc/cpuinfo when available) and the logical core count."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} logical cores)"


def host_peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def write_run(
    out_dir: str | os.PathLike,
    *,
    scores: np.ndarray,
    metrics: pd.DataFrame,
    curve: pd.DataFrame,
    run_info: dict[str, Any],
) -> Path:
    """Write the four run files into ``out_dir`` as one atomic directory; return its path."""
    missing = [k for k in RUN_JSON_KEYS if k not in run_info]
    if missing:
        raise ValueError(f"run.json is missing keys {missing}")
    out = Path(out_dir)
    with atomic_path(out, is_dir=True) as tmp:
        np.save(tmp / "scores.npy", np.asarray(scores, dtype=np.float32))
        metrics.to_parquet(tmp / "metrics.parquet", index=False)
        curve.to_csv(tmp / "curve.csv", index=False)
        (tmp / "run.json").write_text(
            json.dumps(_plain(run_info), indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
        )
    return out


def label_metrics(frame: pd.DataFrame, *, dataset: str, fold: str, method: str, seed: int) -> pd.DataFrame:
    """Prefix ``dataset, fold, method, seed`` columns to an ``evaluate`` frame."""
    ident = pd.DataFrame(
        {"dataset": dataset, "fold": fold, "method": method, "seed": np.int64(seed)}, index=frame.index
    )
    return pd.concat([ident, frame], axis=1)


def provenance(*, kind: str, dataset: str, fold: str, method: str, seed: int, config: dict[str, Any],
               device_requested: str, protocol: dict[str, Any], fingerprint: str, prepared_dir) -> dict[str, Any]:
    """The part of ``run.json`` every run kind shares: identity, resolved config, protocol and
    its hash, dataset fingerprint, code and library versions, finish time. Trainers add their
    device, wall time, peak memory and result."""
    commit, dirty = git_commit()
    return {
        "kind": kind,
        "dataset": dataset,
        "fold": fold,
        "method": method,
        "seed": int(seed),
        "config": {**config, "device_requested": device_requested},
        "protocol": protocol,
        "protocol_hash": protocol_hash(protocol),
        "dataset_fingerprint": fingerprint,
        "prepared_dir": str(Path(prepared_dir).resolve()),
        "git_commit": commit,
        "git_dirty": dirty,
        "versions": library_versions(),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# ----------------------------------------------------------------------------------------
# CLI plumbing shared by `ltr-bench train` and `ltr-bench gbdt`


def add_run_arguments(p, *, method_help: str, config_help: str, quiet_help: str, threads_help: str) -> None:
    """The arguments every run command takes (one prepared fold, one method, one seed)."""
    p.add_argument("--prepared", required=True, help="prepared fold directory (ltr-bench prepare)")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--method", required=True, help=method_help)
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--config", required=True, help=config_help)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--quiet", action="store_true", help=quiet_help)
    p.add_argument("--threads", type=int, default=0, help=threads_help)


def run_from_cli(run_fn, args, *, user_errors: tuple[type[BaseException], ...] = (), **extra: Any) -> int:
    """Load ``args.config``, call ``run_fn`` with the common arguments and print the run dir.

    Config errors, ``user_errors`` and missing files become :class:`bench.cli.UsageError`
    (a message naming the file or key, exit status 2) instead of a traceback.
    """
    try:
        out = run_fn(
            load_config(args.config),
            args.prepared,
            args.out,
            method=args.method,
            seed=args.seed,
            device=args.device,
            quiet=args.quiet,
            threads=args.threads or None,
            **extra,
        )
    except (ConfigError, *user_errors) as exc:
        raise UsageError(str(exc)) from exc
    except FileNotFoundError as exc:
        raise UsageError(f"{exc.filename or exc}: not found ({exc.strerror or exc})") from exc
    print(out)
    return 0

