"""Costs: what a study's jobs will take (``ltr-bench plan``), what to ask a cluster for, how far it is.

- :mod:`~bench.costs.calibration`: the per-device cache of measurements and its files;
- :mod:`~bench.costs.measure`: the measurements (the study's real code on generated data,
  :mod:`~bench.costs.fakedata`, timed in forked children with :mod:`bench.perf.process`);
- :mod:`~bench.costs.calibrate`: taking the measurements a plan lacks, with progress and ETA;
- :mod:`~bench.costs.model`: one cost model per rule (projected seconds and peak memory from a
  job's config, the shape of its fold and the measurements);
- :mod:`~bench.costs.plan`: a target's jobs with their projections, summed and printed;
- :mod:`~bench.costs.sizing`: the workflow's memory and time requests, from the projections;
- :mod:`~bench.costs.status`: done / running / remaining jobs and the time left;
- :mod:`~bench.costs.scale`: a finished study's jobs against their projections (``ltr-bench plan-check``);
- :mod:`~bench.costs.cli`: ``ltr-bench plan``, ``ltr-bench status`` and ``ltr-bench plan-check``.

Projecting imports no torch (the Snakefile imports :mod:`~bench.costs.sizing`); measuring
does, in the children of :mod:`~bench.costs.measure`, which only the CLI runs. This package
uses :mod:`bench.perf`'s process measurements; :mod:`bench.perf` never imports it.
"""
