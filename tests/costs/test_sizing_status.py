"""bench.costs: the calibration file, cluster requests from projections, and the status of a study."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest

from bench import cluster
from bench.atomic.progress import write_progress
from bench.config import plan
from bench.config.jobs import Job
from bench.config.run import run_config_digest
from bench.config.validate import load_config
from bench.costs import model, sizing, status
from bench.costs.calibration import (
    Calibration,
    Device,
    device_slug,
    find_calibration,
    load_calibration,
    open_calibration,
)
from bench.costs.model import Context, project
from bench.errors import UsageError

SCALE = ("config/paper.yaml", "config/scale.yaml")
ROOT_CONFIG = Path(__file__).resolve().parents[2] / "config"


TEST_CPU = Device("cpu", "test cpu", 1)


def _filled(config, device=TEST_CPU, folder=None) -> Calibration:
    """A calibration holding made-up measurements for every job of the config's `all`."""
    from bench.config.jobs import target_jobs

    cal = Calibration(device, {}, None if folder is None else folder / f"{device_slug(device)}.json")
    ctx = Context(config, cal)
    fake = {"model_step": {"step_s": 0.1, "work_bytes": 2e8, "n_params": 10, "device_work_bytes": None},
            "loss_step": {"seconds": 0.01, "work_bytes": 1e6, "device_work_bytes": None},
            "neural_eval": {"docs_per_s": 1e5, "work_bytes": 1e8},
            "process": {"peak_bytes": 3e8, "step_bytes": 2e8},
            "summary": {"sizes": [500, 2000], "peak_bytes": [4e8, 4e8], "seconds": [1.0, 1.0]}}
    two = {"sizes": [1e5, 2e5], "peak_bytes": [6e8, 7e8], "seconds": [1.0, 2.0], "fold_bytes": [5e7, 1e8]}
    for job in target_jobs(config, ["all"]):
        proj = project(ctx, job)
        for kind, spec in (proj.missing.values() if proj else []):
            if kind == "gbdt":
                result = {"points": [{"docs": d, "rounds": r, "seconds": d / 1e5 + r, "peak_bytes": 6e8 * d / 1e5,
                                      "fold_bytes": 5e7 * d / 1e5} for d in (1e5, 2e5) for r in (1, 4)]}
            else:
                result = fake.get(kind, two)
            cal.put(kind, spec, result, 0.0)
    return cal


def test_calibration_file_round_trip_and_errors(tmp_path):
    cal = open_calibration(Device("cpu", "My CPU (2 logical cores)", 2), tmp_path)
    assert cal.path.name == "cpu-my-cpu-2-logical-cores-t2.json" and cal.entries == {}
    cal.put("process", {}, {"peak_bytes": 1}, 0.5)
    cal.save()
    again = load_calibration(cal.path)
    assert again.get("process", {}) == {"peak_bytes": 1} and again.device == cal.device
    cal.path.write_text("{not json")
    with pytest.raises(UsageError, match="not a calibration file"):
        load_calibration(cal.path)
    with pytest.raises(UsageError, match="not found"):
        load_calibration(tmp_path / "missing.json")


def test_which_calibration_a_workflow_run_uses(tmp_path):
    for threads in (1, 2):
        cal = Calibration(Device("cpu", "x", threads), {}, tmp_path / f"cpu-x-t{threads}.json")
        cal.save()
    assert find_calibration("cpu", 2, tmp_path, environ={}).device.threads == 2
    assert find_calibration("cuda", 1, tmp_path, environ={}) is None
    assert find_calibration("cpu", 1, tmp_path, environ={"LTR_BENCH_CALIBRATION": "off"}) is None
    chosen = find_calibration("cuda", 1, tmp_path, environ={"LTR_BENCH_CALIBRATION": str(tmp_path / "cpu-x-t1.json")})
    assert chosen.device.threads == 1  # an explicit file wins (e.g. a CPU calibration for GPU-less GPU jobs)


