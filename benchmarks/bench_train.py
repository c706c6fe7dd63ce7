"""Training throughput on ``mslr-like`` synthetic data: neural losses and GBDT baselines.

A thin wrapper around ``ltr-bench perf train`` (the one implementation lives in
:mod:`bench.perf.train`): queries/s, ms/step, the loss alone, the data pipeline's share of
the step, and LightGBM / XGBoost training time on the same split.

Run: ``python benchmarks/bench_train.py [--queries 2000] [--steps 30] [--trees 50] [--threads N]
[--batch 16] [--list-size 200] [--out reports/perf/train.md]``.
"""

from __future__ import annotations

import sys

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main(["perf", "train", *sys.argv[1:]]))
