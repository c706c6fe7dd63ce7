# The warm job server (bench/jobserver.py): during a local run every `ltr-bench` job is
# forked from one process that imported torch, pandas, SciPy, LightGBM, ... once, instead of
# importing them itself (4-5 s of a 7 s default-profile training job on 2 cores). Results are
# the same bytes either way. Not started for cluster executors, dry runs, or when the
# environment says LTR_BENCH_JOB_SERVER=off; a job that cannot reach the server runs alone.
import atexit
import shutil
import subprocess
import tempfile
import time

from bench.jobserver import DISABLED as _JOBSERVER_OFF
from bench.jobserver import ENV_VAR as _JOBSERVER_VAR

_jobserver = {}


def start_job_server(log_path):
    if os.environ.get(_JOBSERVER_VAR) == _JOBSERVER_OFF or not workflow.local_exec:
        return
    exe = shutil.which("ltr-bench")
    if exe is None or not hasattr(os, "pidfd_open"):  # Linux only; jobs then run alone
        return
    folder = tempfile.mkdtemp(prefix="ltr-bench-jobs-")  # short path: Unix sockets allow ~100 bytes
    sock = os.path.join(folder, "socket")
    Path("results/logs").mkdir(parents=True, exist_ok=True)
    log = open("results/logs/job-server.log", "w")
    proc = subprocess.Popen([exe, "job-server", "--socket", sock], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    for _ in range(200):  # the socket is bound before the (slow) imports: wait for the bind only
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.05)
    if not os.path.exists(sock):
        logger.warning("ltr-bench job server did not start (results/logs/job-server.log); jobs run alone")
        proc.kill()
        return
    _jobserver.update(proc=proc, folder=folder, log=log)
    os.environ[_JOBSERVER_VAR] = sock
    atexit.register(stop_job_server)


def stop_job_server(*_):
    proc = _jobserver.pop("proc", None)
    if proc is None:
        return
    os.environ.pop(_JOBSERVER_VAR, None)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    _jobserver.pop("log").close()
    shutil.rmtree(_jobserver.pop("folder"), ignore_errors=True)


onstart:
    start_job_server(log)


onsuccess:
    stop_job_server()


onerror:
    stop_job_server()
