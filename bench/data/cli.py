"""``ltr-bench datasets | fetch | prepare | synthetic``: thin wrappers over bench.data.

* ``datasets [--raw-dir D] [--prepared-dir D] [--registry JSON] [--checksum-cache DIR]``:
  one line per dataset: how it is obtained, its archive's state
  (:data:`bench.data.fetch.ARCHIVE_STATES`: missing, present but not verified, verified, ...),
  how many folds were prepared from it, and the exact path its archive belongs at; then the licences.
* ``fetch NAME [--url URL] [--raw-dir resources/raw] [--registry JSON] [--no-extract]
  [--checksum-cache DIR]``.
* ``prepare SOURCE --fold FOLD --out DIR [--options JSON] [--raw-dir D] [--registry JSON]
  [--force] [--checksum-cache DIR]``; ``--options`` is a JSON object or ``@file.json`` (keys:
  bench.data.prepare).
* ``synthetic --out FILE.npz [--options JSON]``: one generator draw saved as X, y, qid
  (for inspection; the workflow uses ``prepare synthetic``).

``--checksum-cache`` is the suite's record of the sha256 of archives (verified by fetch) and
source files (hashed by prepare), default ``results/cache/source-sha256``: nothing is written
next to the user's data. Errors the user can fix arrive here as :class:`bench.errors.BenchError`
(one line from ``ltr-bench``); nothing is caught wholesale, so a bug keeps its traceback.
``fetch`` and ``prepare`` write a progress line at least every
:func:`bench.atomic.progress.interval_seconds` (the training jobs' heartbeat, without its
opening line), naming what they do: a download or a parse of a large fold runs for minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.atomic import atomic_path
from bench.data.fileaccess import file_access
from bench.errors import UsageError


def _registry(args):
    from bench.data.registry import load_registry  # a bad override file: ConfigError

    return load_registry(getattr(args, "registry", None))


def _dataset(name: str, registry: dict, command: str):
    """The registry entry ``name``; an unknown one is a usage error listing the known ones.

    Looked up here, not by catching ``KeyError`` around the command: a ``KeyError`` from a
    bug must keep its traceback.
    """
    if name not in registry:
        raise UsageError(f"unknown dataset {name!r}; known: {', '.join(sorted(registry))} "
                         f"(`ltr-bench datasets` lists them; `ltr-bench {command} --registry` adds one)")
    return registry[name]


def _options(text: str | None) -> dict:
    if not text:
        return {}
    where = "--options"
    if text.startswith("@"):
        where = text[1:]
        try:
            text = Path(where).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--options {where}: {exc}") from exc
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError(f"{where}: must be a JSON object, got {type(value).__name__}")
    return value


def _count(n: int, what: str) -> str:
    return "-" if n == 0 else f"{n} {what}" + ("s" if n > 1 else "")


def _cmd_datasets(args) -> int:
    from bench.data.fetch import archive_path, archive_state, prepared_by_source

    registry = _registry(args)
    prepared = prepared_by_source(args.prepared_dir)
    header = ("name", "obtain", "archive", "prepared", "archive path (where fetch puts it; place a hand-fetched copy here)")
    rows = [header]
    for ds in registry.values():
        how = "generated" if ds.synthetic else ("manual" if not ds.scripted else ("pip" if ds.pip else "script"))
        where = archive_path(ds, args.raw_dir)
        rows.append((ds.name, how, archive_state(ds, args.raw_dir, args.checksum_cache),
                     _count(len(prepared.get(ds.name, ())), "fold"), "-" if where is None else str(where)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for r in rows:
        print("  ".join(f"{v:<{w}}" for v, w in zip(r, widths)) + "  " + r[-1])
    licences: dict[str, list[str]] = {}
    for ds in registry.values():
        licences.setdefault(ds.licence, []).append(ds.name)
    print("\nlicences:")
    for licence, names in licences.items():
        print(f"  {', '.join(names)}: {licence}")
    print("\n`ltr-bench fetch NAME` downloads a scripted archive, or verifies (sha256) and extracts one placed "
          "at its path; `--url URL` fetches it from a mirror")
    return 0


def _heartbeat(kind: str, label: str, phase: str):
    """The job's progress lines (:class:`bench.atomic.progress.Reporter`, no record file): one
    at least every interval while a download, an extraction or a parse runs for minutes (none
    at the start: a quick job, or one that stops at once with its one-line error, prints what it
    did before); ``log`` prints a message and makes it the phase the next lines name."""
    from bench.atomic.progress import Reporter

    reporter = Reporter(None, kind=kind, unit="file", label=label, phase=phase, opening=False)

    def log(message: str) -> None:
        print(message, flush=True)
        reporter.phase = message

    return reporter, log


def _cmd_fetch(args) -> int:
    from bench.data.fetch import fetch

    ds = _dataset(args.name, _registry(args), "fetch")
    reporter, log = _heartbeat("fetch", ds.name, "looking for the archive")
    with reporter:
        out = fetch(ds, args.raw_dir, url=args.url, extract=not args.no_extract,
                    checksum_cache=args.checksum_cache, log=log)
    print(f"{ds.name}: ready in {out}")
    return 0


def _cmd_prepare(args) -> int:
    from bench.data.prepare import prepare_fold

    registry = _registry(args)
    _dataset(args.source, registry, "prepare")
    reporter, log = _heartbeat("prepare", f"{args.source}/{args.fold}",
                               "preparing (reading or generating the splits, filtering, normalising, writing)")
    with reporter:
        fold = prepare_fold(args.source, args.fold, args.out, _options(args.options),
                            raw_dir=args.raw_dir, registry=registry, force=args.force,
                            checksum_cache=args.checksum_cache, log=log)
    print(f"{args.out}: fingerprint {fold.fingerprint}")
    return 0


def _generator_options(opts: dict) -> dict:
    """``opts`` when every key is a parameter of the generator: named here, since calling it
    with an unknown keyword is a TypeError that must not be caught (it would hide bugs)."""
    import inspect

    from bench.data.synthetic import generate_synthetic

    known = set(inspect.signature(generate_synthetic).parameters)
    unknown = sorted(set(opts) - known)
    if unknown:
        raise UsageError(f"--options: unknown key(s) {unknown}; known: {sorted(known)}")
    return opts


def _cmd_synthetic(args) -> int:
    from bench.data.synthetic import generate_synthetic

    X, y, qid = generate_synthetic(**_generator_options(_options(args.options)))  # bad values: ConfigError
    with file_access(args.out, "write"), atomic_path(args.out) as tmp:  # a full disk: one line
        with open(tmp, "wb") as fh:
            np.savez(fh, X=X, y=y, qid=qid)
    print(f"{args.out}: {X.shape[0]} documents, {np.unique(qid).size} queries, {X.shape[1]} features")
    return 0


def register_cli(subparsers) -> None:
    """Add the data sub-commands to the ``ltr-bench`` parser."""
    def common(p, prepared=False):
        p.add_argument("--raw-dir", default="resources/raw", help="downloaded archives (default: %(default)s)")
        p.add_argument("--registry", default=None, metavar="JSON",
                       help="JSON file overriding/extending registry entries (mirrors, tests)")
        if prepared:
            p.add_argument("--prepared-dir", default="results/prepared", help="default: %(default)s")
        p.add_argument("--checksum-cache", default="results/cache/source-sha256", metavar="DIR",
                       help="the suite's record of the sha256 of archives and source files, keyed by "
                            "absolute path, size and mtime; nothing is written next to the data "
                            "(default: %(default)s)")

    p = subparsers.add_parser("datasets", help="list datasets and their status")
    common(p, prepared=True)
    p.set_defaults(func=_cmd_datasets)

    p = subparsers.add_parser("fetch", help="download (or verify a manual archive), verify, extract")
    p.add_argument("name")
    p.add_argument("--url", default=None, help="mirror URL replacing the registry's")
    p.add_argument("--no-extract", action="store_true", help="only download and verify")
    common(p)
    p.set_defaults(func=_cmd_fetch)

    p = subparsers.add_parser("prepare", help="parse/generate, filter, normalise and cache a fold")
    p.add_argument("source", help="registry name, e.g. mslr-web30k or synthetic")
    p.add_argument("--fold", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--options", default=None, help="JSON object or @file.json")
    p.add_argument("--force", action="store_true", help="rebuild even when the cache matches")
    common(p)
    p.set_defaults(func=_cmd_prepare)

    p = subparsers.add_parser("synthetic", help="one synthetic draw to an .npz (X, y, qid)")
    p.add_argument("--out", required=True)
    p.add_argument("--options", default=None,
                   help='generate_synthetic keyword arguments, e.g. {"n_queries": 10, '
                        '"list_length": 20, "n_features": 8, "seed": 0}')
    p.set_defaults(func=_cmd_synthetic)

