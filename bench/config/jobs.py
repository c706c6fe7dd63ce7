"""The jobs a target needs: the workflow's DAG, computed from the same planning decisions.

``ltr-bench plan`` and ``ltr-bench status`` (:mod:`bench.costs`) must know the study's jobs
before Snakemake runs them and without Snakemake. Every rule's inputs in ``workflows/*.smk``
come from :mod:`bench.config.plan`; :func:`target_jobs` follows the same functions from a
target to everything it needs, so the two cannot disagree (``tests/config/test_jobs.py``
compares the counts per rule with ``snakemake -n`` on the default, paper and scale profiles).

Targets: ``all`` (every enabled table and figure, the HTML report, and the check that the
study's runs reproduce the frozen baselines when they exist), a table or figure
name (:data:`bench.config.plan.TABLES`, :data:`~bench.config.plan.COMPUTED_TABLES`,
:data:`~bench.config.plan.FIGURES`), ``freeze`` and
``compare``. A job is one Snakemake job (``rule`` + its main ``output``) with the targets that
need it: a run shared by two tables is one job needed by both, and the outputs of the jobs it
needs (``needs``: every job upstream of it, directly or not), which ``ltr-bench status`` follows
to tell whether its output is up to date.

>>> from bench.config.validate import load_config
>>> jobs = target_jobs(load_config(), ["listsize_table3"])
>>> sorted({j.rule for j in jobs})
['evaluate', 'prepare', 'stats', 'table', 'train']
>>> sum(j.rule == "train" for j in jobs)
4
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.config import kinds, plan, tuning
from bench.errors import ConfigError

TARGET_ALL = "all"
OTHER_TARGETS = ("freeze", "compare")


@dataclass
class Job:
    """One Snakemake job: its rule, main output, wildcards, the targets that need it and the
    outputs of the jobs upstream of it."""

    rule: str
    output: str
    wildcards: dict[str, Any] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)
    #: the run directories a tuning's job trains one after another (rules ``tune``, ``tuned_runs``)
    runs: list[str] = field(default_factory=list)

    @property
    def is_run(self) -> bool:
        return self.rule in kinds.rules()  # the rules of the run kinds compute on the study's data


class _Jobs:
    """Jobs keyed by output, in the order first needed (every job after those it needs), each
    with the targets needing it and, through :meth:`upstream`, the jobs it needs."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.by_output: dict[str, Job] = {}
        self.target = ""
        self._frames: list[list[str]] = []
        self._rules: dict[tuple[str, str], str] = {}

    def add(self, rule: str, output: str, needs: list[str] | None = None, **wildcards: Any) -> None:
        job = self.by_output.setdefault(output, Job(rule, output, wildcards, needs=list(dict.fromkeys(needs or []))))
        if self.target not in job.targets:
            job.targets.append(self.target)
        for frame in self._frames:
            frame.append(output)

    @contextmanager
    def upstream(self) -> Iterator[list[str]]:
        """The outputs of every job added inside the block (the jobs what follows needs)."""
        frame: list[str] = []
        self._frames.append(frame)
        try:
            yield frame
        finally:
            self._frames.pop()  # blocks nest: the innermost ends first

    def prepared(self, dataset: str, folds: list[str]) -> None:
        source = self.config["datasets"][dataset]["source"]
        fetched = plan.fetched_inputs(self.config, dataset)
        for out in fetched:
            self.add("fetch", out, source=source)
        for fold in folds:
            self.add("prepare", plan.PREPARED.format(dataset=dataset, fold=fold), fetched, dataset=dataset, fold=fold)

    def runs(self, experiment: str, dataset: str, fold: str, methods: list[str], seeds: list[int]) -> None:
        self.run_list(experiment, dataset, fold, [(m, seeds) for m in methods])

    def run_list(self, experiment: str, dataset: str, fold: str, runs: list[tuple[str, list[int]]]) -> None:
        """The runs ``(method, seeds)`` on one fold: a planned method's run config is on its command
        line (no job); a tuned method's runs (its configurations on the tuning fold, its chosen
        configuration elsewhere) are its tuning's two jobs' (:func:`bench.config.plan.tuning_record_of`)."""
        with self.upstream() as prepared:
            self.prepared(dataset, [fold])
        for method, seeds in runs:
            rule = self._run_rule(experiment, method)
            for seed in seeds:
                record = plan.tuning_record_of(self.config, experiment, dataset, fold, method, seed)
                if record is None:
                    out = plan.RUN.format(experiment=experiment, dataset=dataset, fold=fold, method=method, seed=seed)
                    self.add(rule, out, prepared, experiment=experiment, dataset=dataset, fold=fold,
                             method=method, seed=seed)
                elif tuning.base_of_tuned(method) is not None:
                    self.tuned_runs(experiment, dataset, method)
                else:
                    parsed = tuning.parse_name(method)
                    self.tuning(experiment, dataset, parsed[0] if parsed else method)

    def _run_rule(self, experiment: str, method: str) -> str:
        """The rule of a run name, planned once: a run is revisited by every evaluation that needs it."""
        key = (experiment, method)
        if key not in self._rules:
            self._rules[key] = plan.run_rule(self.config, experiment, method)
        return self._rules[key]

    def tuning(self, experiment: str, dataset: str, method: str) -> None:
        """The ``tune`` job of one tuned method on ``dataset``: it trains the configurations' runs
        on the tuning fold itself, so it needs that fold (and a compared loss the frozen check)."""
        with self.upstream() as prepared:
            self.prepared(dataset, [plan.tuning_fold(self.config, dataset)])
        needs = [*prepared, *plan.tune_inputs(self.config, experiment, dataset, method)]
        out = plan.TUNING.format(experiment=experiment, dataset=dataset, method=method)
        self.add("tune", out, needs, experiment=experiment, dataset=dataset, method=method)
        if not self.by_output[out].runs:
            self.by_output[out].runs = [r["dir"] for r in plan.tuning_job_runs(self.config, "tune", experiment,
                                                                                dataset, method)]

    def tuned_runs(self, experiment: str, dataset: str, method: str) -> None:
        """The ``tuned_runs`` job of ``<method>+tuned`` on ``dataset``: the tuning's choice, then the
        chosen configuration's runs on every fold they need (:func:`bench.config.plan.tuned_run_keys`)."""
        spec = plan.tuned_runs_spec(self.config, experiment, dataset, method)
        with self.upstream() as needs:
            self.tuning(experiment, dataset, spec["method"])
            self.prepared(dataset, list(dict.fromkeys(r["fold"] for r in spec["runs"])))
        out = plan.TUNED_RUNS.format(experiment=experiment, dataset=dataset, method=method)
        self.add("tuned_runs", out, needs, experiment=experiment, dataset=dataset, method=method)
        self.by_output[out].runs = [r["dir"] for r in plan.tuning_job_runs(self.config, "tuned_runs", experiment,
                                                                            dataset, method)]

    def evaluation(self, name: str, dataset: str) -> None:
        ev = plan.evaluation(self.config, name, dataset)
        for fold in ev.folds:
            with self.upstream() as inputs:
                with self.upstream() as runs:
                    self.run_list(ev.experiment, dataset, fold, ev.trained_on(fold))
                self.selection(name, dataset, fold, runs)
                if fold == ev.tuning_fold:
                    for method in ev.tuned:
                        self.tuning(ev.experiment, dataset, method)
            self.add("evaluate", plan.profiled(self.config, plan.EVALUATED).format(name=name, dataset=dataset, fold=fold), inputs,
                     name=name, dataset=dataset, fold=fold)

    def selection(self, name: str, dataset: str, fold: str, runs: list[str]) -> None:
        """The ``select`` job an evaluation of ``name`` keeps its chosen grid points by (if any),
        which needs the ``runs`` it chooses among."""
        for out in plan.evaluation_selection(self.config, name, dataset, fold):
            self.add("select", out, runs, table=name, dataset=dataset, fold=fold)

    def table(self, table: str, *, render: bool = True) -> None:
        with self.upstream() as evaluated:
            for dataset in plan.table_datasets(self.config, table):
                self.evaluation(table, dataset)
        stats = plan.profiled(self.config, plan.STATS).format(table=table)
        self.add("stats", stats, evaluated, table=table)
        if render:
            summary = []
            if table in plan.tuned_tables(self.config):
                with self.upstream() as defaults:
                    for dataset in plan.table_datasets(self.config, table):
                        if plan.tuning_records(self.config, table, dataset):
                            self.evaluation(table + plan.DEFAULTS_SUFFIX, dataset)
                summary = [plan.profiled(self.config, plan.TUNING_SUMMARY).format(table=table)]
                self.add("tuning_summary", summary[0], [*evaluated, *defaults], table=table)
            for out in plan.table_outputs(self.config, table)[:1]:
                self.add("table", out, [*evaluated, stats, *summary], table=table)
            for out in plan.selection_table_outputs(self.config, table)[:1]:
                # it reads the records only (rule selection_table), and may finish before an evaluation
                self.add("selection_table", out, plan.table_records(self.config, table), table=table)

    def figure(self, figure: str) -> None:
        spec = self.config["figures"][figure]
        with self.upstream() as inputs:
            self._figure_inputs(figure, spec)
        self.add("figure", plan.figure_outputs(self.config, figure)[0], inputs, figure=figure)

    def _figure_inputs(self, figure: str, spec: dict[str, Any]) -> None:
        if figure == "scaling_figure":
            self.add("perf_scaling", plan.profiled(self.config, plan.SCALING_CSV))
        elif figure == "temperature_figure":
            dataset = plan.resolve_role(self.config, spec["dataset"])
            fold = spec.get("fold") or self.config["datasets"][dataset]["folds"][0]
            seeds = spec.get("seeds") or self.config["protocols"][spec["protocol"]]["seeds"]
            self.runs(spec["protocol"], dataset, fold, list(spec["methods"]), list(seeds))
        elif figure == "listsize_figure":
            self.table(spec["table"], render=False)
        elif figure == "recall_heatmap":
            for dataset, _ in plan.heatmap_datasets(self.config):  # one model per (method, m, k)
                self.evaluation("recall_heatmap", dataset)
        elif figure == "annealing_figure":
            dataset = plan.resolve_role(self.config, spec["dataset"])
            fold = spec.get("fold") or self.config["datasets"][dataset]["folds"][0]
            seeds = spec.get("seeds") or self.config["protocols"][spec["protocol"]]["seeds"]
            self.runs(spec["protocol"], dataset, fold, list(spec["methods"]), list(seeds))
        elif figure == "letor_curves":
            for dataset in plan.table_datasets(self.config, spec["table"]):
                self.evaluation(spec["table"], dataset)
        elif figure == "quality_cost_figure":
            plan.quality_cost_inputs(self.config)  # its table enabled, its dataset the table's: as the rule checks
            self.table(spec["table"], render=False)  # its statistics and its runs (every dataset's)
            self.add("quality_cost", plan.profiled(self.config, plan.QUALITY_COST))
        elif figure == "cd_diagram":
            plan.cd_diagram_inputs(self.config)  # its metrics ranked, the ranking enabled: as the rule checks
            self.ranking()
        else:
            self.add("loss_curves", plan.profiled(self.config, plan.LOSS_CURVES))

    def computed_table(self, name: str) -> None:
        """A table of ``computed_tables:``: the toy table, every prepared fold, the runs it reads, or
        the ranking of a table's evaluated frames."""
        kind = plan.COMPUTED_TABLES[name][0]
        with self.upstream() as inputs:
            if kind == "ranking":
                self.ranking()
            elif kind == "toy_sort":
                self.add("toy_sort", plan.profiled(self.config, plan.TOY_SORT))
            elif kind == "datasets":
                for dataset in plan.study_datasets(self.config):
                    self.prepared(dataset, list(self.config["datasets"][dataset]["folds"]))
            else:
                spec = self.config["computed_tables"][name]
                table = spec["table"]
                dataset = plan.resolve_role(self.config, spec["dataset"], self.config["tables"][table])
                ev = plan.evaluation(self.config, table, dataset)
                for fold in ev.folds:
                    with self.upstream() as runs:
                        self.run_list(ev.experiment, dataset, fold, ev.trained_on(fold))
                    self.selection(table, dataset, fold, runs)
                    if fold == ev.tuning_fold:
                        for method in ev.tuned:
                            self.tuning(ev.experiment, dataset, method)
        self.add("computed_table", plan.computed_table_outputs(self.config, name)[0], inputs, table=name)

    def ranking(self) -> None:
        """Rule ``ranking`` (issue 40): the ranked table's evaluated frames, ranked across datasets and folds."""
        table = plan.ranking_source(self.config)
        with self.upstream() as evaluated:
            for dataset in plan.table_datasets(self.config, table):
                self.evaluation(table, dataset)
        self.add("ranking", plan.profiled(self.config, plan.RANKING), evaluated)

    def freeze(self) -> None:
        for dataset in plan.freeze_datasets(self.config):
            with self.upstream() as inputs:
                self.evaluation("freeze", dataset)
                self.prepared(dataset, list(self.config["datasets"][dataset]["folds"]))
            out = f"results/frozen/{self.config['profile']}/{dataset}/manifest.json"
            self.add("freeze_dataset", out, inputs, dataset=dataset)

    def reproduced(self) -> None:
        """The default study's check that its runs of the frozen methods reproduce the frozen files."""
        for dataset in plan.freeze_datasets(self.config):
            out = plan.REPRODUCED.format(dataset=dataset)
            if out in plan.reproduction_outputs(self.config, os.path.exists):
                self.evaluation("freeze", dataset)
                self.prepared(dataset, list(self.config["datasets"][dataset]["folds"]))
                self.add("check_reproduced", out, dataset=dataset)

    def compare(self) -> None:
        plan.compare_outputs(self.config)  # compare.losses set?
        for dataset in plan.compare_datasets(self.config):
            with self.upstream() as inputs:
                with self.upstream() as prepared:
                    self.prepared(dataset, list(self.config["datasets"][dataset]["folds"]))
                self.add("check_frozen", plan.FROZEN_CHECKED.format(dataset=dataset), prepared, dataset=dataset)
                self.evaluation(plan.COMPARE_EXPERIMENT, dataset)
            self.add("compare_table", f"reports/compare/{dataset}.md", inputs, dataset=dataset)


