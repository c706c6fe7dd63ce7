"""The run commands (``ltr-bench train``, ``gbdt``, ``linear``): one prepared fold, one method, one
seed; and a tuned method's two jobs, which train several runs one after another (:func:`train_runs`):
``ltr-bench tune`` (its configurations, then the choice) and ``tuned-runs`` (the chosen one's runs).

One command per rule of the run kinds (:data:`bench.config.kinds.RUN_KINDS`), all with the same
arguments (:func:`add_run_arguments`) and one path, :func:`run_job`: read the job's config
(:func:`bench.config.run.read_run_config`), pick the run kind that trains the method under it
(:func:`bench.config.kinds.run_kind`: SinkProp's own protocol under ``train`` when the config
carries its section), import that kind's run function, call it, print the run directory.
Errors the user can fix (:class:`bench.errors.BenchError`: a config key, a missing fold, a
diverged run, a library refusing its parameters) reach ``ltr-bench`` as one line and exit
status 2. Run functions are imported when their command runs, so ``ltr-bench gbdt`` and
``linear`` never import torch.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from pathlib import Path
from typing import Any

from bench.atomic import write_json
from bench.atomic.integrity import verify, verify_dir
from bench.config import kinds
from bench.config.run import parse_run_config_json, read_run_config, run_config_digest
from bench.errors import ConfigError, IntegrityError, UsageError
from bench.perf.process import reset_peak, trim_heap
from bench.results import RUN_FILES, parse_spec, read_run_info, write_record
from bench.selection import tuning
from bench.training.common import DEVICE_CHOICES
from bench.training.refit import job_settings

# what each command's arguments say (a rule without an entry gets the generic words)
HELP = {
    "train": {"method": "key under methods: in the config",
              "config": "YAML or JSON config with methods/model/train/metrics",
              "quiet": "no progress bar; a progress line at least every 30 s ($LTR_BENCH_PROGRESS_SECONDS) and after "
                       "each validation",
              "threads": "torch intra-op threads (0: torch's default)"},
    "gbdt": {"method": "key under methods: in the config (with gbdt: ...)",
             "quiet": "no summary line (the progress lines stay)", "threads": "library threads (0: library default)"},
    "linear": {"method": "key under methods: in the config (with linear: least_squares)", "quiet": "no summary line",
               "threads": "recorded only (NumPy's BLAS decides)"},
}


def add_run_arguments(p, *, method_help: str, config_help: str, quiet_help: str, threads_help: str) -> None:
    """The arguments every run command takes (one prepared fold, one method, one seed)."""
    p.add_argument("--prepared", required=True, help="prepared fold directory (ltr-bench prepare)")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--method", required=True, help=method_help)
    p.add_argument("--seed", required=True, type=int)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", help=config_help)
    source.add_argument("--config-json", metavar="JSON",
                        help="the same config as JSON text (what the workflow passes a planned run)")
    p.add_argument("--device", default="auto", choices=DEVICE_CHOICES)
    p.add_argument("--quiet", action="store_true", help=quiet_help)
    p.add_argument("--threads", type=int, default=0, help=threads_help)


def run_job(config: dict[str, Any], prepared_dir: str | os.PathLike, out_dir: str | os.PathLike, *, method: str,
            seed: int, rule: str | None = None, **options: Any) -> Path:
    """Run ``method`` by the kind that trains it under ``config``: the kind's resolver turns the
    job's config into settings (:mod:`bench.config.settings`), :func:`bench.training.refit.job_settings`
    adds the tested model's keys (or refuses a refit the kind cannot do), its run function trains from them.
    ``rule``: the command asked for (a method of another rule's kind is refused, naming the
    command that runs it)."""
    name = kinds.run_kind(config, method, rule)
    kind = kinds.RUN_KINDS[name]
    if rule is not None and kind.rule != rule:
        raise ConfigError(f"methods.{method}: a {name} method; run it with `ltr-bench {kind.rule}`")
    settings = job_settings(name, kinds.load(kind.resolve)(config, method), config, method)  # checkpoint, refit
    run = kinds.load(kind.run)
    accepted = inspect.signature(run).parameters
    for option, value in list(options.items()):
        if option not in accepted:
            if value is not None:
                raise UsageError(f"--{option.replace('_', '-')}: not an option of a {name} run")
            del options[option]
    return run(settings, prepared_dir, out_dir, method=method, seed=seed, **options)


def run_from_cli(args) -> int:
    """Load ``args.config`` (or parse ``args.config_json``), run the job and print the run dir.
    The run records the config's digest (:func:`bench.config.run.run_config_digest`) in
    ``run.json``, whichever way it came.

    A missing file becomes a :class:`bench.errors.UsageError` naming it; the run functions'
    own errors are :class:`bench.errors.BenchError` already.
    """
    try:
        if args.config_json is not None:
            config = parse_run_config_json(args.config_json, "--config-json")
        else:
            config = read_run_config(args.config)
        out = run_job(config, args.prepared, args.out, method=args.method, seed=args.seed,
                      rule=args.command, device=args.device, quiet=args.quiet, threads=args.threads or None,
                      checkpoint_dir=args.checkpoint_dir, run_config_sha256=run_config_digest(config))
    except FileNotFoundError as exc:
        raise UsageError(f"{exc.filename or exc}: not found ({exc.strerror or exc})") from exc
    print(out)
    return 0


def reusable(run_dir: str | os.PathLike, *, method: str, seed: int, run_config_sha256: str, fingerprint: str) -> bool:
    """Whether the finished run in ``run_dir`` is sound and the one asked for: every file of it
    matches its digest, and its ``run.json`` names this method and seed, this run config's digest
    and this prepared fold's fingerprint. A damaged run is trained again, with a line saying so."""
    if not (Path(run_dir) / "run.json").is_file():
        return False
    try:
        verify_dir(run_dir, RUN_FILES)
        info = read_run_info(run_dir)
    except IntegrityError as exc:
        print(f"{exc}; training it again", flush=True)
        return False
    return (info.get("method"), info.get("seed"), info.get("run_config_sha256"), info.get("dataset_fingerprint")) == \
        (method, int(seed), run_config_sha256, fingerprint)


