"""The warm job server (bench/jobserver.py): a job it runs is indistinguishable from a job run
in a fresh process -- same bytes, exit status, stderr, directory, environment and umask -- and
it never leaves a job running behind a client that went away.

These tests start real servers and real ``ltr-bench`` client processes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench.jobserver import ENV_VAR
from helpers import make_prepared

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the job server needs Linux pidfds")


def _start_server(folder: Path, preload: bool) -> tuple[subprocess.Popen, Path, Path]:
    sock, log = folder / "socket", folder / "server.log"
    code = (
        "from bench.cli import serve_jobs; "
        f"serve_jobs({str(sock)!r}, **({{}} if {preload} else {{'preload': ()}}))"
    )
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=out, stdout=out)
    deadline = time.monotonic() + 120
    while "ready" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc, sock, log


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server with the real preload list: forking after those imports is what is tested."""
    proc, sock, log = _start_server(tmp_path_factory.mktemp("server"), preload=True)
    yield sock, log
    _stop(proc)


@pytest.fixture
def bare_server(tmp_path):
    proc, sock, log = _start_server(tmp_path, preload=False)
    yield proc, sock, log
    if proc.poll() is None:
        _stop(proc)


def _ltr_bench(*args: str, sock: Path | str | None, cwd: Path = ROOT, env: dict | None = None,
               wait: bool = True, preexec=None):
    full_env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1"}
    full_env.pop(ENV_VAR, None)
    if sock is not None:
        full_env[ENV_VAR] = str(sock)
    command = [sys.executable, "-c", "import sys; from bench.cli import main; sys.exit(main())", *args]
    if not wait:
        return subprocess.Popen(command, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=preexec)
    return subprocess.run(command, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300,
                          preexec_fn=preexec)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A tiny prepared fold and a run config in a scratch directory."""
    root = tmp_path_factory.mktemp("study")
    make_prepared(root / "prepared")
    config = {
        "model": {"type": "mlp", "hidden": [8], "dropout": 0.1},
        "train": {"epochs": 2, "batch_size": 8, "list_size": 12},
        "metrics": ["ndcg@5", "mrr"],
        "methods": {"ranknet": {"loss": "ranknet"}, "neuralndcg": {"loss": "neuralndcg"},
                    "long": {"loss": "listnet", "train": {"epochs": 100000}}},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def _train(study: Path, out: str, method: str, sock, **kw):
    return _ltr_bench("train", "--prepared", str(study / "prepared"), "--out", out, "--method", method,
                      "--seed", "3", "--config", str(study / "config.yaml"), "--threads", "1", "--quiet",
                      sock=sock, cwd=study, **kw)


@pytest.mark.parametrize("method", ["ranknet", "neuralndcg"])
def test_a_served_training_job_writes_the_bytes_of_a_fresh_process(server, study, method):
    sock, log = server
    fresh = _train(study, f"fresh-{method}", method, sock=None)
    served = _train(study, f"served-{method}", method, sock=sock)
    assert fresh.returncode == 0, fresh.stderr
    assert served.returncode == 0, served.stderr
    assert f"--out served-{method}" in log.read_text(), "the job was not run by the server"
    for name in ("scores.npy", "metrics.parquet"):
        assert (study / f"served-{method}" / name).read_bytes() == (study / f"fresh-{method}" / name).read_bytes()
    curves = [pd.read_csv(study / f"{mode}-{method}" / "curve.csv").drop(columns="seconds") for mode in ("served", "fresh")]
    pd.testing.assert_frame_equal(*curves, check_exact=True)  # every column but the timing
    # the same progress lines, through the passed descriptor (their timings aside)
    assert _untimed(served.stderr) == _untimed(fresh.stderr) and "progress" in fresh.stderr


def test_a_served_figure_job_writes_the_bytes_of_a_fresh_process(server, tmp_path):
    """The server renders a figure before forking (bench.report.figures.warm_up): a figure job it
    serves must still write a fresh process's PNG and PDF."""
    sock, log = server
    curves = tmp_path / "curves.parquet"
    assert _ltr_bench("loss-curves", "--taus", "0.1", "1.0", "--points", "41", "--out", str(curves),
                      sock=None).returncode == 0
    for mode, via in (("fresh", None), ("served", sock)):
        done = _ltr_bench("figure", "neuralndcg_curves", "--spec", '{"taus": [0.1, 1.0]}', "--input", str(curves),
                          "--png", str(tmp_path / f"{mode}.png"), "--pdf", str(tmp_path / f"{mode}.pdf"), sock=via)
        assert done.returncode == 0, done.stderr
    assert f"--png {tmp_path / 'served.png'}" in log.read_text(), "the job was not run by the server"
    for ext in ("png", "pdf"):
        assert (tmp_path / f"served.{ext}").read_bytes() == (tmp_path / f"fresh.{ext}").read_bytes(), ext


