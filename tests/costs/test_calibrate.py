"""bench.costs.calibrate: the order of the measurements, the progress line's ETA, and an interrupt."""

from __future__ import annotations

import re

import pytest

from bench.costs import calibrate
from bench.costs.calibration import Calibration, Device, entry_key, load_calibration


def _needed(kinds: list[str]) -> dict:
    out = {}
    for i, kind in enumerate(kinds):
        spec = {"i": i, "loss": f"l{i}", "batch_size": 4, "list_size": 8} if kind == "loss_step" else {"i": i}
        if kind == "gbdt":
            spec["method"] = {"gbdt": "xgboost", "objective": "rank:ndcg"}
        out[entry_key(kind, spec)] = (kind, spec)
    return out


def test_cheap_shared_kinds_first_and_losses_in_batches():
    needed = _needed(["gbdt", "loss_step", "process", *["loss_step"] * (calibrate.LOSS_BATCH + 3), "model_step"])
    order = [(kind, len(group)) for kind, group in calibrate.batches(needed)]
    assert order == [("process", 1), ("loss_step", calibrate.LOSS_BATCH), ("loss_step", 4), ("model_step", 1),
                     ("gbdt", 1)]


def test_the_eta_is_the_priors_left_at_the_pace_so_far():
    now = [0.0]
    progress = calibrate.Progress(_needed(["process", "gbdt", "gbdt"]), clock=lambda: now[0])
    prior = calibrate.PRIOR_SECONDS
    assert progress.eta() == pytest.approx(prior["process"] + 2 * prior["gbdt"])  # nothing measured: the priors
    now[0] = 2 * prior["process"]  # the first measurement took twice its prior: the rest will too
    progress.advance(["process"])
    assert progress.eta() == pytest.approx(2 * 2 * prior["gbdt"])
    line = progress.line("process", now[0])
    eta = calibrate.clock_text(4 * prior["gbdt"])
    assert line == f"calibrating 1/3 (33%), {calibrate.clock_text(now[0])} elapsed, ETA {eta}: process in {now[0]:.1f} s"
    assert calibrate.clock_text(3725) == "1:02:05"


def test_each_batch_is_saved_as_it_is_measured_and_an_interrupt_keeps_them(tmp_path):
    cal = Calibration(Device("cpu", "x", 1), {}, tmp_path / "cal.json")
    needed = _needed(["process", "linear", "gbdt"])
    calls = []

    def measure_many(kind, specs, **kw):
        calls.append(kind)
        if kind == "gbdt":
            raise KeyboardInterrupt  # Ctrl-C during the third measurement
        return [{"seconds": 1.0} for _ in specs]

    lines = []
    with pytest.raises(KeyboardInterrupt):
        calibrate.calibrate(cal, needed, log=lines.append, measure_many=measure_many, workers=1)
    kept = load_calibration(cal.path)
    assert calls == ["process", "linear", "gbdt"] and len(lines) == 2
    assert sorted(e["kind"] for e in kept.entries.values()) == ["linear", "process"]


def test_batches_side_by_side_in_forked_workers(tmp_path):
    """Two workers: every batch measured once in a child process, all saved, the order of the
    progress lines the order they finished."""
    cal = Calibration(Device("cpu", "x", 1), {}, tmp_path / "cal.json")
    needed = _needed(["process", "linear", "linear", "evaluate", "summary"])

    def measure_many(kind, specs, **kw):
        import os

        return [{"pid": os.getpid(), "i": spec["i"]} for spec in specs]

    lines = []
    done = calibrate.calibrate(cal, needed, log=lines.append, measure_many=measure_many, workers=2)
    kept = load_calibration(cal.path)
    assert done.done == 5 and len(lines) == 5 and lines[-1].startswith("calibrating 5/5 (100%)")
    assert sorted(e["result"]["i"] for e in kept.entries.values()) == [0, 1, 2, 3, 4]
    assert __import__("os").getpid() not in {e["result"]["pid"] for e in kept.entries.values()}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_measurement_is_one_error_naming_the_batch_and_the_kept_cache(tmp_path, workers):
    """A measurement that raises (a loss that cannot run on the calibration's inputs) stops the
    plan with a CalibrationFailed naming the batch and the error's last line, the measurements
    already taken saved, in this process and in a forked worker alike."""
    from bench.errors import CalibrationFailed

    cal = Calibration(Device("cpu", "x", 1), {}, tmp_path / "cal.json")
    needed = _needed(["process", "loss_step"])

    def measure_many(kind, specs, **kw):
        if kind == "loss_step":
            raise RuntimeError("measurement failed in the child process:\nTraceback ...\nValueError: bad shape")
        return [{"seconds": 1.0} for _ in specs]

    with pytest.raises(CalibrationFailed) as info:
        calibrate.calibrate(cal, needed, log=lambda m: None, measure_many=measure_many, workers=workers)
    assert str(info.value).startswith("measuring loss_step x1 (l1) failed: ")
    assert "bad shape (1 measurement(s) kept in " in str(info.value)
    assert [e["kind"] for e in load_calibration(cal.path).entries.values()] == ["process"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_long_measurement_says_it_is_still_running(tmp_path, workers):
    """Issue 42: a paper plan sat silent for 6 min 46 s at 169/182 while one measurement ran. A
    measurement longer than the heartbeat now says so each heartbeat, in a worker or in-process;
    the short ones do not."""
    import time

    cal = Calibration(Device("cpu", "x", 1), {}, tmp_path / "cal.json")
    needed = _needed(["process", "gbdt"])

    def measure_many(kind, specs, **kw):
        time.sleep(0.9 if kind == "gbdt" else 0.0)
        return [{"seconds": 1.0} for _ in specs]

    lines: list[str] = []
    calibrate.calibrate(cal, needed, log=lines.append, measure_many=measure_many, workers=workers, heartbeat_s=0.2)
    beats = [line for line in lines if "still measuring" in line]
    assert len(beats) >= 2 and all(re.match(r"calibrating [01]/2: still measuring gbdt .*, 0:0\d so far$", b)
                                   for b in beats), lines
    assert not any("still measuring process" in line for line in lines)
    assert lines[-1].startswith("calibrating 2/2 (100%)")