def journal_path(out: str | os.PathLike) -> Path:
    """The journal of the job whose output is ``out`` (:func:`train_runs`): ``<out>.partial``."""
    return Path(f"{out}.partial")


def train_runs(runs: list[dict[str, Any]], *, device: str, threads: int, quiet: bool,
               journal: str | os.PathLike) -> tuple[int, int]:
    """Train ``runs`` (``run_config``, ``rule``, ``method``, ``seed``, ``dir``, ``prepared``) one
    after another, each written whole as a run job writes it. Returns ``(trained, kept)``.

    Resuming, not reusing: the ``journal`` lists the runs this job finished for these very runs
    (their JSON's digest), so a job that was killed keeps them when it runs again (a kill loses
    the run in progress, whose checkpoint resumes it) if they are still sound (:func:`reusable`).
    A job that finished removes its journal (:func:`finish`): when Snakemake runs it again (forced,
    or its params or folds changed) it trains every run again, as it would rerun a run job: a
    re-freeze after a code change must not keep the runs the old code made."""
    journal = Path(journal)
    asked = hashlib.sha256(json.dumps(runs, sort_keys=True).encode("utf-8")).hexdigest()
    try:
        state = json.loads(journal.read_text(encoding="utf-8"))
        done = state["done"] if state.get("runs") == asked else {}
    except (OSError, ValueError, KeyError, TypeError):
        done = {}
    fingerprints: dict[str, str] = {}
    trained = kept = 0
    for run in runs:
        if run["prepared"] not in fingerprints:
            meta = Path(run["prepared"]) / "meta.json"
            verify(meta)
            fingerprints[run["prepared"]] = json.loads(meta.read_text(encoding="utf-8"))["fingerprint"]
        facts = {"method": run["method"], "seed": run["seed"], "run_config_sha256": run_config_digest(run["run_config"]),
                 "fingerprint": fingerprints[run["prepared"]]}
        if done.get(run["dir"]) == facts and reusable(run["dir"], **facts):
            kept += 1
            continue
        _own_peak()
        run_job(run["run_config"], run["prepared"], run["dir"], method=run["method"], seed=run["seed"],
                rule=run["rule"], device=device, quiet=quiet, threads=threads or None, checkpoint_dir=None,
                run_config_sha256=facts["run_config_sha256"])
        done[run["dir"]] = facts
        write_json(journal, {"runs": asked, "done": done})
        print(f"{run['dir']}: trained", flush=True)
        trained += 1
    return trained, kept


def _own_peak() -> None:
    """Make the peak memory the next run records (``run.json``'s ``host_max_rss_bytes``) its own,
    not the largest of the runs before it in this process: the freed heap goes back to the kernel
    and the kernel's peak is reset to the current size (Linux; elsewhere the process's peak so far)."""
    trim_heap()
    try:
        reset_peak()
    except OSError:
        pass


