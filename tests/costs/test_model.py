"""bench.costs.model: projections computed by hand from a calibration (the formulas of the docstring)."""

from __future__ import annotations

import math

import pytest

from bench.config import kinds, plan
from bench.config.jobs import Job
from bench.config.run import resolve_train
from bench.config.validate import load_config
from bench.costs.calibration import Calibration, Device
from bench.costs.measure import REFERENCE_LOSS
from bench.costs.model import BIN_BYTES, MEASURED_BATCH, VALUES, Context, line, peak_fit, project, shape_spec
from bench.data.shapes import FoldShape, SplitShape
from bench.training.budget import Budget

SCALE = ("config/paper.yaml", "config/scale.yaml")


def _context():
    return Context(load_config(*SCALE), Calibration(Device("cpu", "test cpu", 1)))


def _run_job(experiment: str, method: str) -> Job:
    w = {"experiment": experiment, "dataset": "mslr-like", "fold": "Fold1", "method": method, "seed": 0}
    return Job(kinds.RUN_KINDS["neural"].rule, plan.RUN.format(**w), w)


def test_line_through_two_points_never_slopes_down():
    assert line([1, 3], [2.0, 6.0], 10) == 20.0
    assert line([1, 3], [6.0, 2.0], 10) == 6.0  # noise: no negative slope
    assert line([5, 5], [2.0, 3.0], 50) == 3.0


def test_peak_fit_keeps_the_fold_bytes_exact():
    shape = FoldShape(2, {s: SplitShape(10, 1000) for s in ("train", "vali", "test")}, "prepared")
    m = {"sizes": [100, 200], "peak_bytes": [1_000 + 500, 1_000 + 1_100], "fold_bytes": [500, 1_000]}
    # rest = 1000 then 1100: +1 byte a document; at 3000 documents 1000 + 2900 + the fold
    assert peak_fit(m, shape, mapped=shape.nbytes) == shape.nbytes + 1_000 + 2_900
    assert peak_fit(m, shape, mapped=shape.run_mapped_bytes) == shape.run_mapped_bytes + 1_000 + 2_900
    assert peak_fit(m, shape, mapped=None) == line([100, 200], [1500, 2100], 3000)


def test_a_neural_run_maps_train_and_vali_then_vali_and_test():
    shape = FoldShape(3, {"train": SplitShape(10, 600), "vali": SplitShape(4, 200), "test": SplitShape(5, 300)},
                      "prepared")
    assert shape.run_mapped_bytes == shape.split_bytes("vali") + shape.split_bytes("train")
    wide_test = FoldShape(3, {"train": SplitShape(10, 100), "vali": SplitShape(4, 200), "test": SplitShape(5, 300)},
                          "prepared")
    assert wide_test.run_mapped_bytes == wide_test.split_bytes("vali") + wide_test.split_bytes("test")
    assert shape.run_mapped_bytes < shape.nbytes


def test_neural_projection_is_the_documented_formula():
    ctx = _context()
    job = _run_job("pirank", "ranknet")
    first = project(ctx, job)
    assert first.seconds is None and sorted(k.split(":")[0] for k in first.missing) == [
        "loss_step", "loss_step", "model_step", "neural_data", "neural_eval"]
    step = {"step_s": 0.2, "work_bytes": 280e6, "n_params": 1000, "device_work_bytes": None}
    # the step of the model with the reference loss, plus what ranknet costs beyond the reference
    losses = {"ranknet": {"seconds": 0.03, "work_bytes": 30e6}, REFERENCE_LOSS: {"seconds": 0.01, "work_bytes": 10e6}}
    ev = {"docs_per_s": 50_000.0, "work_bytes": 100e6}
    data = {"sizes": [100_000, 200_000], "peak_bytes": [5e8 + 1e7, 6e8 + 2e7], "seconds": [1.0, 2.0],
            "fold_bytes": [5e8, 6e8]}
    for kind, spec in first.missing.values():
        assert kind != "model_step" or spec["loss"] == REFERENCE_LOSS
        result = losses[spec["loss"]] if kind == "loss_step" else {"model_step": step, "neural_eval": ev,
                                                                    "neural_data": data}[kind]
        ctx.calibration.put(kind, spec, result, 0.0)
    proj = project(ctx, job)
    assert proj.complete and proj.missing == {}
    shape = ctx.shape("mslr-like", "Fold1")
    cfg = plan.run_config(ctx.config, "pirank", "mslr-like", "ranknet")
    train = resolve_train(cfg["train"], {}, method="ranknet")
    budget = Budget.of(train, shape.splits["train"].n_queries)
    n = shape.n_docs
    evals = budget.n_epochs * shape.splits["vali"].n_docs + shape.splits["test"].n_docs
    seconds = (1.0 + (n - 100_000) / 100_000) + budget.total_steps * (0.2 + 0.03 - 0.01) + evals / 50_000
    assert proj.seconds == pytest.approx(seconds)
    rest = 1e7 + 1e7 * (n - 100_000) / 100_000
    assert proj.host_bytes == int(shape.run_mapped_bytes + rest + 2 * 4000 + max(280e6 + 30e6 - 10e6, 100e6 + 3 * 4000))
    assert proj.steps == budget.total_steps == 60


