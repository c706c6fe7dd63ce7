# What happens when a run starts and ends (Snakemake allows one onstart/onsuccess/onerror):
#
# 1. The warm job server (bench/jobserver.py): during a local run every `ltr-bench` job is
#    forked from one process that imported torch, pandas, SciPy, LightGBM, ... once, instead
#    of importing them itself (4-5 s of a 7 s default-profile training job on 2 cores).
#    Results are the same bytes either way. On SLURM, each submitted job (a group of the
#    default study's short jobs, or one paper-profile run) starts its own server in the job
#    step that runs the jobs (SLURM_STEP_ID set; Snakemake runs no hooks there, so it starts
#    while this file is parsed). Not started by the submitting process of a cluster run, for
#    dry runs, or when the environment says LTR_BENCH_JOB_SERVER=off; a job that cannot reach
#    it runs alone.
# 2. Resuming after `kill -9`: Snakemake's directory lock has no owner check, so a killed run
#    leaves it behind and the next run stops with "Directory cannot be locked". Each run
#    records its process in RUN_RECORD; the next run, while the Snakefile is parsed (before
#    Snakemake checks the lock), releases the lock only when that process is gone
#    (bench/resume.py says exactly when): what `snakemake --unlock` does, checked first.
# 3. A run that stops: one line per SLURM job that failed for good, naming the job, the state
#    SLURM accounted and the command to type next; in a local run, one line per distinct error of
#    the failed jobs, read from their logs (bench/cluster_faults.py).
# 4. The workflow's own overhead (docs/performance.md, its section of that name): while the
#    Snakefile is parsed, Snakemake's scheduler is made to keep at most one timed wake-up
#    pending (it piled them up: most of the main process's CPU) and jobs are sampled for their
#    benchmark files every 2 s instead of 0.5 s (the next largest share); when a run ends, the
#    main process's own CPU seconds (not its jobs') go to results/benchmarks/snakemake-main.json,
#    which `ltr-bench perf study` reports (all three in bench/overhead.py).
# 5. Where to look: a run that succeeds ends with the path of the HTML report (or of the tables
#    and figures, when the report is older than they are); a `compare` run with its page's path.
import atexit
import sys
import shutil
import subprocess
import tempfile
import time

from bench.jobserver import DISABLED as _JOBSERVER_OFF
from bench.jobserver import ENV_VAR as _JOBSERVER_VAR
from bench.cluster_faults import failure_lines, job_error_lines
from bench.errors import BenchError
from bench.overhead import FILE_NAME as _OVERHEAD_FILE
from bench.overhead import coalesce_scheduler_wakeups, sample_benchmarks_every
from bench.overhead import record as _record_overhead
from bench.resume import forget_run, record_run, release_stale_lock

RUN_RECORD = Path(".snakemake/ltr-bench-run.json")
LOCKS = Path(".snakemake/locks")
_jobserver = {}
OVERHEAD_RECORD = Path("results/benchmarks") / _OVERHEAD_FILE


# ----------------------------------------------------------------------------- stale lock


if workflow.is_main_process:
    _killed = release_stale_lock(RUN_RECORD, LOCKS)
    if _killed is not None:
        logger.info(f"Removed the lock left by an interrupted run (pid {_killed}); resuming.")


# ----------------------------------------------------------------------------- scheduler, benchmarks


coalesce_scheduler_wakeups()
sample_benchmarks_every()


# ----------------------------------------------------------------------------- job server


def start_job_server(log_name="job-server.log"):
    if os.environ.get(_JOBSERVER_VAR) == _JOBSERVER_OFF or not workflow.local_exec:
        return
    exe = shutil.which("ltr-bench")
    if exe is None or not hasattr(os, "pidfd_open"):  # Linux only; jobs then run alone
        return
    folder = tempfile.mkdtemp(prefix="ltr-bench-jobs-")  # short path: Unix sockets allow ~100 bytes
    sock = os.path.join(folder, "socket")
    Path("results/logs").mkdir(parents=True, exist_ok=True)
    log = open(f"results/logs/{log_name}", "w")
    proc = subprocess.Popen([exe, "job-server", "--socket", sock], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    for _ in range(200):  # the socket is bound before the (slow) imports: wait for the bind only
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.05)
    if not os.path.exists(sock):
        logger.warning(f"ltr-bench job server did not start (results/logs/{log_name}); jobs run alone")
        proc.kill()
        return
    _jobserver.update(proc=proc, folder=folder, log=log)
    os.environ[_JOBSERVER_VAR] = sock
    atexit.register(stop_job_server)


