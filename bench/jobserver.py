"""A warm job server: the study's ~140 short ``ltr-bench`` jobs pay their imports once.

Every Snakemake job is one ``ltr-bench`` command in a fresh process. On the 2-core reference
machine a default-profile training job spent 4-5 s importing (torch 2.2 s, ``torch._dynamo``
1.8 s -- ``torch.optim`` imports it on first use --, pandas/pyarrow 0.5 s) and 2-3 s training,
so imports were most of the study's CPU time.

The workflow (``workflows/lifecycle.smk``) starts ``ltr-bench job-server --socket PATH``, which
imports the heavy modules once and listens on a Unix socket whose path the workflow exports as
``LTR_BENCH_JOB_SERVER``. A local run starts one for the whole run (``onstart``). A SLURM run
(``workflows/profiles/slurm``) starts one per submitted job, on the node that runs it: in the
job step that runs its jobs (``SLURM_STEP_ID`` set), while that step's Snakemake parses the
Snakefile, logging to ``results/logs/job-server-slurm<job id>.log``. ``ltr-bench``
(:mod:`bench.cli`) sees the variable and, instead of running the command itself, hands it over:
its arguments, working directory, environment, ``sys.path``, umask and its stdin/stdout/stderr
(the file descriptors themselves, ``SCM_RIGHTS``), then waits for the exit status. The server
forks one child per job from its pristine, never-used imported state; the child takes on the
client's directory, environment, descriptors and umask and runs :func:`bench.cli.run_command`
-- the same code path as a fresh process, so a job writes the same bytes either way (tested).
This module sits below the CLI: ``bench.cli`` wires it (``ltr-bench job-server``) and passes
``run_command`` in.

Lifetimes and failures:

- a client that goes away (Snakemake cancels the job, ``kill -9``) closes its socket; the
  server kills that job's process at once, so nothing keeps writing behind the workflow's back;
- a job dies with the server (``PR_SET_PDEATHSIG``); the server exits when the workflow ends
  (``onsuccess``/``onerror``; in a SLURM job step, which runs no such hooks, when that step's
  Snakemake exits), when its parent process is gone, or on SIGTERM/SIGINT;
- a client that cannot reach a server (variable unset, socket gone, connection refused) runs
  the command in its own process, as before: the server is an accelerator, never a dependency;
- ``LTR_BENCH_JOB_SERVER=off`` in the environment disables it for a run; no server is
  started for a dry run, nor by the submitting process of a cluster run (its socket would be
  local to the submit host, where no job runs).

What a fresh process would decide at import time, the child decides per job: torch's thread
count follows the job's ``OMP_NUM_THREADS`` (the server imports torch with it unset), and a
client whose ``bench`` package is another copy than the server's (``PYTHONPATH`` pointing at
another checkout) is told to run the command itself.

Caveat: Snakemake's ``benchmark:`` files time the client, so their wall-clock seconds are the
job's but their CPU and RSS columns are the client's; ``run.json`` records the job's own peak
memory and wall time. The fork happens before any thread pool, CUDA context or OpenMP team is
created in the server (it only imports), which is what makes forking safe.
"""

from __future__ import annotations

import array
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