def test_requests_follow_the_projection_with_margins_and_attempts(tmp_path, monkeypatch):
    config = load_config(*SCALE)
    cal = _filled(config, folder=tmp_path)
    cal.save()
    monkeypatch.setenv("LTR_BENCH_CALIBRATION", str(cal.path))
    sizing._contexts.clear()
    w = {"experiment": "pirank", "dataset": "mslr-like", "fold": "Fold1", "method": "ranknet", "seed": "0"}
    proj, _ = sizing.projection(config, "train", w)
    first = sizing.request(config, "train", w, 1, strict=True)
    # on a cluster the request adds what the job's step holds besides the job (step_bytes)
    assert first["mem_mb"] == math.ceil((sizing.MEM_MARGIN * proj.host_bytes + 2e8) / 2**20)
    local = sizing.request(config, "train", w, 1, strict=False)
    assert local["mem_mb"] == math.ceil(sizing.MEM_MARGIN * proj.host_bytes / 2**20)
    assert first["runtime"] == math.ceil(max(sizing.MIN_MINUTES, sizing.TIME_MARGIN * proj.seconds / 60))
    assert sizing.request(config, "train", w, 2, strict=True) == {k: 2 * v for k, v in first.items()}
    # a job the calibration cannot project gets the default profile's static sizes
    w2 = {**w, "method": "lambdarank_k10"}
    assert sizing.projection(config, "train", w2)[0].missing
    assert sizing.request(config, "train", w2, 1, strict=True) == dict(zip(("mem_mb", "runtime"),
                                                                           cluster.SIZES["default"]["train"]))


def _job(method: str) -> Job:
    w = {"experiment": "pirank", "dataset": "mslr-like", "fold": "Fold1", "method": method, "seed": 0}
    return Job("train", plan.RUN.format(**w), w, ["pirank_table1"])


def _prepared(config, job: Job) -> None:
    """The run's prepared fold as this config's workflow writes it: its meta.json (the dataset's
    resolved options), older than what follows."""
    from bench.data.prepare import resolve_options

    w = job.wildcards
    fold = Path(plan.PREPARED.format(dataset=w["dataset"], fold=w["fold"]))
    fold.mkdir(parents=True, exist_ok=True)
    options = resolve_options(config["datasets"][w["dataset"]]["options"], True)
    (fold / "meta.json").write_text(json.dumps({"options": options, "fold": w["fold"]}))
    os.utime(fold / "meta.json", (time.time() - 60, time.time() - 60))


def _finished(config, job: Job, *, run_config_sha256: str | None = None, **facts) -> Path:
    """A finished run's run.json, recording the digest of this config's run config (as a run the
    workflow starts does) unless another is given; 30 s old: newer than its fold (:func:`_prepared`),
    older than what the test touches next (file times are as coarse as the kernel's clock tick)."""
    w = job.wildcards
    digest = run_config_sha256 or plan.run_config_digest(config, w["experiment"], w["dataset"], w["method"])
    os.makedirs(job.output, exist_ok=True)
    path = Path(job.output) / "run.json"
    path.write_text(json.dumps({**facts, "run_config_sha256": digest}))
    os.utime(path, (time.time() - 30, time.time() - 30))
    return path


def test_status_of_a_half_finished_study(tmp_path, monkeypatch):
    config = load_config(*SCALE)
    cal = _filled(config, folder=tmp_path / "cal")
    cal.save()
    monkeypatch.setenv("LTR_BENCH_CALIBRATION", str(cal.path))
    monkeypatch.chdir(tmp_path)  # the study's files are relative to the working directory
    done, running = _job("ranknet"), _job("pirank_ndcg_t1000")
    _prepared(config, done)
    projected = project(Context(config, cal), done).seconds
    _finished(config, done, wall_time_s=2 * projected)
    now = time.time()
    os.makedirs(os.path.dirname(running.output), exist_ok=True)
    write_progress(running.output, {"kind": "neural", "updated": now - 5, "unit": "step", "done": 30, "total": 60,
                                    "epoch": 1, "epochs": 1, "eta_s": 100.0})
    states, rows, ratios = status.study_status(config, ["pirank_table1"], now=now)
    by_output = {s.job.output: s for s in states}
    assert by_output[done.output].state == "done" and by_output[running.output].state == "running"
    assert by_output[running.output].eta_s == pytest.approx(95.0)
    assert ratios == {"train": pytest.approx(2.0)}  # the finished run took twice its projection
    table = next(r for r in rows if r.name == "pirank_table1")
    # done: the prepared fold and ranknet's run
    assert table.counts == {"done": 2, "running": 1, "interrupted": 0, "remaining": 3}
    assert not table.unknown and "unknown" not in status.render(states, rows, ratios, title="t")
    left = sum(2 * project(Context(config, cal), s.job).seconds if s.job.rule == "train" else
               project(Context(config, cal), s.job).seconds
               for s in states if s.state == "remaining" and project(Context(config, cal), s.job) is not None
               and project(Context(config, cal), s.job).complete)
    assert table.seconds_left == pytest.approx(95.0 + left)
    # a record older than the stale window is an interrupted run
    states, rows, _ = status.study_status(config, ["pirank_table1"], now=now + 3600)
    assert {s.job.output: s.state for s in states}[running.output] == "interrupted"
    text = status.render(states, rows, {}, title="t", cores=2)
    assert "interrupted:" in text and "step 30/60" in text


