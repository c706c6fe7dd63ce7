"""Parse throughput: ``bench.data.read_svmlight`` vs ``sklearn.datasets.load_svmlight_file``.

A thin wrapper around ``ltr-bench perf parse`` (the one implementation lives in
:mod:`bench.perf.data`): generates an MSLR-format file, parses it with both readers, times
the prepared-cache reload, prints the table and writes it to ``--out``.

Run: ``python benchmarks/bench_parse.py [--mb 200] [--keep DIR] [--out reports/perf/parse.md]``.
Not a test: numbers vary with the machine; nothing here asserts a wall time.
"""

from __future__ import annotations

import sys

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main(["perf", "parse", *sys.argv[1:]]))
