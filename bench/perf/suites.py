"""The table of perf suites: name -> the module (and functions) that implement it, lazily.

Like the loss registry, entries name their targets as strings, so listing the suites (for
``ltr-bench perf --help``, or for ``perf all``) imports nothing; a suite's module is imported
when its arguments are added or its report runs. Adding a suite is one module in
``bench/perf/`` with an ``add_<x>_arguments(parser)`` and a ``report_<x>(args) ->
SuiteResult``, plus its line here.

>>> SUITES["losses"].module
'bench.perf.losses'
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PerfSuite:
    """One ``ltr-bench perf <name>`` sub-command, its functions named lazily."""

    name: str
    help: str
    module: str  # the module implementing it
    add_arguments_name: str  # add_<x>_arguments(parser) in that module
    report_name: str  # report_<x>(args) -> SuiteResult in that module

    def _resolve(self, attr: str) -> Callable[..., Any]:
        return getattr(importlib.import_module(self.module), attr)

    @property
    def add_arguments(self) -> Callable[[argparse.ArgumentParser], None]:
        return self._resolve(self.add_arguments_name)

    @property
    def report(self) -> Callable[[argparse.Namespace], Any]:
        return self._resolve(self.report_name)

    def run(self, args: argparse.Namespace) -> int:
        """CLI entry: measure, write, print; exit status 1 when a measurement failed."""
        return self.report(args).rc


def _suite(name: str, help: str, module: str, stem: str) -> tuple[str, PerfSuite]:
    return name, PerfSuite(name, help, f"bench.perf.{module}", f"add_{stem}_arguments", f"report_{stem}")


SUITES: dict[str, PerfSuite] = dict(
    [
        _suite("losses", "time and peak memory of every registered loss vs textbook references", "losses", "losses"),
        _suite("kernels", "the four loss kernels timed side by side with a --baseline checkout, NeuralNDCG's "
               "memory-traffic floor", "kernels", "kernels"),
        _suite("scaling", "PiRank Fig. 7: training-step wall-clock and peak memory vs list size", "scaling",
               "scaling"),
        _suite("train", "the real trainer's docs/s vs the bare step (float32 and bfloat16)", "train", "train"),
        _suite("parse", "SVMlight parsing vs scikit-learn (MB/s) and the prepared-cache reload", "data", "parse"),
        _suite("metrics", "all metrics on an MSLR-sized fold vs a per-query loop", "data", "metrics"),
        _suite("soft-ops", "fast soft rank / soft sort (L2, KL) vs torchsort in one process, one thread "
               "(ours alone without torchsort)", "soft_ops", "soft_ops"),
        _suite("study", "slowest Snakemake jobs from results/benchmarks/**/*.tsv", "study", "study"),
        _suite("gbdt-devices", "XGBoost on the GPU vs the CPU: the gbdt run function on one fold, time and per-query "
               "metric differences", "gbdt_devices", "gbdt_devices"),
        _suite("all", "every suite, the scaling figure and the targets summary (--device cuda: gpu.md)",
               "all_suites", "all"),
    ]
)


def suite_namespace(name: str, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` with the suite's own CLI options (so defaults stay in one place)."""
    parser = argparse.ArgumentParser(prog=f"ltr-bench perf {name}")
    SUITES[name].add_arguments(parser)
    return parser.parse_args(argv)
