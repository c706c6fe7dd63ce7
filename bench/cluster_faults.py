"""One line per SLURM job that ended a cluster run: what SLURM did to it and what to type.

When a run through the SLURM profile stops, Snakemake prints a block per failed job, and for a
group job its block says only ``Error in group study`` (the executor plugin's reason, e.g.
``SLURM status is: 'TIMEOUT'``, is lost). ``workflows/lifecycle.smk`` therefore ends a failed
run with :func:`failure_lines`: for every Snakemake job whose last SLURM job failed, one line
naming that SLURM job, its rule or group, the state SLURM accounted (``sacct``, else
``squeue``) and the command to type next -- the user's own command, with more time or memory
where the state says the request was too small (:data:`ADVICE`, one entry per state).

The facts come from the run's log, which names every submission (``... submitted with SLURM
jobid N (log: PATH)``) and every failed one (its ``PATH`` on a ``log:`` line of an ``Error in``
block), so nothing here depends on how the plugin words its messages. Standard library only.

A local run's failed jobs get the same treatment (:func:`job_error_lines`): Snakemake's block
says "check log file(s)"; the run ends with one line per distinct error, read from those logs.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ADVICE", "Attempt", "Ended", "failed_jobs", "failure_lines", "job_error", "job_error_lines", "query_states",
           "with_resources"]

_SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+) \(log: (.+?)\)\.?$", re.M)
_ERROR_LOG = re.compile(r"^\s+log: (.*)$", re.M)
_SLURM_LOG = re.compile(r"(\S*slurm_logs/\S+?\.log)\b")


@dataclass(frozen=True)
class Attempt:
    """One submission of a Snakemake job (or group job) to SLURM."""

    slurm_id: str
    key: str  # the plugin's log folder under .snakemake/slurm_logs: rule_<rule>/<wildcards> or group_<group>_<rules>
    log: str  # the SLURM job's log file


@dataclass(frozen=True)
class Ended:
    """How SLURM accounted a finished job: its state and what it had asked for."""

    state: str
    minutes: int | None = None
    mem_mb: int | None = None


def failed_jobs(log_text: str) -> list[tuple[Attempt, int]]:
    """``(last attempt, number of attempts)`` of every Snakemake job whose last SLURM job failed."""
    failed_logs = {path for line in _ERROR_LOG.findall(log_text) for path in _SLURM_LOG.findall(line)}
    attempts: dict[str, list[Attempt]] = {}
    for slurm_id, log in _SUBMITTED.findall(log_text):
        parts = Path(log).parts
        key = "/".join(parts[parts.index("slurm_logs") + 1:-1]) if "slurm_logs" in parts else log
        attempts.setdefault(key, []).append(Attempt(slurm_id, key, log))
    return [(tries[-1], len(tries)) for tries in attempts.values() if tries[-1].log in failed_logs]


def _mem_mb(text: str) -> int | None:
    m = re.fullmatch(r"([\d.]+)([KMGT]?)[nc]?", text.strip())
    if not m:
        return None
    return int(float(m.group(1)) * {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2}[m.group(2)])


def _minutes(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


#: the commands asked for a finished job's state, in order: accounting first (it keeps jobs for
#: days), the controller's queue second (it forgets a job MinJobAge after its end)
QUERIES: tuple[tuple[str, Callable[[Sequence[str]], list[str]]], ...] = (
    ("sacct", lambda ids: ["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobIDRaw,State,TimelimitRaw,ReqMem"]),
    ("squeue", lambda ids: ["squeue", "-h", "--states=all", "-j", ",".join(ids), "-o", "%i|%T|%l|%m"]),
)


def query_states(ids: Sequence[str], run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> dict[str, Ended]:
    """SLURM's state (``CANCELLED by 0`` read as ``CANCELLED``), time limit and memory of ``ids``;
    ids no command knows are left out."""
    found: dict[str, Ended] = {}
    for tool, command in QUERIES:
        missing = [i for i in ids if i not in found]
        if not missing or shutil.which(tool) is None:
            continue
        try:
            out = run(command(missing), capture_output=True, text=True, timeout=30, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in out.splitlines():
            fields = line.split("|")
            if len(fields) == 4 and fields[0] in missing and fields[1].strip():
                minutes = _minutes(fields[2]) if tool == "sacct" else _squeue_minutes(fields[2])
                found[fields[0]] = Ended(fields[1].split()[0], minutes, _mem_mb(fields[3]))
    return found


def _squeue_minutes(text: str) -> int | None:
    """squeue's time limit ``[D-]HH:MM:SS`` / ``MM:SS`` in whole minutes."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text.strip())
    if not m:
        return None
    days, hours, mins, secs = (int(g or 0) for g in m.groups())
    return days * 1440 + hours * 60 + mins + (secs > 0)


def with_resources(argv: Sequence[str], settings: dict[str, str]) -> list[str]:
    """``argv`` with ``--set-resources`` holding ``settings`` (``rule:resource`` -> value).

    The option takes a list and a second occurrence replaces the first, so the new values
    join the list the command already has, replacing the same ``rule:resource``."""
    argv = list(argv)
    new = [f"{k}={v}" for k, v in settings.items()]
    if "--set-resources" not in argv:
        return argv + ["--set-resources", *new]
    start = argv.index("--set-resources") + 1
    end = start
    while end < len(argv) and not argv[end].startswith("-"):
        end += 1
    kept = [item for item in argv[start:end] if item.split("=", 1)[0] not in settings]
    return argv[:start] + kept + new + argv[end:]


