"""``ltr-bench``: the command every Snakemake rule calls.

Each stage module owns its sub-commands through a ``register_cli(subparsers)`` function
that adds parsers and sets ``func`` on them; this file only lists them (:data:`COMMANDS`), so
adding a stage never touches another stage's code. A stage module is imported only when one of
its commands runs or its own ``--help`` is asked for: ``ltr-bench fetch`` does not pay for
importing torch, and ``ltr-bench --help`` imports no stage at all (the stages import torch,
pandas, SciPy, Snakemake ...: 8 s of CPU on a loaded 2-core machine, for a list of names).

This is the only module that knows about exit codes: an error the user can fix is a
:class:`bench.errors.BenchError` anywhere below, printed here as one line
(``ltr-bench <command>: error: <message>``) with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bench.config.kinds import rule_help, rules
from bench.errors import BenchError

_TRAINING = {rule: ("bench.training.cli", rule_help(rule)) for rule in rules()}  # one per rule of the run kinds

# command -> (the module whose register_cli adds it, its line in `ltr-bench --help`), in that
# listing's order: the listing is built from here alone. A line is the module's own help text
# (tests/test_startup.py checks that they agree and that every command is here).
COMMANDS: dict[str, tuple[str, str]] = {
    "datasets": ("bench.data.cli", "list datasets and their status"),
    "fetch": ("bench.data.cli", "download (or verify a manual archive), verify, extract"),
    "prepare": ("bench.data.cli", "parse/generate, filter, normalise and cache a fold"),
    "synthetic": ("bench.data.cli", "one synthetic draw to an .npz (X, y, qid)"),
    **_TRAINING,
    "tune": ("bench.training.cli", "train a tuned method's configurations on the tuning fold, then choose one on "
                                   "its validation"),
    "tuned-runs": ("bench.training.cli", "train a tuned method's chosen configuration on the folds and seeds the "
                                         "tuning did not"),
    "evaluate": ("bench.evaluate", "per-query metrics of finished runs on one prepared test split"),
    "export-scores": ("bench.evaluate", "write a run's test scores as a LETOR score file (one per line, test file "
                                        "order) for the official Eval-Score-3.0.pl / Eval-Score-4.0.pl"),
    "select": ("bench.selection", "choose each selected method's grid point on validation (one fold)"),
    "loss-curves": ("bench.curves", "NDCG vs NeuralNDCG on the papers' toy lists, as a table"),
    "toy-sort": ("bench.curves", "NeuralSort's relaxed sort of NeuralNDCG Table 1's toy list, as a table"),
    "stats": ("bench.stats", "paired significance tests of per-query metrics"),
    "tuning-summary": ("bench.stats", "a tuned table's budgets, choices and what tuning bought"),
    "ranking": ("bench.ranking", "rank methods across datasets and folds: mean ranks, Friedman, Nemenyi, critical "
                                 "difference (Demšar 2006)"),
    "table": ("bench.report.cli", "render a statistics table as Markdown, LaTeX and HTML"),
    "selection-table": ("bench.report.cli", "render a table's hyperparameter selection (every grid point)"),
    "figure": ("bench.report.cli", "draw one figure as PNG and PDF"),
    "computed-table": ("bench.report.cli", "render a table computed from something other than statistics"),
    "quality-cost": ("bench.report.cli", "per method: mean metric with a CI over seeds, seconds per epoch, peak "
                                         "memory (the quality-cost figure's table)"),
    "coverage": ("bench.report.cli", "the coverage list of docs/coverage.md as a report page"),
    "report-text": ("bench.report.cli", "the HTML report's text: titles and full captions, readable without JavaScript"),
    "compare-table": ("bench.report.cli", "new losses vs frozen baselines, paired tests, rendered"),
    "freeze": ("bench.frozen", "store per-query baseline results with a manifest"),
    "check-reproduced": ("bench.frozen", "do the current runs reproduce the frozen baselines?"),
    "check-frozen": ("bench.frozen", "verify frozen baselines against the current protocol and data"),
    "perf": ("bench.perf.cli", "performance suites (markdown tables)"),
    "plan": ("bench.costs.cli", "a study's cost before launch: runs, device-hours, peak memory per job"),
    "status": ("bench.costs.cli", "how far a study is: done/running/remaining jobs, time left"),
    "plan-check": ("bench.costs.cli", "a finished study's jobs: measured time and peak vs projection and request"),
}
JOB_SERVER = "job-server"  # served by this module itself (bench.jobserver runs run_command)


def _build_parser(wanted: str | None) -> argparse.ArgumentParser:
    """The parser of command ``wanted`` (its module imported), or with ``None`` the listing."""
    parser = argparse.ArgumentParser(
        prog="ltr-bench",
        description="Learning-to-rank benchmark suite: each Snakemake rule calls one of these commands.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if wanted is None:  # `--help`, or no or an unknown command: names and lines only
        for name, (_, line) in COMMANDS.items():
            sub.add_parser(name, help=line, add_help=False)
    elif wanted in COMMANDS:
        module_name = COMMANDS[wanted][0]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if not (exc.name and module_name.startswith(exc.name)):
                raise
            # stage not built yet: its commands are simply absent
        else:
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


def _command(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word); None for an option or a word that is no
    command, which the listing's parser then answers (``--help``, or the error naming them all)."""
    word = argv[0] if argv else None
    return word if word in COMMANDS or word == JOB_SERVER else None


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
    """Parse ``argv`` and run the sub-command in this process; its exit status.

    Every command runs with glibc keeping freed heap memory for reuse
    (:func:`bench.perf.process.keep_freed_heap`: a training step's temporaries were otherwise
    faulted back in at every step, a third of a PL-Rank run's CPU time).
    """
    from bench.perf.process import keep_freed_heap  # imported here: a client that hands its command over never needs it

    keep_freed_heap()
    args = _build_parser(_command(argv)).parse_args(argv)
    try:
        result = args.func(args)
    except BenchError as exc:
        print(f"ltr-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