def test_a_refit_adds_its_steps_on_train_and_validation_and_a_copy_of_both():
    """``train.refit`` (NeuralNDCG's protocol in the paper profile): the budget again on the
    training and validation queries together, and the private copy of both splits."""
    measured = {"model_step": {"step_s": 0.2, "work_bytes": 280e6, "n_params": 1000, "device_work_bytes": None},
                "neural_eval": {"docs_per_s": 50_000.0, "work_bytes": 100e6},
                "neural_data": {"sizes": [100_000, 200_000], "peak_bytes": [5e8, 6e8], "seconds": [1.0, 2.0],
                                "fold_bytes": [5e8, 6e8]}}
    projections = {}
    for refit in (False, True):
        ctx = Context(load_config(*SCALE, overrides={"protocols": {"neuralndcg": {"train": {"refit": refit}}}}),
                      Calibration(Device("cpu", "test cpu", 1)))
        job = _run_job("neuralndcg", "listnet")
        for kind, spec in project(ctx, job).missing.values():
            ctx.calibration.put(kind, spec, measured.get(kind, {"seconds": 0.01, "work_bytes": 10e6}), 0.0)
        projections[refit] = project(ctx, job)
    shape = ctx.shape("mslr-like", "Fold1")
    train = resolve_train(plan.run_config(ctx.config, "neuralndcg", "mslr-like", "listnet")["train"], {}, method="listnet")
    refit_steps = Budget.of(train, shape.splits["train"].n_queries + shape.splits["vali"].n_queries).total_steps
    plain, refit = projections[False], projections[True]
    assert refit.steps == plain.steps + refit_steps and refit_steps > 0
    step_s = 0.2 * train["batch_size"] / min(train["batch_size"], MEASURED_BATCH)  # the model's step at the batch
    assert refit.seconds == pytest.approx(plain.seconds + refit_steps * step_s)
    assert refit.host_bytes == plain.host_bytes + shape.split_bytes("train") + shape.split_bytes("vali")
    assert "then a refit of" in refit.work and "refit" not in plain.work