def _untimed(stderr: str) -> str:
    """``stderr`` with the timing fields of the progress lines (rates, elapsed, ETA) blanked."""
    return re.sub(r"[\d.,e+-]+ s/step|[\d,]+ docs/s|elapsed \S+|ETA (<= )?[^,]+", "<t>", stderr)


def test_errors_exit_status_and_stderr_come_back_unchanged(server, study):
    sock, _ = server
    args = ("--prepared", str(study / "prepared"), "--out", "x", "--method", "nope", "--seed", "0",
            "--config", str(study / "config.yaml"))
    fresh = _ltr_bench("train", *args, sock=None, cwd=study)
    served = _ltr_bench("train", *args, sock=sock, cwd=study)
    assert fresh.returncode == served.returncode == 2
    assert served.stderr == fresh.stderr and "nope" in served.stderr
    fresh, served = (_ltr_bench("train", "--no-such-flag", sock=s) for s in (None, sock))
    assert fresh.returncode == served.returncode == 2  # argparse's exit
    assert served.stderr == fresh.stderr and "usage: ltr-bench train" in served.stderr


def test_the_job_runs_in_the_clients_directory_environment_and_umask(bare_server, study, tmp_path):
    _, sock, log = bare_server
    # a user loss found only through the client's PYTHONPATH, a relative --out, umask 077
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "client_only_loss.py").write_text(textwrap.dedent("""
        def loss(scores, labels, mask, **params):
            return ((scores - labels) ** 2 * mask).sum() / mask.sum()
    """))
    config = yaml.safe_load((study / "config.yaml").read_text())
    config["methods"]["mine"] = {"loss": "client_only_loss:loss"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    proc = _ltr_bench("train", "--prepared", str(study / "prepared"), "--out", "relative-run", "--method", "mine",
                      "--seed", "0", "--config", "config.yaml", "--quiet", sock=sock, cwd=tmp_path,
                      env={"PYTHONPATH": str(plugins)}, preexec=lambda: os.umask(0o077))
    assert proc.returncode == 0, proc.stderr
    assert "--out relative-run" in log.read_text()
    run = tmp_path / "relative-run"
    assert (run / "scores.npy").is_file()
    assert run.stat().st_mode & 0o077 == 0, oct(run.stat().st_mode)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def test_a_client_killed_mid_job_takes_its_job_with_it(bare_server, study):
    proc, sock, log = bare_server
    client = _train(study, "killed", "long", sock=sock, wait=False)
    deadline = time.monotonic() + 60
    while not _children(proc.pid):
        assert time.monotonic() < deadline and client.poll() is None, log.read_text()
        time.sleep(0.05)
    time.sleep(1.0)  # mid-training
    client.send_signal(signal.SIGKILL)
    client.wait()
    deadline = time.monotonic() + 10
    while _children(proc.pid):
        assert time.monotonic() < deadline, "the job outlived its client"
        time.sleep(0.05)
    assert not (study / "killed").exists()  # atomic run directory: nothing half-written
    assert proc.poll() is None  # the server itself keeps serving
    assert _ltr_bench("datasets", sock=sock).returncode == 0


def test_no_reachable_server_means_the_command_runs_alone(tmp_path):
    for sock in (tmp_path / "missing.socket", "off"):
        proc = _ltr_bench("datasets", sock=sock)
        assert proc.returncode == 0, proc.stderr
        assert "synthetic" in proc.stdout


def test_a_client_importing_another_bench_copy_is_not_served(bare_server, tmp_path):
    _, sock, log = bare_server
    import shutil

    shutil.copytree(ROOT / "bench", tmp_path / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    before = log.read_text()
    proc = _ltr_bench("datasets", sock=sock, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "synthetic" in proc.stdout
    assert "not served" in log.read_text()[len(before):]


def test_the_server_stops_when_its_parent_is_gone(tmp_path):
    sock = tmp_path / "socket"
    # the parent waits for the bind (as the workflow does), then exits without stopping it
    code = textwrap.dedent(f"""
        import os, subprocess, sys, time
        p = subprocess.Popen([sys.executable, "-c", "from bench.cli import serve_jobs; serve_jobs({str(sock)!r}, preload=())"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists({str(sock)!r}):
            time.sleep(0.05)
        print(p.pid, flush=True)
    """)
    parent = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    server_pid = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 20
    while Path(f"/proc/{server_pid}").exists() and "zombie" not in _state(server_pid):
        assert time.monotonic() < deadline, "the orphaned server kept running"
        time.sleep(0.1)
    assert not sock.exists()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (FileNotFoundError, IndexError):
        return "zombie"


@pytest.mark.parametrize("omp", ["1", None])
def test_torch_threads_follow_the_jobs_omp_num_threads(server, study, omp):
    import json

    sock, _ = server
    runs = {}
    for mode, target in (("fresh", None), ("served", sock)):
        out = f"threads-{mode}-{omp}"
        env = {**os.environ, "OMP_NUM_THREADS": omp} if omp else {k: v for k, v in os.environ.items()
                                                                  if k != "OMP_NUM_THREADS"}
        if target:
            env[ENV_VAR] = str(target)
        else:
            env.pop(ENV_VAR, None)
        # no --threads: the count is whatever the process starts with
        proc = subprocess.run(
            [sys.executable, "-c", "import sys; from bench.cli import main; sys.exit(main())", "train",
             "--prepared", str(study / "prepared"), "--out", out, "--method", "ranknet", "--seed", "0",
             "--config", str(study / "config.yaml"), "--quiet"],
            cwd=study, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs[mode] = json.loads((study / out / "run.json").read_text())["torch_threads"]
    assert runs["served"] == runs["fresh"]
    if omp:
        assert runs["served"] == int(omp)


def test_every_preloaded_module_exists():
    # a renamed module would silently stop being preloaded (its jobs would pay the import)
    import importlib.util

    from bench.jobserver import PRELOAD

    assert [name for name in PRELOAD if importlib.util.find_spec(name) is None] == []


def test_every_warm_up_names_a_function_that_runs():
    """The server logs a warm-up that fails and goes on (it is an optimisation), so a renamed
    function would silently stop warming: each ``module:function`` must import and run."""
    import importlib

    from bench.jobserver import WARM_UP

    assert WARM_UP
    for spec in WARM_UP:
        module, function = spec.split(":")
        getattr(importlib.import_module(module), function)()


def test_a_cache_warm_up_compiles_in_a_helper_while_the_server_serves(tmp_path):
    """A warm-up in CACHE_WARM_UP runs in a helper process; the server serves without waiting for
    it, a job forked meanwhile waits for the helper where it needs its code (await_helpers), and
    the server runs the warm-up itself once the helper has exited (loading what it wrote)."""
    (tmp_path / "probe_warm_up.py").write_text(textwrap.dedent("""
        import os, time
        def record():
            server = int(os.environ["SERVER_PID"])
            if os.getpid() != server:  # the helper: compiles for a while
                time.sleep(1.5)
            with open(os.environ["PROBE_FILE"], "a") as out:
                out.write(f"{'server' if os.getpid() == server else 'helper'} {time.time()}\\n")
    """))
    probe, sock, log = tmp_path / "probe.txt", tmp_path / "socket", tmp_path / "server.log"
    code = textwrap.dedent(f"""
        import os, time
        os.environ["SERVER_PID"] = str(os.getpid())
        from bench.jobserver import await_helpers, serve
        def run(argv):
            started = time.time()
            await_helpers()
            with open({str(probe)!r}, "a") as out:
                out.write(f"job {{started}} {{time.time()}}\\n")
            return 0
        serve({str(sock)!r}, run, preload=(), warm_up=("probe_warm_up:record",),
              cache_warm_up=frozenset({{"probe_warm_up:record"}}))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "PROBE_FILE": str(probe)}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=out, stdout=out)
    try:
        deadline = time.monotonic() + 60
        while "ready" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        assert not probe.exists()  # ready before the helper finished
        served = _ltr_bench("anything", sock=sock)
        assert served.returncode == 0, served.stderr
        while len(probe.read_text().splitlines()) < 3:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        lines = {line.split()[0]: [float(x) for x in line.split()[1:]] for line in probe.read_text().splitlines()}
        (job_started, job_went_on), (helper_done,), (server_warm,) = lines["job"], lines["helper"], lines["server"]
        assert job_started < helper_done <= job_went_on  # the job waited for the helper
        assert helper_done <= server_warm  # the server warmed up after its helper had exited
        assert list(tmp_path.glob("socket.helper*.lock")) == []
    finally:
        _stop(proc)