ENV_VAR = "LTR_BENCH_JOB_SERVER"
DISABLED = "off"
# imported once by the server: everything a workflow job would import on its own
PRELOAD = (
    "torch", "torch.optim", "torch._dynamo", "pandas", "pyarrow.parquet", "scipy.stats", "numba",
    "lightgbm", "xgboost", "matplotlib",
    "bench.training.cli", "bench.training.neural", "bench.training.gbdt", "bench.evaluate", "bench.stats",
    "bench.frozen", "bench.curves", "bench.report.cli", "bench.data.prepare", "bench.metrics", "bench.losses",
    "bench.selection", "bench.selection.tuning",
    "bench.ranking",  # scikit_posthocs (seaborn, statsmodels) is imported by its one job alone
)
# called once after the imports, before any fork ("module:function"): work every job would repeat
WARM_UP = (
    "bench.losses.permutahedron:warm_up",  # the soft rank's numba kernels: ~1 s a process otherwise (CACHE_WARM_UP)
    "bench.config.schema:warm_up",  # the config schema, which every run job reads
    "bench.report.figures:warm_up",  # matplotlib's fonts, mathtext and PDF backend: ~1.3 s a figure job
)
# the warm-ups whose work is a compile cache on disk (numba's ``cache=True``): each runs in a helper
# process started before the server's imports, and the server serves without waiting for it (the
# compile takes 16-20 s in a fresh clone, where every queued job used to wait); once the helper has
# exited the server runs the warm-up itself, which loads what the helper wrote (under a second),
# and a job forked before that waits for the helper where it needs the compiled code
# (:func:`await_helpers`)
CACHE_WARM_UP = frozenset({"bench.losses.permutahedron:warm_up"})
# lock files, each held (flock, exclusive) by a helper for as long as it runs: what a job forked
# while helpers still ran inherits, and waits on (await_helpers)
_HELPER_LOCKS: list[str] = []
# a helper's program: the server's own _warm_up, its failure logged to the server's log
_RUN_WARM_UP = "import sys; from bench.jobserver import _warm_up; _warm_up(sys.argv[1], lambda m: print(m, file=sys.stderr))"
_HEADER = struct.Struct("!Q")  # request length
_STATUS = struct.Struct("!i")  # exit status
_N_FDS = 3  # stdin, stdout, stderr
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # read by torch at import time
NOT_SERVED = -1  # reply: "run it yourself" (the client would import another copy of bench)
_STARTED: dict[int, float] = {}  # job pid -> when it was forked (monotonic seconds)


# ---------------------------------------------------------------------------------- client


def run_in_server(argv: list[str]) -> int | None:
    """Run ``ltr-bench argv`` in the job server; its exit status, or None when none is reachable.

    None means: run the command in this process (no server configured, disabled, or the
    socket is gone or refuses connections). Once connected, the job's fate is the server's:
    a server that dies mid-job is reported as a failed job (exit status 1), not re-run here,
    because the job may already have had effects.
    """
    path = os.environ.get(ENV_VAR, "")
    if not path or path == DISABLED:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    with sock:
        request = json.dumps({
            "argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ), "path": list(sys.path),
            "umask": _current_umask(), "bench": _bench_dir(),
        }).encode()
        fds = array.array("i", [0, 1, 2])
        sock.sendmsg([_HEADER.pack(len(request)), request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        reply = _recv_exactly(sock, _STATUS.size)
    if reply is None:
        print(f"ltr-bench: the job server at {path} stopped before the job ended", file=sys.stderr)
        return 1
    status = _STATUS.unpack(reply)[0]
    return None if status == NOT_SERVED else status


def _bench_dir() -> str:
    """Where this process's ``bench`` code lives (a client must run the server's code).

    The folder of this very module: ``bench`` itself may be a namespace package (no
    ``__file__``) when a workflow copy without code is first on ``PYTHONPATH``.
    """
    return os.path.dirname(os.path.abspath(__file__))


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


# ---------------------------------------------------------------------------------- server


def serve(path: str | os.PathLike, run: Callable[[list[str]], int], preload: tuple[str, ...] = PRELOAD,
          log: Callable[[str], None] = print, warm_up: tuple[str, ...] = WARM_UP,
          cache_warm_up: frozenset[str] = CACHE_WARM_UP) -> None:
    """Listen on ``path`` and run each request in a forked child until told to stop.

    ``run(argv) -> exit status`` runs one command in the child (``bench.cli.run_command``;
    passed in so that this module, below the CLI, never imports it).

    The socket is bound before the imports, so clients that connect early queue in the
    backlog and are served once the imports and the warm-ups (:data:`WARM_UP`) are done. A
    warm-up in ``cache_warm_up`` (:data:`CACHE_WARM_UP`) runs in a helper process started before
    the imports instead, and the server does not wait for it: when the helper exits, the server
    runs the warm-up itself (loading what the helper compiled; a helper that failed only means the
    server compiles, as it would without one), and a job forked before then waits for the helper
    where it needs its code (:func:`await_helpers`). Returns (and removes the socket) on
    SIGTERM/SIGINT or when the parent process is gone.
    """
    path = Path(path)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener.bind(str(path))
    listener.listen(128)
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stopping.append(signum))
    for var in THREAD_VARS:  # imported with none set: a job's own value is applied per job
        os.environ.pop(var, None)
    helpers = _start_helpers([spec for spec in warm_up if spec in cache_warm_up], path, log)
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # an optional dependency: its jobs import it themselves
            log(f"job server: not preloading {name} ({exc})")
    for spec in warm_up:
        if spec not in cache_warm_up:
            _warm_up(spec, log)
    default_threads = _torch_threads()
    sys.stdout.flush()
    sys.stderr.flush()
    log(f"job server: ready on {path} (pid {os.getpid()})")
    jobs: dict[int, tuple[socket.socket, int]] = {}  # pidfd -> (client socket, pid)
    try:
        while not stopping and os.getppid() == parent:
            watched = [listener, *(conn for conn, _ in jobs.values()), *jobs, *helpers]
            try:
                ready, _, _ = select.select(watched, [], [], 1.0)
            except InterruptedError:
                continue
            for item in ready:
                if isinstance(item, _Helper):
                    helpers.remove(item)
                    item.finish(log)
                elif item is listener:
                    _accept(listener, jobs, run, default_threads, log)
                elif isinstance(item, int):
                    _finish(item, jobs, log)
                else:  # a client socket readable = its client is gone: stop the job
                    for conn, pid in list(jobs.values()):
                        if conn is item:
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, signal.SIGKILL)
    finally:
        for helper in helpers:
            helper.stop()
        for conn, pid in jobs.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            conn.close()
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        log("job server: stopped")


