"""``ltr-bench perf <suite>``: one sub-command per entry of :data:`bench.perf.suites.SUITES`."""

from __future__ import annotations

import argparse

from bench.perf.suites import SUITES


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add ``perf`` with one sub-command per suite."""
    perf = subparsers.add_parser("perf", help="performance suites (markdown tables)")
    suites = perf.add_subparsers(dest="suite", metavar="SUITE")
    suites.required = True
    for suite in SUITES.values():
        p = suites.add_parser(suite.name, help=suite.help)
        suite.add_arguments(p)
        p.set_defaults(func=suite.run)
