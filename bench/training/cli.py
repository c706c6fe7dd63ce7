"""``ltr-bench train``, ``gbdt`` and ``linear``: one prepared fold, one method, one seed.

All three take the same arguments (:func:`add_run_arguments`) and go through
:func:`run_from_cli`: read the job's config (:func:`bench.config.run.read_run_config`),
call the trainer, print the run directory. Errors the user can fix
(:class:`bench.errors.BenchError`: a config key, a missing fold, a diverged run, a library
refusing its parameters) reach ``ltr-bench`` as one line and exit status 2. The trainers
are imported when their command runs, so ``ltr-bench gbdt`` and ``linear`` never import torch.
"""

from __future__ import annotations

from typing import Any

from bench.config.run import read_run_config
from bench.errors import UsageError
from bench.training.common import DEVICE_CHOICES


def add_run_arguments(p, *, method_help: str, config_help: str, quiet_help: str, threads_help: str) -> None:
    """The arguments every run command takes (one prepared fold, one method, one seed)."""
    p.add_argument("--prepared", required=True, help="prepared fold directory (ltr-bench prepare)")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--method", required=True, help=method_help)
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--config", required=True, help=config_help)
    p.add_argument("--device", default="auto", choices=DEVICE_CHOICES)
    p.add_argument("--quiet", action="store_true", help=quiet_help)
    p.add_argument("--threads", type=int, default=0, help=threads_help)


def run_from_cli(run_fn, args, **extra: Any) -> int:
    """Load ``args.config``, call ``run_fn`` with the common arguments and print the run dir.

    A missing file becomes a :class:`bench.errors.UsageError` naming it; the trainers' own
    errors are :class:`bench.errors.BenchError` already.
    """
    try:
        out = run_fn(
            read_run_config(args.config),
            args.prepared,
            args.out,
            method=args.method,
            seed=args.seed,
            device=args.device,
            quiet=args.quiet,
            threads=args.threads or None,
            **extra,
        )
    except FileNotFoundError as exc:
        raise UsageError(f"{exc.filename or exc}: not found ({exc.strerror or exc})") from exc
    print(out)
    return 0


def _cli_train(args) -> int:
    from bench.training.neural import train_run

    return run_from_cli(train_run, args, checkpoint_dir=args.checkpoint_dir)


def _cli_gbdt(args) -> int:
    from bench.training.gbdt import gbdt_run

    return run_from_cli(gbdt_run, args)


def _cli_linear(args) -> int:
    from bench.training.linear import linear_run

    return run_from_cli(linear_run, args)


def register_cli(subparsers) -> None:
    """Add ``ltr-bench train``, ``ltr-bench gbdt`` and ``ltr-bench linear``."""
    p = subparsers.add_parser("train", help="train one neural method on one prepared fold with one seed")
    add_run_arguments(
        p,
        method_help="key under methods: in the config",
        config_help="YAML or JSON config with methods/model/train/metrics",
        quiet_help="no progress bar; a progress line at least every 60 s ($LTR_BENCH_PROGRESS_SECONDS) and after each validation",
        threads_help="torch intra-op threads (0: torch's default)",
    )
    p.add_argument("--checkpoint-dir", default=None, help="default: .<out name>.ckpt next to --out")
    p.set_defaults(func=_cli_train)
    g = subparsers.add_parser("gbdt", help="train one LightGBM/XGBoost baseline on one prepared fold")
    add_run_arguments(
        g,
        method_help="key under methods: in the config (with gbdt: ...)",
        config_help="YAML or JSON config",
        quiet_help="no summary line (the progress lines stay)",
        threads_help="library threads (0: library default)",
    )
    g.set_defaults(func=_cli_gbdt)
    lin = subparsers.add_parser("linear", help="fit one least-squares linear regression (ridge grid) on one prepared fold")
    add_run_arguments(
        lin,
        method_help="key under methods: in the config (with linear: least_squares)",
        config_help="YAML or JSON config",
        quiet_help="no summary line",
        threads_help="recorded only (NumPy's BLAS decides)",
    )
    lin.set_defaults(func=_cli_linear)
