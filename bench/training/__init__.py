"""Training: one (prepared fold, method, seed) -> one run directory (:mod:`bench.results`).

- :mod:`~bench.training.config`: the neural method's resolved config (``train`` keys and
  their defaults, model, metrics), the learning-rate and temperature schedules;
- :mod:`~bench.training.loss`: the loss callable built from the registry, with the
  per-call temperature and generator;
- :mod:`~bench.training.batches`: device-resident splits, per-epoch training lists,
  fixed evaluation lists, scoring;
- :mod:`~bench.training.device`: the ``--device`` policy, determinism, autocast;
- :mod:`~bench.training.state`: the loop's state and the resumable checkpoint;
- :mod:`~bench.training.loop`: the training loop (epochs, validation, early stopping);
- :mod:`~bench.training.neural`: :func:`~bench.training.neural.train_run`;
- :mod:`~bench.training.gbdt`: :func:`~bench.training.gbdt.gbdt_run` (LightGBM, XGBoost);
- :mod:`~bench.training.common`: what both run kinds share (load the fold, evaluate a split,
  record provenance, write the run directory);
- :mod:`~bench.training.cli`: ``ltr-bench train`` and ``ltr-bench gbdt``.

Nothing is imported here, so ``ltr-bench gbdt`` never imports torch.
"""
