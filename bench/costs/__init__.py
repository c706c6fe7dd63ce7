"""Costs: what a study's jobs will take (``ltr-bench plan``), what to ask a cluster for, how far it is.

- :mod:`~bench.costs.calibration`: the per-device cache of measurements and its files;
- :mod:`~bench.costs.model`: one cost model per rule (projected seconds and peak memory from a
  job's config, the shape of its fold and the measurements);
- :mod:`~bench.costs.plan`: a target's jobs with their projections, summed and printed;
- :mod:`~bench.costs.sizing`: the workflow's memory and time requests, from the projections;
- :mod:`~bench.costs.status`: done / running / remaining jobs and the time left;
- :mod:`~bench.costs.cli`: ``ltr-bench plan`` and ``ltr-bench status``.

Nothing here imports torch (the Snakefile imports :mod:`~bench.costs.sizing`); measuring is
:mod:`bench.perf.calibrate`'s, which only the CLI calls.
"""