def _warm_up(spec: str, log: Callable[[str], None]) -> None:
    """Run warm-up ``spec`` (``module:function``) in this process; a failure is logged, not raised."""
    module, function = spec.split(":")
    try:
        getattr(importlib.import_module(module), function)()
    except Exception as exc:  # noqa: BLE001 - a warm-up is an optimisation: its jobs do the work themselves
        log(f"job server: not warming up {spec} ({type(exc).__name__}: {exc})")


class _Helper:
    """A helper process running one cache warm-up (:data:`CACHE_WARM_UP`) while the server serves.

    It holds an exclusive ``flock`` on its lock file for as long as it runs: the server takes the
    lock, hands the open file to the helper and closes its own copy before it forks any job, so
    the lock is released exactly when the helper exits (however it exits).
    """

    def __init__(self, spec: str, lock: Path) -> None:
        import fcntl
        import subprocess

        self.spec, self.lock = spec, lock
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.proc = subprocess.Popen([sys.executable, "-c", _RUN_WARM_UP, spec], stdin=subprocess.DEVNULL,
                                         pass_fds=(fd,))
        finally:
            os.close(fd)  # the helper's copy keeps the lock
        self.pidfd = os.pidfd_open(self.proc.pid)
        _HELPER_LOCKS.append(str(lock))

    def fileno(self) -> int:  # select() reports the helper readable once it has exited
        return self.pidfd

    def finish(self, log: Callable[[str], None]) -> None:
        """The helper has exited: load what it compiled into the server, so later jobs inherit it."""
        code = self.proc.wait()
        os.close(self.pidfd)
        if code != 0:
            log(f"job server: the helper warming up {self.spec} exited with status {code}; the server warms it up")
        _warm_up(self.spec, log)
        _HELPER_LOCKS.remove(str(self.lock))
        self.lock.unlink(missing_ok=True)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self.pidfd)
        self.lock.unlink(missing_ok=True)


def _start_helpers(specs: list[str], path: Path, log: Callable[[str], None]) -> list[_Helper]:
    """One helper per warm-up in ``specs`` (``module:function``), its lock file beside the socket
    ``path``; stdout and stderr go where the server's go. One that cannot start is logged and
    skipped (the server then warms it up itself, at once)."""
    helpers = []
    for number, spec in enumerate(specs):
        try:
            helpers.append(_Helper(spec, path.with_name(f"{path.name}.helper{number}.lock")))
        except OSError as exc:
            log(f"job server: no helper for {spec} ({exc}); the server warms it up alone")
            _warm_up(spec, log)
    return helpers


def await_helpers() -> None:
    """Wait until the job server's helpers that were running when this job was forked have exited.

    A no-op outside a served job, and in a job forked after the helpers finished. Called where
    a job first needs what a cache warm-up compiles (:data:`CACHE_WARM_UP`): it then loads the
    helper's cache instead of compiling the same code beside it.
    """
    import fcntl

    for lock in list(_HELPER_LOCKS):
        try:
            with open(lock, "rb") as fh:
                fcntl.flock(fh, fcntl.LOCK_SH)  # granted once the helper has exited
        except OSError:
            pass  # gone: the helper finished and the server removed its lock
    _HELPER_LOCKS.clear()