def expand_targets(config: dict[str, Any], targets: list[str]) -> list[str]:
    """Tables, figures, ``freeze``, ``compare`` and ``report`` named by ``targets`` (``all``
    expanded as the workflow's ``rule all``); an unknown or disabled name is a ConfigError."""
    out: list[str] = []
    for target in targets or [TARGET_ALL]:
        if target == TARGET_ALL:
            out += [*plan.enabled_tables(config), *plan.enabled_computed_tables(config),
                    *plan.enabled_figures(config), "report"]
            out += ["reproduced"] if plan.reproduction_outputs(config, os.path.exists) else []
        elif target in plan.TABLES:
            plan.table_outputs(config, target)  # enabled?
            out.append(target)
        elif target in plan.FIGURES:
            plan.figure_outputs(config, target)
            out.append(target)
        elif target in plan.COMPUTED_TABLES:
            plan.computed_table_outputs(config, target)
            out.append(target)
        elif target in OTHER_TARGETS:
            out.append(target)
        else:
            known = [TARGET_ALL, *plan.TABLES, *plan.COMPUTED_TABLES, *plan.FIGURES, *OTHER_TARGETS]
            raise ConfigError(f"unknown target {target!r}; known: {', '.join(known)}")
    return list(dict.fromkeys(out))


def target_jobs(config: dict[str, Any], targets: list[str]) -> list[Job]:
    """Every job the ``targets`` need (see the module docstring), each once."""
    jobs = _Jobs(config)
    with plan.fixed(config), jobs.upstream() as before:  # each planning question answered once
        for target in expand_targets(config, targets):
            jobs.target = target
            if target in plan.TABLES:
                jobs.table(target)
            elif target in plan.FIGURES:
                jobs.figure(target)
            elif target in plan.COMPUTED_TABLES:
                jobs.computed_table(target)
            elif target == "report":  # the report shows every table and figure of the study
                jobs.add("coverage", plan.profiled(config, plan.COVERAGE))  # reads docs/coverage.md only
                jobs.add("report", plan.report_file(config), list(before))
            else:
                getattr(jobs, target)()
    return list(jobs.by_output.values())