def _rules_of(key: str, rules: Iterable[str]) -> list[str]:
    """The rules a job's log folder names: ``rule_<rule>/...``, or ``group_<group>_<rule>_<rule>...``
    split on the workflow's rule names (which contain underscores themselves)."""
    head = key.split("/", 1)[0]
    if head.startswith("rule_"):
        return [head[len("rule_"):]]
    names = sorted(rules, key=len, reverse=True)
    rest, found = head.split("_", 2)[-1] if head.count("_") >= 2 else "", []
    while rest:
        name = next((n for n in names if rest == n or rest.startswith(n + "_")), None)
        if name is None:
            break
        found.append(name)
        rest = rest[len(name) + 1:]
    return found


@dataclass(frozen=True)
class Failure:
    """A Snakemake job whose last SLURM job failed, with what SLURM said about it."""

    attempt: Attempt
    tries: int
    ended: Ended
    rules: tuple[str, ...]


def _more(resource: str, factor_of: Callable[[Ended], int | None], unit: str):
    def advice(f: Failure) -> tuple[str, dict[str, str]]:
        asked = factor_of(f.ended)
        if asked is None or not f.rules:
            return "asked too little; raise it with --set-resources", {}
        return (f"asked {asked} {unit}; give it twice that",
                {f"{rule}:{resource}": str(2 * asked) for rule in f.rules})
    return advice


def _again(why: str):
    def advice(f: Failure) -> tuple[str, dict[str, str]]:
        return f"{why}; finished jobs are kept, type the same command again", {}
    return advice


#: what each SLURM end state means and what to change in the command (none: type it again)
ADVICE: dict[str, Callable[[Failure], tuple[str, dict[str, str]]]] = {
    "TIMEOUT": _more("runtime", lambda e: e.minutes, "min"),
    "DEADLINE": _more("runtime", lambda e: e.minutes, "min"),
    "OUT_OF_MEMORY": _more("mem_mb", lambda e: e.mem_mb, "MB"),
    "NODE_FAIL": _again("its node failed (the plugin leaves that node out for the rest of the run)"),
    "BOOT_FAIL": _again("its node failed to boot"),
    "CANCELLED": _again("cancelled (scancel, an administrator, or pre-emption that cancels)"),
    "PREEMPTED": _again("pre-empted and not requeued"),
    "FAILED": _again("its command failed: the reason is in its log; once that is fixed"),
}


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):
        return path


def failure_lines(log_text: str, argv: Sequence[str], rules: Iterable[str],
                  states: Callable[[Sequence[str]], dict[str, Ended]] = query_states) -> list[str]:
    """One line per Snakemake job whose last SLURM job failed (see the module docstring)."""
    failed = failed_jobs(log_text)
    if not failed:
        return []
    ended = states([a.slurm_id for a, _ in failed])
    rules = list(rules)
    lines = []
    for attempt, tries in failed:
        end = ended.get(attempt.slurm_id, Ended("FAILED"))
        failure = Failure(attempt, tries, end, tuple(_rules_of(attempt.key, rules)))
        why, settings = ADVICE.get(end.state, _again(f"ended {end.state}"))(failure)
        command = shlex.join(["snakemake", *(with_resources(argv, settings) if settings else argv)])
        lines.append(f"ltr-bench: SLURM job {attempt.slurm_id} ({attempt.key}) ended {end.state}, attempt {tries} "
                     f"(log {_shown(attempt.log)}): {why}: `{command}`")
    return lines


# ----------------------------------------------------------------------------- a local run's failed jobs

_ERROR_IN = re.compile(r"^Error in (?:rule|group) (\S+?):\n((?:[ \t]+.*\n?)*)", re.M)
_ONE_LINE = re.compile(r"^ltr-bench [\w-]+: error: .*$", re.M)  # a BenchError, as bench.cli prints it
_EXCEPTION = re.compile(r"^[\w.]*(?:Error|Exception|Interrupt|Exit)\b.*$", re.M)  # a traceback's last line


def job_error(log: str) -> str:
    """The one line that says why a job failed: its ``ltr-bench ...: error:`` line, else the last
    exception line of its traceback, else its last line (``""`` for an empty or missing log)."""
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return ""
    for pattern in (_ONE_LINE, _EXCEPTION):
        found = pattern.findall(text)
        if found:
            return found[-1].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def job_error_lines(log_text: str) -> list[str]:
    """One line per distinct error of the jobs that failed in a local run: the rule, the error
    its log ends with (:func:`job_error`) and the logs that show it -- what Snakemake's own
    ``Error in rule`` block leaves to "check log file(s)"."""
    errors: dict[tuple[str, str], list[str]] = {}
    for rule, body in _ERROR_IN.findall(log_text):
        logs = [path for line in _ERROR_LOG.findall(body)
                for path in line.split(" (check log")[0].split(", ") if path.strip()]
        for path in logs:
            errors.setdefault((rule, job_error(path.strip()) or "no error line in its log"), []).append(path.strip())
    lines = []
    for (rule, error), logs in errors.items():
        shown = ", ".join(_shown(p) for p in logs[:3]) + (f" and {len(logs) - 3} more" if len(logs) > 3 else "")
        jobs = f"{len(logs)} {rule} jobs" if len(logs) > 1 else f"{rule} job"
        lines.append(f"ltr-bench: {jobs} failed: {error} (log: {shown})")
    return lines
