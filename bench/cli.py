"""``ltr-bench``: the command every Snakemake rule calls.

Each stage module owns its sub-commands through a ``register_cli(subparsers)`` function
that adds parsers and sets ``func`` on them; this file only lists the modules, so adding a
stage never touches another stage's code. Modules are imported lazily: ``ltr-bench fetch``
does not pay for importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# module -> the sub-commands it registers (listed so `--help` works without importing all)
STAGES: dict[str, tuple[str, ...]] = {
    "bench.data.cli": ("datasets", "fetch", "prepare", "synthetic"),
    "bench.train": ("train",),
    "bench.gbdt": ("gbdt",),
    "bench.evaluate": ("evaluate",),
    "bench.stats": ("stats",),
    "bench.report.cli": ("table", "figure", "compare-table"),
    "bench.frozen": ("freeze", "check-frozen"),
    "bench.perf": ("perf",),
    "bench.jobserver": ("job-server",),
}


class CliError(Exception):
    """An error the user can fix; printed without a traceback, exit status 2."""


def _build_parser(wanted: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ltr-bench",
        description="Learning-to-rank benchmark suite: each Snakemake rule calls one of these commands.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name, commands in STAGES.items():
        if wanted is not None and wanted not in commands:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # stage not built yet: its commands are simply absent
            raise
        module.register_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ltr-bench`` console script.

    Inside a local workflow run the command is handed to the warm job server
    (:mod:`bench.jobserver`) when one is reachable; otherwise it runs here.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["job-server"]:
        from bench.jobserver import run_in_server

        status = run_in_server(argv)
        if status is not None:
            return status
    return run_command(argv)


def run_command(argv: list[str]) -> int:
    """Parse ``argv`` and run the sub-command in this process; its exit status."""
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    known = {c for cmds in STAGES.values() for c in cmds}
    parser = _build_parser(wanted if wanted in known else None)
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except CliError as exc:
        print(f"ltr-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