def test_status_refuses_a_finished_run_whose_run_json_changed(tmp_path, monkeypatch):
    """run.json is read through its digest: a changed byte is one line naming the file, never
    a wall time silently taken from a damaged record."""
    from bench.atomic.integrity import write_digests
    from bench.errors import IntegrityError

    monkeypatch.chdir(tmp_path)
    done = _job("ranknet")
    os.makedirs(done.output)
    run_json = tmp_path / done.output / "run.json"
    run_json.write_text(json.dumps({"wall_time_s": 12.5}))
    write_digests(tmp_path / done.output, ["run.json"])
    assert status.job_state(done, time.time(), 600.0, done=True).wall_s == 12.5
    run_json.write_text(json.dumps({"wall_time_s": 99.5}))  # same length, other bytes
    with pytest.raises(IntegrityError, match="run.json: contents changed"):
        status.job_state(done, time.time(), 600.0, done=True)


def test_another_profiles_outputs_are_not_this_studys(tmp_path, monkeypatch):
    """The issue's case: the scale profile's statistics and table, and a run made with another
    run config, at the paths this profile would write: none is done. Nothing run: 0 done."""
    config = load_config(*SCALE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LTR_BENCH_CALIBRATION", "off")
    states, rows, _ = status.study_status(config, ["pirank_table1"])
    assert rows[-1].counts["done"] == 0
    run = _job("ranknet")
    _prepared(config, run)
    _finished(config, run, run_config_sha256=run_config_digest({}), wall_time_s=1.0)  # another profile's run config
    for out in (plan.STATS.format(table="pirank_table1"), "reports/tables/pirank_table1.md"):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("made by another profile")
    states, rows, _ = status.study_status(config, ["pirank_table1"])
    assert {s.job.rule for s in states if s.state == "done"} == {"prepare"}  # same dataset options: the fold is
    # a newer fold than the run: the run is stale even with this study's run config
    _finished(config, run, wall_time_s=1.0)
    states, _, _ = status.study_status(config, ["pirank_table1"])
    assert {s.job.output: s.state for s in states}[run.output] == "done"  # this study's run config: done
    os.utime(plan.PREPARED.format(dataset="mslr-like", fold="Fold1") + "/meta.json")
    states, _, _ = status.study_status(config, ["pirank_table1"])
    assert {s.job.output: s.state for s in states}[run.output] == "remaining"


def test_time_left_is_unknown_unless_every_job_left_is_projected(tmp_path, monkeypatch):
    config = load_config(*SCALE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LTR_BENCH_CALIBRATION", "off")
    states, rows, ratios = status.study_status(config, ["all"])
    text = status.render(states, rows, ratios, title="t", cores=2)
    total = [line for line in text.splitlines() if line.startswith("total")][0]
    assert total.split()[-1] == "unknown" and "no calibration for its device yet" in text
    assert "side by side" not in text  # no wall-clock time from a partial sum
    cal = _filled(config, folder=tmp_path / "cal")
    cal.save()
    monkeypatch.setenv("LTR_BENCH_CALIBRATION", str(cal.path))
    states, rows, ratios = status.study_status(config, ["all"])
    assert all(not r.unknown for r in rows) and rows[-1].seconds_left > 0
    assert rows[-1].projected == sum(1 for s in states if s.job.rule not in model.LOCAL_RULES)


def _parsed(*argv: str):
    import argparse

    from bench.costs.cli import register_cli

    parser = argparse.ArgumentParser()
    register_cli(parser.add_subparsers())
    return parser.parse_args(list(argv))


def test_status_and_plan_agree_on_a_gpu_profile_on_a_machine_without_cuda(tmp_path, monkeypatch, capsys):
    """Issue 42: right after a finished paper plan, status said "no calibration for its device yet"
    and totalled a fraction of the plan: `gpu: true` made it look for a CUDA calibration while the
    plan (and the jobs, here) ran on the CPU. Status now projects on the plan's calibration: before
    anything ran, its total time left is the plan's device-hours (to float rounding)."""
    import torch

    from bench.costs import plan as planning
    from bench.costs.cli import _cli_status, plan_calibration, this_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("LTR_BENCH_CALIBRATION", raising=False)
    monkeypatch.chdir(tmp_path)
    argv = ("--configfile", str(ROOT_CONFIG / "paper.yaml"), str(ROOT_CONFIG / "scale.yaml"), "--config", "gpu=true",
            "--calibration-dir", str(tmp_path / "cal"))
    config = load_config(ROOT_CONFIG / "paper.yaml", ROOT_CONFIG / "scale.yaml", overrides={"gpu": True})
    assert config["gpu"] is True and sizing.device_kind(config, "train") == "cuda"
    _filled(config, device=this_device(config["device"], config["threads"]), folder=tmp_path / "cal").save()
    args = _parsed("status", "all", *argv)
    calibration = plan_calibration(args, config)
    assert calibration.device.kind == "cpu" and calibration.entries
    planned = planning.build_plan(config, ["all"], calibration)
    plan_total = planning.summaries(planned)[-1]
    assert plan_total.unsized == 0 and plan_total.seconds > 0
    _, rows, _ = status.study_status(config, ["all"], calibration=calibration)
    assert not rows[-1].unknown and rows[-1].seconds_left == pytest.approx(plan_total.seconds, rel=1e-9)
    _, old_rows, _ = status.study_status(config, ["all"])  # the old lookup: a CUDA calibration, none here
    assert status.NO_CALIBRATION in " ".join(old_rows[-1].unknown)
    assert _cli_status(args) == 0
    text = capsys.readouterr().out
    assert "no calibration" not in text and "`gpu: true` requests a GPU" in text
    assert f"calibration: {calibration.path}" in text
    total = next(line for line in text.splitlines() if line.startswith("total"))
    assert total.endswith(model.hours(plan_total.seconds) + ("*" if plan_total.bound else ""))


def test_the_plan_totals_the_disk_its_jobs_leave(tmp_path):
    """Issue 42: the plan gave device-hours and memory but no disk. A prepared fold leaves its
    arrays (exactly its shape's bytes); a run its test scores (float32 per document) and per-query
    metrics (at most 8 bytes per value); the rest records of a few kB, counted 0."""
    from bench.costs import plan as planning

    config = load_config(*SCALE)
    cal = _filled(config)
    planned = planning.build_plan(config, ["pirank_table1"], cal)
    ctx = Context(config, cal)
    shape = ctx.shape("mslr-like", "Fold1")
    prepare = next(p for p in planned if p.job.rule == "prepare")
    assert prepare.projection.disk_bytes == shape.nbytes > 2 * 10**9  # the MSLR-sized fold: 2.07 GB prepared
    run = next(p for p in planned if p.job.rule == "train")
    test = shape.splits["test"]
    assert test.n_docs * 4 < run.projection.disk_bytes < test.n_docs * 4 + test.n_queries * 8 * 40
    total = planning.summaries(planned)[-1]
    assert total.disk == sum(p.projection.disk_bytes or 0 for p in planned if p.projection and p.projection.complete)
    text = planning.render(planned, cal, title="t", config=config)
    row = next(line for line in text.splitlines() if line.startswith("total"))
    assert model.size_text(total.disk) in row and "disk" in text.splitlines()[3]


def test_a_tunings_job_shows_its_run_in_progress_and_is_done_only_with_this_studys_choice(tmp_path, monkeypatch):
    """A tuning's job trains its runs one after another: ``status`` names the run in progress
    (``run k/N``, the one with a progress record: a finished run clears its own) with that run's
    progress, and counts the job done only when its record compared this study's configurations."""
    from bench.config.jobs import target_jobs
    from bench.results import write_record

    monkeypatch.chdir(tmp_path)
    config = load_config()
    tune = next(j for j in target_jobs(config, ["unified_table"]) if j.rule == "tune")
    assert len(tune.runs) == config["tuning"]["budget"] * len(config["tuning"]["seeds"])
    now = time.time()
    os.makedirs(tune.runs[1])
    write_progress(tune.runs[1], {"kind": "neural", "updated": now - 5, "unit": "step", "done": 3, "total": 8,
                                  "eta_s": 20.0})
    state = status.job_state(tune, now, 600.0, done=False)
    assert (state.state, state.progress) == ("running", f"run 2/{len(tune.runs)}, step 3/8")
    assert state.eta_s == pytest.approx(15.0)

    w = tune.wildcards
    spec = plan.tune_spec(config, w["experiment"], w["dataset"], w["method"])
    points = [{"name": p["name"], "settings": p["settings"]} for p in spec["methods"][w["method"]]["points"]]
    write_record({"methods": {w["method"]: {"points": points}}}, tune.output)
    assert status.RECORDS["tune"](config, tune)
    points[-1]["settings"] = {**points[-1]["settings"], "train.lr": 1.0}  # another budget's or space's draw
    write_record({"methods": {w["method"]: {"points": points}}}, tune.output)
    assert not status.RECORDS["tune"](config, tune)
