"""ltr-bench: a reproducibility benchmark suite for learning-to-rank losses.

Stages, one module each (see ``../shared/docs/architecture.md`` in the team's docs):
``bench.data`` (registry, fetch, parse, prepare, synthetic), ``bench.losses``,
``bench.metrics``, ``bench.models``, ``bench.train``, ``bench.gbdt``, ``bench.stats``,
``bench.report`` and ``bench.perf``; ``bench.cli`` is the ``ltr-bench`` command.
"""

__version__ = "0.1.0"
