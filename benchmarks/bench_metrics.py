"""Benchmark: every metric on an MSLR-WEB30K-sized test fold, vectorised vs a per-query loop.

A thin wrapper around ``ltr-bench perf metrics`` (the fold generator, the per-query loop and
the timing live in :mod:`bench.perf.data`). Targets (printed, not asserted): <= 1 s.

    python benchmarks/bench_metrics.py [--queries 6306] [--docs 753611] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import sys

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main(["perf", "metrics", *sys.argv[1:]]))