def stop_job_server():
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


# The SLURM job step that runs a submitted job's jobs (the step srun starts inside the job; the
# batch step above it only delegates): one server per SLURM job, its own log.
if workflow.remote_exec and os.environ.get("SLURM_STEP_ID") and not workflow.dryrun:
    start_job_server(f"job-server-slurm{os.environ.get('SLURM_JOB_ID', '')}.log")


# ----------------------------------------------------------------------------- handlers


onstart:
    # only the run the user started: not a cluster job's or a group job's own Snakemake
    if workflow.is_main_process:
        record_run(RUN_RECORD)
        start_job_server()


def record_overhead():
    # the main process of the run the user started (hooks run in no dry run); a record that
    # cannot be written (a full disk) is a warning, never the run's outcome
    if workflow.is_main_process:
        try:
            _record_overhead(OVERHEAD_RECORD, jobs=getattr(workflow.scheduler, "finished_jobs", 0))
        except (OSError, BenchError) as exc:
            logger.warning(f"could not record the main process's CPU time in {OVERHEAD_RECORD}: {exc}")


REPORT = Path(plan.report_file(config))
REPORT_PARTS = (Path(REPORTS) / "tables", Path(REPORTS) / "figures")


def _is_compare(target):
    return target == "compare" or target.startswith("reports/compare/")


def point_at_results():
    # the run the user started ends saying where to look: the compare pages when it asked for
    # them (the last line; the only one when it asked for nothing else); else the HTML report
    # when it is as new as every table and figure, else the folders (and how to bring the report
    # up to date)
    if not workflow.is_main_process:
        return
    targets = set(workflow.dag_settings.targets)  # none: the default target, `all`
    if not targets or not all(_is_compare(t) for t in targets):
        point_at_report()
    asked = [*(compare_outputs() if "compare" in targets else []), *filter(_is_compare, targets - {"compare"})]
    pages = sorted({Path(p).with_suffix(".html").resolve() for p in asked})
    if pages:
        logger.info(f"The compare page{'s' if len(pages) > 1 else ''}: {', '.join(map(str, pages))} (the new "
                    "losses against every frozen baseline; open it in a browser, the Markdown is beside it)")


def point_at_report():
    parts = [f for folder in REPORT_PARTS if folder.is_dir() for f in folder.iterdir() if f.is_file()]
    newest = max((f.stat().st_mtime for f in parts), default=0.0)
    folders = ", ".join(f"{folder}/" for folder in REPORT_PARTS)
    if REPORT.is_file() and REPORT.stat().st_mtime >= newest:
        logger.info(f"The study's report: {REPORT.resolve()} (every table and figure with its caption; "
                    f"open it in a browser); the files themselves are in {folders}")
    elif parts:
        logger.info(f"Tables and figures: {folders}; `snakemake --cores 2 all` (with this run's "
                    f"--configfile/--config) ends with the HTML report, {REPORT}")


onsuccess:
    stop_job_server()
    if workflow.is_main_process:
        forget_run(RUN_RECORD)
    record_overhead()
    point_at_results()


onerror:
    stop_job_server()
    record_overhead()
    if workflow.is_main_process:
        forget_run(RUN_RECORD)
        # log: the run's log files (a list); each failed job's own error, not only "check log file(s)"
        text = "".join(Path(f).read_text(errors="replace") for f in ([log] if isinstance(log, str) else log or [])
                       if Path(f).is_file())
        if getattr(workflow.executor_plugin, "name", None) == "slurm":
            lines = failure_lines(text, sys.argv[1:], [r.name for r in workflow.rules])
        else:
            lines = job_error_lines(text)
        for line in lines:
            logger.error(line)
