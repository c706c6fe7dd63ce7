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
- :mod:`~bench.training.linear`: :func:`~bench.training.linear.linear_run` (least squares with
  a ridge grid chosen on validation; the solver SinkProp's protocol starts from);
- :mod:`~bench.training.sinkprop_protocol`, :mod:`~bench.training.sinkprop_run`: SinkProp's
  own protocol (Sec. 5), the run kind ``sinkprop_protocol`` (:mod:`bench.config.kinds`) that a
  run config with its section is handed to;
- a running job's progress line and record: :mod:`bench.atomic.progress` (layer 0, torch-free; what
  ``ltr-bench status`` reads);
- :mod:`~bench.training.refit`: which model a run tests (``train.checkpoint``) and the refit on
  train + validation (``train.refit``; torch-free: the run kinds' refusal, the refit's length,
  the full training fold);
- :mod:`~bench.training.common`: what every run kind shares (load the fold, evaluate a split,
  record provenance, write the run directory);
- :mod:`~bench.training.cli`: one command per rule of the run kinds (``ltr-bench train``,
  ``gbdt``, ``linear``) and :func:`~bench.training.cli.run_job`, which runs a config by its kind.

Nothing is imported here, so ``ltr-bench gbdt`` and ``ltr-bench linear`` never import torch.
"""
