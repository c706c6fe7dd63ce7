"""The run commands (``ltr-bench train``, ``gbdt``, ``linear``): one prepared fold, one method, one seed.

One command per rule of the run kinds (:data:`bench.config.kinds.RUN_KINDS`), all with the same
arguments (:func:`add_run_arguments`) and one path, :func:`run_job`: read the job's config
(:func:`bench.config.run.read_run_config`), pick the run kind that trains the method under it
(:func:`bench.config.kinds.run_kind`: SinkProp's own protocol under ``train`` when the config
carries its section), import that kind's run function, call it, print the run directory.
Errors the user can fix (:class:`bench.errors.BenchError`: a config key, a missing fold, a
diverged run, a library refusing its parameters) reach ``ltr-bench`` as one line and exit
status 2. Run functions are imported when their command runs, so ``ltr-bench gbdt`` and
``linear`` never import torch.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

from bench.config import kinds
from bench.config.run import parse_run_config_json, read_run_config, run_config_digest
from bench.errors import ConfigError, UsageError
from bench.training.common import DEVICE_CHOICES
from bench.training.refit import job_settings

# what each command's arguments say (a rule without an entry gets the generic words)
HELP = {
    "train": {"method": "key under methods: in the config",
              "config": "YAML or JSON config with methods/model/train/metrics",
              "quiet": "no progress bar; a progress line at least every 30 s ($LTR_BENCH_PROGRESS_SECONDS) and after "
                       "each validation",
              "threads": "torch intra-op threads (0: torch's default)"},
    "gbdt": {"method": "key under methods: in the config (with gbdt: ...)",
             "quiet": "no summary line (the progress lines stay)", "threads": "library threads (0: library default)"},
    "linear": {"method": "key under methods: in the config (with linear: least_squares)", "quiet": "no summary line",
               "threads": "recorded only (NumPy's BLAS decides)"},
}


def add_run_arguments(p, *, method_help: str, config_help: str, quiet_help: str, threads_help: str) -> None:
    """The arguments every run command takes (one prepared fold, one method, one seed)."""
    p.add_argument("--prepared", required=True, help="prepared fold directory (ltr-bench prepare)")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--method", required=True, help=method_help)
    p.add_argument("--seed", required=True, type=int)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help=config_help)
    source.add_argument("--config-json", metavar="JSON",
                        help="the same config as JSON text (what the workflow passes a planned run)")
    p.add_argument("--device", default="auto", choices=DEVICE_CHOICES)
    p.add_argument("--quiet", action="store_true", help=quiet_help)
    p.add_argument("--threads", type=int, default=0, help=threads_help)


def run_job(config: dict[str, Any], prepared_dir: str | os.PathLike, out_dir: str | os.PathLike, *, method: str,
            seed: int, rule: str | None = None, **options: Any) -> Path:
    """Run ``method`` by the kind that trains it under ``config``: the kind's resolver turns the
    job's config into settings (:mod:`bench.config.settings`), :func:`bench.training.refit.job_settings`
    adds the tested model's keys (or refuses a refit the kind cannot do), its run function trains from them.
    ``rule``: the command asked for (a method of another rule's kind is refused, naming the
    command that runs it)."""
    name = kinds.run_kind(config, method, rule)
    kind = kinds.RUN_KINDS[name]
    if rule is not None and kind.rule != rule:
        raise ConfigError(f"methods.{method}: a {name} method; run it with `ltr-bench {kind.rule}`")
    settings = job_settings(name, kinds.load(kind.resolve)(config, method), config, method)  # checkpoint, refit
    run = kinds.load(kind.run)
    accepted = inspect.signature(run).parameters
    for option, value in list(options.items()):
        if option not in accepted:
            if value is not None:
                raise UsageError(f"--{option.replace('_', '-')}: not an option of a {name} run")
            del options[option]
    return run(settings, prepared_dir, out_dir, method=method, seed=seed, **options)


def run_from_cli(args) -> int:
    """Load ``args.config`` (or parse ``args.config_json``), run the job and print the run dir.
    The run records the config's digest (:func:`bench.config.run.run_config_digest`) in
    ``run.json``, whichever way it came.

    A missing file becomes a :class:`bench.errors.UsageError` naming it; the run functions'
    own errors are :class:`bench.errors.BenchError` already.
    """
    try:
        if args.config_json is not None:
            config = parse_run_config_json(args.config_json, "--config-json")
        else:
            config = read_run_config(args.config)
        out = run_job(config, args.prepared, args.out, method=args.method, seed=args.seed,
                      rule=args.command, device=args.device, quiet=args.quiet, threads=args.threads or None,
                      checkpoint_dir=args.checkpoint_dir, run_config_sha256=run_config_digest(config))
    except FileNotFoundError as exc:
        raise UsageError(f"{exc.filename or exc}: not found ({exc.strerror or exc})") from exc
    print(out)
    return 0


def register_cli(subparsers) -> None:
    """One command per rule of the run kinds: ``ltr-bench train``, ``gbdt``, ``linear``."""
    for rule in kinds.rules():
        words = HELP.get(rule, {})
        p = subparsers.add_parser(rule, help=kinds.rule_help(rule))
        add_run_arguments(p, method_help=words.get("method", "key under methods: in the config"),
                          config_help=words.get("config", "YAML or JSON config"),
                          quiet_help=words.get("quiet", "no summary line"),
                          threads_help=words.get("threads", "compute threads (0: the library's default)"))
        p.add_argument("--checkpoint-dir", default=None,
                       help="runs that checkpoint (train): default .<out name>.ckpt next to --out")
        p.set_defaults(func=run_from_cli)
