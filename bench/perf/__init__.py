"""``ltr-bench perf``: performance suites, printed and written as markdown tables.

One module per suite, named lazily in :data:`bench.perf.suites.SUITES` (as the loss registry
names losses), so nothing here imports a suite until it runs:

* ``losses`` (:mod:`bench.perf.losses`): forward + backward of every loss vs the textbook
  references of :mod:`bench.perf.reference`;
* ``scaling`` (:mod:`bench.perf.scaling`): PiRank Fig. 7, training-step wall-clock vs L;
* ``train`` (:mod:`bench.perf.train`): the real trainer's docs/s against the bare step, float32 and bfloat16;
* ``parse`` and ``metrics`` (:mod:`bench.perf.data`): SVMlight parsing vs scikit-learn,
  prepared-cache reload, all metrics on an MSLR-sized fold vs a per-query loop;
* ``soft-ops`` (:mod:`bench.perf.soft_ops`): the fast soft rank / soft sort against torchsort
  (the optional extra ``perf-peers``) in one process, or ours alone without it;
* ``study`` (:mod:`bench.perf.study`): slowest Snakemake jobs from their benchmark files;
* process memory and forked measurements (:mod:`bench.perf.process`, not a suite, torch-free):
  also what the calibration of ``ltr-bench plan`` (:mod:`bench.costs.measure`) times with;
* ``all`` (:mod:`bench.perf.all_suites`): every suite, one markdown per suite, the scaling
  figure, a targets summary, and with ``--device cuda`` a GPU report.

Each suite's ``report(args)`` measures, writes its outputs atomically and returns a
:class:`bench.perf.common.SuiteResult`; :mod:`bench.perf.cli` registers one sub-command per
suite. ``--device`` follows the one policy of :mod:`bench.training.device`: a measurement
asked for on CUDA without CUDA stops with an error instead of timing the CPU.
"""
