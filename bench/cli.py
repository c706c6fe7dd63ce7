"""``ltr-bench``: the command every Snakemake rule calls.

Each stage module owns its sub-commands through a ``register_cli(subparsers)`` function
that adds parsers and sets ``func`` on them; this file only lists the modules, so adding a
stage never touches another stage's code. Modules are imported lazily: ``ltr-bench fetch``
does not pay for importing torch.

This is the only module that knows about exit codes: an error the user can fix is a
:class:`bench.errors.BenchError` anywhere below, printed here as one line
(``ltr-bench <command>: error: <message>``) with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bench.config.kinds import rules as run_rules
from bench.errors import BenchError

# module -> the sub-commands it registers (listed so `--help` works without importing all)
STAGES: dict[str, tuple[str, ...]] = {
    "bench.data.cli": ("datasets", "fetch", "prepare", "synthetic"),
    "bench.training.cli": run_rules(),  # one command per rule of the run kinds (bench.config.kinds)
    "bench.evaluate": ("evaluate", "export-scores"),
    "bench.selection": ("select",),
    "bench.selection.tuning": ("tune", "tuned-config"),
    "bench.curves": ("loss-curves", "toy-sort"),
    "bench.stats": ("stats", "tuning-summary"),
    "bench.ranking": ("ranking",),
    "bench.report.cli": ("table", "figure", "compare-table", "computed-table", "coverage", "selection-table"),
    "bench.frozen": ("freeze", "check-frozen", "check-reproduced"),
    "bench.perf.cli": ("perf",),
    "bench.costs.cli": ("plan", "status", "plan-check"),
}
JOB_SERVER = "job-server"  # served by this module itself (bench.jobserver runs run_command)


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
    if wanted in (None, JOB_SERVER):
        p = sub.add_parser(
            JOB_SERVER,
            help="serve ltr-bench commands from one warm process (started by the workflow)",
            description="Import the heavy modules once and run each ltr-bench command sent to SOCKET in a "
            "forked child; clients find it through $LTR_BENCH_JOB_SERVER. Started and stopped by the "
            "Snakemake workflow: once per local run, and once per SLURM job inside the step that runs "
            "its work (bench/jobserver.py).",
        )
        p.add_argument("--socket", required=True, help="Unix socket path to listen on")
        p.set_defaults(func=lambda args: serve_jobs(args.socket))
    return parser


def serve_jobs(socket_path: str, preload: tuple[str, ...] | None = None) -> int:
    """``ltr-bench job-server``: run commands sent to ``socket_path`` until stopped."""
    from bench import jobserver

    jobserver.serve(socket_path, run_command, jobserver.PRELOAD if preload is None else preload,
                    log=lambda message: print(message, file=sys.stderr, flush=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ltr-bench`` console script.

    Inside a local workflow run the command is handed to the warm job server
    (:mod:`bench.jobserver`) when one is reachable; otherwise it runs here.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != [JOB_SERVER]:
        from bench.jobserver import run_in_server

        status = run_in_server(argv)
        if status is not None:
            return status
    return run_command(argv)


def run_command(argv: list[str]) -> int:
    """Parse ``argv`` and run the sub-command in this process; its exit status."""
    wanted = argv[0] if argv and not argv[0].startswith("-") else None
    known = {c for cmds in STAGES.values() for c in cmds} | {JOB_SERVER}
    parser = _build_parser(wanted if wanted in known else None)
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except BenchError as exc:
        print(f"ltr-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