def _accept(listener: socket.socket, jobs: dict, run, default_threads: int | None, log) -> None:
    conn, _ = listener.accept()
    try:
        request, fds = _recv_request(conn)
    except (OSError, ValueError) as exc:
        log(f"job server: dropped a malformed request ({exc})")
        conn.close()
        return
    if request.get("bench") != _bench_dir():
        # e.g. PYTHONPATH puts another checkout first: a fresh process would run that code
        log(f"job server: not served (the client imports bench from {request.get('bench')}): "
            f"ltr-bench {' '.join(request['argv'])}")
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(_STATUS.pack(NOT_SERVED))
        conn.close()
        return
    pid = os.fork()
    if pid == 0:  # the job: never returns
        listener.close()
        for other, _ in jobs.values():
            other.close()
        for pidfd in jobs:
            os.close(pidfd)
        _run_job(request, fds, run, default_threads)
    log(f"job server: pid {pid}: ltr-bench {' '.join(request['argv'])}")
    for fd in fds:
        os.close(fd)
    jobs[os.pidfd_open(pid)] = (conn, pid)
    _STARTED[pid] = time.monotonic()


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    conn.settimeout(30)
    fds = array.array("i")
    msg, ancdata, _, _ = conn.recvmsg(_HEADER.size, socket.CMSG_LEN(_N_FDS * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(msg) != _HEADER.size or len(fds) != _N_FDS:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected a length header and 3 file descriptors")
    body = _recv_exactly(conn, _HEADER.unpack(msg)[0])
    if body is None:
        raise ValueError("request cut short")
    conn.settimeout(None)
    return json.loads(body), list(fds)


def _finish(pidfd: int, jobs: dict, log: Callable[[str], None]) -> None:
    """Reap a finished job, log its exit status, wall time, peak resident size and CPU seconds
    (every thread of the job's process, user + system), answer its client.

    The peak (``ru_maxrss`` of the job's process) is the job's own, which Snakemake's
    ``benchmark:`` files cannot see (they measure the client); ``ltr-bench status`` and the
    scale profile's report read these lines.
    """
    conn, pid = jobs.pop(pidfd)
    os.close(pidfd)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    code = 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it
    wall = time.monotonic() - _STARTED.pop(pid, time.monotonic())
    cpu = usage.ru_utime + usage.ru_stime
    log(f"job server: pid {pid}: exit {code}, {wall:.1f} s, peak {usage.ru_maxrss / 1024:.0f} MB, cpu {cpu:.1f} s")
    with contextlib.suppress(OSError):
        conn.sendall(_STATUS.pack(code))
    conn.close()


def _torch_threads() -> int | None:
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _apply_thread_env(default_threads: int | None) -> None:
    """Give torch the thread count a fresh process would take from OMP_NUM_THREADS.

    torch reads ``OMP_NUM_THREADS`` (else the machine's default) when it is imported, which
    in the server happened once, with the variable unset. Jobs set it (e.g. the scaling
    benchmark's ``OMP_NUM_THREADS=1``), so the child applies its own value.
    """
    torch = sys.modules.get("torch")
    if torch is None or default_threads is None:
        return
    value = os.environ.get("OMP_NUM_THREADS", "")
    torch.set_num_threads(int(value) if value.isdigit() and int(value) > 0 else default_threads)


def _run_job(request: dict, fds: list[int], run, default_threads: int | None) -> None:
    """In the forked child: become the client's process, run the command, exit."""
    code = 1
    try:
        _die_with_parent()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        env = {k: v for k, v in request["env"].items() if k != ENV_VAR}
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = request["path"]
        _apply_thread_env(default_threads)
        importlib.invalidate_caches()
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 -- the process's own descriptors
        sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        argv = list(request["argv"])
        sys.argv = ["ltr-bench", *argv]
        try:
            code = int(run(argv) or 0)
        except SystemExit as exc:  # argparse errors and explicit exits
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 -- report any crash as a fresh process would
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the server dies (no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


__all__ = ["DISABLED", "ENV_VAR", "NOT_SERVED", "PRELOAD", "WARM_UP", "run_in_server", "serve"]