def finish(journal: str | os.PathLike) -> None:
    """The job wrote its output: its journal goes (a later run of the job trains everything again)."""
    Path(journal).unlink(missing_ok=True)


def _train_from_cli(args, runs: list[dict[str, Any]]) -> None:
    try:
        trained, kept = train_runs(runs, device=args.device, threads=args.threads, quiet=args.quiet,
                                   journal=journal_path(args.out))
    except FileNotFoundError as exc:
        raise UsageError(f"{exc.filename or exc}: not found ({exc.strerror or exc})") from exc
    print(f"{trained} run(s) trained, {kept} kept from the interrupted attempt before")


def tune_from_cli(args) -> int:
    """``ltr-bench tune``: train every configuration's runs the tuning lacks (:func:`train_runs`),
    choose (:func:`bench.selection.tuning.tune`), write the record."""
    spec = parse_spec(args.spec)
    (points,) = [entry["points"] for entry in spec["methods"].values()]
    _train_from_cli(args, [{"run_config": p["run_config"], "rule": p["rule"], "method": p["run"], "seed": seed,
                            "dir": run_dir, "prepared": spec["prepared"]}
                           for p in points for seed, run_dir in zip(spec["seeds"], p["dirs"])])
    record = tuning.tune(spec)
    write_record(record, args.out)
    finish(journal_path(args.out))
    print(tuning.summary_line(record, args.out))
    return 0


def tuned_runs_from_cli(args) -> int:
    """``ltr-bench tuned-runs``: write the chosen configuration's run config
    (:func:`bench.selection.tuning.tuned_config`), train its runs that are not finished already
    (:func:`train_runs`), then the record naming them (the job's output, written last)."""
    spec = parse_spec(args.spec)
    chosen = tuning.tuned_config(spec, spec["config_out"])
    run_config = spec["configs"][chosen]
    _train_from_cli(args, [{"run_config": run_config, "rule": spec["rule"], "method": spec["run"], "seed": r["seed"],
                            "dir": r["dir"], "prepared": r["prepared"]} for r in spec["runs"]])
    write_record({"method": spec["run"], "chosen": chosen, "run_config": spec["config_out"],
                  "run_config_sha256": run_config_digest(run_config), "runs": [r["dir"] for r in spec["runs"]]},
                 args.out)
    finish(journal_path(args.out))
    print(f"{args.out}: {len(spec['runs'])} run(s) of {spec['run']} (the chosen configuration {chosen})")
    return 0


#: a tuned method's two commands: (help line, --spec, --out, what runs them)
TUNING_COMMANDS = {
    "tune": ("train a tuned method's configurations on the tuning fold, then choose one on its validation",
             "JSON: the configurations, their run configs and runs (bench.config.plan.tune_spec)",
             "results/tuning/<experiment>/<dataset>/<method>.json", tune_from_cli),
    "tuned-runs": ("train a tuned method's chosen configuration on the folds and seeds the tuning did not",
                   "JSON: the tuning record, the configurations' run configs and the runs "
                   "(bench.config.plan.tuned_runs_spec)",
                   "results/tuning/<experiment>/<dataset>/<method>+tuned.json", tuned_runs_from_cli),
}


def _add_training_options(p) -> None:
    p.add_argument("--device", default="auto", choices=DEVICE_CHOICES)
    p.add_argument("--threads", type=int, default=0, help="compute threads of each run (0: the library's default)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (progress lines stay)")


def register_cli(subparsers) -> None:
    """One command per rule of the run kinds (``ltr-bench train``, ``gbdt``, ``linear``), ``tune`` and ``tuned-runs``."""
    for rule in kinds.rules():
        words = HELP.get(rule, {})
        p = subparsers.add_parser(rule, help=kinds.rule_help(rule))
        add_run_arguments(p, method_help=words.get("method", "key under methods: in the config"),
                          config_help=words.get("config", "YAML or JSON config"),
                          quiet_help=words.get("quiet", "no summary line"),
                          threads_help=words.get("threads", "compute threads (0: the library's default)"))
        p.add_argument("--checkpoint-dir", default=None,
                       help="runs that checkpoint (train): default .<out name>.ckpt next to --out")
        p.set_defaults(func=run_from_cli)
    for name, (line, spec_help, out_help, func) in TUNING_COMMANDS.items():
        c = subparsers.add_parser(name, help=line)
        c.add_argument("--spec", required=True, help=spec_help)
        c.add_argument("--out", required=True, help=out_help)
        _add_training_options(c)
        c.set_defaults(func=func)
