"""ltr-bench: a reproducibility benchmark suite for learning-to-rank losses.

The package is layered; a module imports only from layers below it (``docs/architecture.md``,
guarded by ``tests/test_architecture.py``):

0. ``bench.errors``, ``bench.atomic``, ``bench.seeds``, ``bench.provenance``;
1. ``bench.data``, ``bench.losses``, ``bench.metrics``, ``bench.models``;
2. ``bench.config`` (validate, plan, run) and ``bench.results``;
3. ``bench.training``, ``bench.evaluate``, ``bench.stats``, ``bench.frozen``, ``bench.curves``;
4. ``bench.report``;
5. ``bench.perf`` and the ``cli`` modules; ``bench.cli`` is the ``ltr-bench`` command.
"""

__version__ = "0.1.0"