def test_the_exact_calibration_measures_each_model_with_its_own_loss_at_fractions_of_the_fold():
    fast, exact = _context(), Context(load_config(*SCALE), Calibration(Device("cpu", "test cpu", 1)), exact=True)
    job = _run_job("pirank", "ranknet")
    n = fast.shape("mslr-like", "Fold1").n_docs
    fast_specs = {kind: spec for kind, spec in project(fast, job).missing.values() if kind != "loss_step"}
    exact_specs = dict(project(exact, job).missing.values())
    assert "loss_step" not in exact_specs and exact_specs["model_step"]["loss"] == "ranknet"
    assert fast_specs["neural_data"]["sizes"] == [v // 136 for v in VALUES]  # MSLR's 136 features
    assert exact_specs["neural_data"]["sizes"] == pytest.approx([0.05 * n, 0.1 * n], abs=1)


def test_gbdt_projection_separates_rounds_from_the_rest():
    ctx = _context()
    w = {"experiment": "neuralndcg", "dataset": "mslr-like", "fold": "Fold1", "method": "xgboost_pairwise", "seed": 0}
    job = Job("gbdt", plan.RUN.format(**w), w)
    (kind, spec), = project(ctx, job).missing.values()
    shape = ctx.shape("mslr-like", "Fold1")
    binned = BIN_BYTES * shape.n_features  # the library's binned copy, per document
    points = [{"docs": d, "rounds": r, "seconds": 1.0 * d / 1000 + r * 0.01 * d / 1000,
               "peak_bytes": 300e6 + (4 + binned) * d + (50e6 if d == 2000 else 0), "fold_bytes": 4 * d}
              for d in (1000, 2000) for r in (1, 4)]
    ctx.calibration.put(kind, spec, {"points": points}, 0.0)
    proj = project(ctx, job)
    n = ctx.shape("mslr-like", "Fold1").n_docs
    assert proj.rounds == 20 and proj.bound
    # the paper profile's NeuralNDCG protocol refits on train + validation: the same c + R r again
    # at their documents (issue 41)
    n_refit = shape.splits["train"].n_docs + shape.splits["vali"].n_docs
    assert proj.seconds == pytest.approx(n / 1000 + 20 * 0.01 * n / 1000 + n_refit / 1000 + 20 * 0.01 * n_refit / 1000)
    assert "refit" in proj.work
    ctx = Context(load_config(*SCALE, overrides={"protocols": {"neuralndcg": {"train": {"refit": False}}}}),
                  ctx.calibration)
    assert project(ctx, job).seconds == pytest.approx(n / 1000 + 20 * 0.01 * n / 1000)
    # the fold + the binned copy at n + the rest as at the larger size (300 MB + 50 MB of trees: not scaled)
    assert proj.host_bytes == pytest.approx(shape.nbytes + binned * n + 350e6, rel=1e-6)


def test_unknown_shapes_and_sinkprop_are_unsized_with_a_reason():
    config = load_config("config/paper.yaml")
    ctx = Context(config, Calibration(Device("cpu", "test cpu", 1)))
    w = {"experiment": "letor", "dataset": "mq2008", "fold": "Fold1", "method": "listnet", "seed": 0}
    assert "unknown until prepared" in project(ctx, Job("train", plan.RUN.format(**w), w)).unsized
    w = {**w, "method": "sinkprop"}
    assert "SinkProp" in project(ctx, Job("train", plan.RUN.format(**w), w)).unsized


def test_shape_spec_is_a_histogram_of_lengths():
    spec = shape_spec(_context().shape("mslr-like", "Fold1"))
    train = spec["splits"]["train"]
    assert sum(train["lengths"]["counts"]) == train["n_queries"] == 18_919
    assert sum(v * c for v, c in zip(train["lengths"]["values"], train["lengths"]["counts"])) == train["n_docs"]
    assert math.isclose(train["n_docs"] / train["n_queries"], 120.0, rel_tol=0.01)


def test_the_scaling_timings_are_bounded_by_their_own_budget():
    """``curves x sizes x 2 x max_seconds``, with the PiRank variants the suite times (its own table)."""
    from bench.costs.model import SCALING_PIRANK_CURVES
    from bench.perf.scaling import PIRANK_STATED

    assert SCALING_PIRANK_CURVES == len(PIRANK_STATED)
    config = load_config("config/paper.yaml")
    spec = config["figures"]["scaling_figure"]
    job = Job("perf_scaling", plan.SCALING_CSV, {})
    proj = project(Context(config, Calibration(Device("cpu", "test cpu", 1))), job)
    curves = len(PIRANK_STATED) + len(set(spec["losses"]) - {"pirank_ndcg"})
    assert proj.complete and proj.bound and proj.seconds == curves * len(spec["sizes"]) * 2 * spec["max_seconds"]


def test_the_ranking_is_projected_as_its_tables_statistics_job():
    """Rule ``ranking`` reads the frames its table's stats job reads: at most that job's memory, the
    time of a summarising step (issue 40)."""
    overrides = {"datasets": {"syn-letor": {"enabled": True}}, "computed_tables": {"ranking_table": {"enabled": True}}}
    ctx = Context(load_config(overrides=overrides), Calibration(Device("cpu", "test cpu", 1)))
    stats_job = Job("stats", plan.STATS.format(table="unified_table"), {"table": "unified_table"})
    ranking, stats = project(ctx, Job("ranking", plan.RANKING, {})), project(ctx, stats_job)
    assert ranking.missing and ranking.missing == stats.missing  # the same measurement: the table's summary
    (kind, spec), = stats.missing.values()
    ctx.calibration.put(kind, spec, {"sizes": spec["sizes"], "seconds": [2.0] * len(spec["sizes"]),
                                     "peak_bytes": [3e8] * len(spec["sizes"])}, 1.0)
    ranking, stats = project(ctx, Job("ranking", plan.RANKING, {})), project(ctx, stats_job)
    assert ranking.host_bytes == stats.host_bytes == int(3e8) and ranking.bound
    assert stats.seconds > 0 and ranking.seconds == 0.0 and ranking.complete
