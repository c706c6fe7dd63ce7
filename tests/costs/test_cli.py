"""ltr-bench plan and status as a user types them (default profile, one small table)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="calibration forks: Linux only")


def _ltr(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={"PATH": os.environ["PATH"], "LTR_BENCH_JOB_SERVER": "off",
                                            "OMP_NUM_THREADS": "1"})


@pytest.mark.slow  # about 30 s of real calibration
def test_plan_calibrates_once_then_reuses_and_writes_every_job(tmp_path):
    cal = tmp_path / "cal"
    first = _ltr("plan", "listsize_table3", "--calibration-dir", str(cal), "--json", str(tmp_path / "plan.json"))
    assert first.returncode == 0, first.stderr
    assert "calibrating" in first.stderr and "listsize_table3" in first.stdout and "device-hours" in first.stdout
    plan = json.loads((tmp_path / "plan.json").read_text())
    runs = [j for j in plan["jobs"] if j["rule"] == "train"]
    assert len(runs) == 4 and all(j["projected_seconds"] > 0 and j["projected_peak_mb"] > 100 for j in runs)
    assert {"rule", "output", "device", "projected_seconds", "projected_peak_mb"} <= set(runs[0])
    again = _ltr("plan", "listsize_table3", "--calibration-dir", str(cal))
    assert again.returncode == 0 and "calibrating" not in again.stderr
    assert again.stdout.splitlines()[3:] == first.stdout.splitlines()[3:]  # same projections


def test_plan_without_calibration_and_bad_input_say_so(tmp_path):
    out = _ltr("plan", "all", "--no-calibrate", "--calibration-dir", str(tmp_path))
    assert out.returncode == 0 and "not projected" in out.stdout
    bad = _ltr("plan", "tabel")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        "ltr-bench plan: error: unknown target 'tabel'; known: all, pirank_table1, neuralndcg_table3, arf_table2, "
        "listsize_table3, sinkprop_letor, unified_table, arf_table6, arf_table7, arf_table8, neuralndcg_table1, "
        "neuralndcg_table2, arf_table9, ranking_table, scaling_figure, temperature_figure, listsize_figure, "
        "recall_heatmap, neuralndcg_curves, annealing_figure, letor_curves, quality_cost_figure, cd_diagram, freeze, "
        "compare")
    missing = _ltr("plan", "all", "--configfile", "nope.yaml")
    assert missing.returncode == 2 and "nope.yaml: not found" in missing.stderr


def test_status_of_a_study_that_has_not_started(tmp_path):
    out = _ltr("status", "listsize_table3", "--cores", "2")
    assert out.returncode == 0, out.stderr
    assert "listsize_table3" in out.stdout and "remaining" in out.stdout


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited. A killed measurement child whose parent
    was killed too is re-parented to PID 1 and stays a zombie (state ``Z``: exited, holding
    nothing) until PID 1 reaps it, which a container's init may do seconds later."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, their children ...), from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, parent in parents.items() if parent == p}
        todo += list(kids - out)
        out |= kids
    return out


@pytest.mark.slow  # about 30 s: imports, then the first measurements
def test_ctrl_c_stops_the_calibration_at_once_with_one_line_and_no_child_left(tmp_path):
    """SIGINT while a measurement's child runs: exit status 130, one line on stderr after the
    progress lines (no traceback), the child gone, the measurements taken kept."""
    cal, scratch = tmp_path / "cal", tmp_path / "tmp"
    scratch.mkdir()
    env = {"PATH": os.environ["PATH"], "LTR_BENCH_JOB_SERVER": "off", "OMP_NUM_THREADS": "1", "TMPDIR": str(scratch)}
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "plan", "all", "--calibration-dir", str(cal)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = []
        while not any(re.match(r"calibrating \d+/", line) for line in lines):  # a measurement taken and saved
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        deadline = time.monotonic() + 120
        while not (children := _descendants(proc.pid)) and time.monotonic() < deadline:  # measurements under way
            time.sleep(0.05)
        assert children, "no measurement child seen"
        time.sleep(1)  # the workers' own measurement children started too
        children = _descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    tail = rest.strip().splitlines()  # progress lines of measurements finished meanwhile, then one line
    assert [line for line in tail if not line.startswith("calibrating ")] == tail[-1:]
    assert tail[-1].startswith("ltr-bench plan: interrupted")
    assert "Traceback" not in rest and "interrupted" in rest and "kept in" in rest, rest
    assert [pid for pid in children if _running(pid)] == []
    kept = json.loads(next(cal.glob("*.json")).read_text())["entries"]
    assert len(kept) >= 1 and f"{len(kept)} measurement(s) kept" in rest
    assert list(scratch.glob("ltr-calibration-*")) == []  # the generated data removed (torch keeps its own here)


def test_a_target_whose_runs_cannot_be_projected_reads_unknown_not_zero(tmp_path):
    """Issue 42: the sample plan printed 0.0 device-hours for tables whose runs it cannot project
    (fold shapes unknown before they are prepared; SinkProp's own protocol): that read as free."""
    out = _ltr("plan", "sinkprop_letor", "--no-calibrate", "--configfile", "config/paper.yaml", "config/letor.yaml",
               "--calibration-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("sinkprop_letor"))
    assert row.split()[5:7] == ["unknown", "unknown"] and " 0.0" not in row, row  # hours and peak


def test_ctrl_c_before_the_first_measurement_names_no_file(tmp_path):
    """Issue 42: an interrupt before any measurement was saved named results/calibration/...json,
    which was never created. Now it says nothing was written, and nothing was."""
    cal = tmp_path / "cal"
    env = {"PATH": os.environ["PATH"], "LTR_BENCH_JOB_SERVER": "off", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "plan", "all", "--calibration-dir", str(cal)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = [proc.stderr.readline() for _ in range(3)]
        # at once what it does, then the jobs listed, then "calibrating N measurement(s) on ... into ...":
        # no measurement taken yet
        assert lines[0].startswith("ltr-bench plan: reading the config and listing the jobs of all"), lines
        assert re.match(r"ltr-bench plan: [\d,]+ jobs listed in \d+ s; \d+ measurement\(s\) missing \(device: cpu ", lines[1])
        assert lines[2].startswith("calibrating "), lines
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest
    assert rest.strip().splitlines()[-1] == "ltr-bench plan: interrupted; nothing was measured yet, so nothing was written"
    assert not cal.exists() or list(cal.iterdir()) == []
