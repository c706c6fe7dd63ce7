# Shared helpers of the workflow: config validation, the file layout, and one thin wrapper per
# planning decision. Every decision lives in bench.config.plan (unit-tested in tests/config/);
# here wildcards are mapped to it and its answers written as JSON for the CLI.
import inspect
import json
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.common import overwrite_function_params
from snakemake.resources import Resource
from snakemake.utils import min_version

from bench.config import kinds, plan
from bench.training import determinism
from bench.config.validate import validate_config
from bench.errors import ConfigError

min_version("8.0")

SCHEMA = Path(workflow.basedir) / "workflows" / "schemas" / "config.schema.yaml"
try:
    validate_config(config, SCHEMA)
except ConfigError as exc:
    # the one line and a non-zero exit: a WorkflowError would wrap it in "WorkflowError in file
    # .../common.smk, line ..." and a traceback line, which say nothing about the config
    sys.exit(f"invalid configuration: {exc}")

PROFILE = config["profile"]
PREPARED, RUN, RUN_CONFIG = plan.PREPARED, plan.RUN, plan.RUN_CONFIG
# a summary (a table, figure, statistics, evaluation, selection, the report) lives in the profile's
# own folders, so two profiles' outputs coexist (plan.profiled; the default profile's at the top)
SELECTION = plan.profiled(config, plan.SELECTION)
EVALUATED, STATS, LOSS_CURVES = (plan.profiled(config, p) for p in (plan.EVALUATED, plan.STATS, plan.LOSS_CURVES))
REPORTS = plan.reports_dir(config)
GPU = 1 if config["gpu"] else 0

report: "report/workflow.rst"


# the config is fixed from here on: each planning question is answered once per run
# (bench.config.plan.fix), and so is each call below (_planned), for every job that asks it again
plan.fix(config)
_ANSWERS = {}


def _planned(fn):
    """``fn(config, ...)`` of bench.config.plan, remembered per arguments; its ConfigError
    becomes a WorkflowError. A list comes back as a copy (Snakemake may keep what it is given)."""

    def call(*args):
        key = (fn, *(tuple(a) if isinstance(a, list) else a for a in args))
        try:
            value = _ANSWERS[key]
        except KeyError:
            try:
                value = _ANSWERS[key] = fn(config, *args)
            except ConfigError as exc:
                raise WorkflowError(str(exc)) from None
        return list(value) if isinstance(value, list) else value

    return call


_alternatives = plan.one_of  # a wildcard constraint: exactly one of the names


_sorted_json = lambda obj: json.dumps(obj, sort_keys=True)
# the methods of each run kind's rule, as wildcard constraints (bench.config.kinds); a tuned method's
# configurations and chosen configuration are trained by the tuning's jobs (workflows/tune.smk)
RULE_METHODS = {name: _alternatives(plan.run_job_methods(config, name)) for name in kinds.rules()}

# the tuned methods (bench.config.tuning), as the `tune` rule's wildcard constraint
TUNED_METHODS = _alternatives(plan.tuned_method_names(config))

# targets and shared arguments
table_outputs = _planned(plan.table_outputs)
table_targets = _planned(plan.table_targets)  # the table and, when it selects on validation, its selection table
selection_files = _planned(plan.selection_files)
select_inputs = _planned(plan.select_inputs)
tune_inputs = _planned(plan.tune_inputs)
table_records = _planned(plan.table_records)  # grid selections' and tuning's
tuned_tables = lambda: plan.tuned_tables(config)
computed_table_outputs = _planned(plan.computed_table_outputs)
figure_outputs = _planned(plan.figure_outputs)
report_inputs = _planned(plan.report_inputs)
freeze_outputs = _planned(plan.freeze_outputs)
compare_outputs = _planned(plan.compare_outputs)
reproduction_outputs = lambda: plan.reproduction_outputs(config, os.path.exists)
prepared_folds = _planned(plan.prepared_folds)
evaluated_files = _planned(plan.evaluated_files)
stats_params = lambda table: " ".join(plan.stats_args(config, table))
perf_args = lambda: " ".join(plan.perf_args(config))
loss_curves_args = lambda: " ".join(plan.loss_curves_args(config))


# per job: wildcards -> plan
def dataset_spec(wildcards):
    return _planned(plan.dataset_spec)(wildcards.dataset)


def fetched_input(wildcards):
    return _planned(plan.fetched_inputs)(wildcards.dataset)


def prepare_options(wildcards):
    return _sorted_json(dataset_spec(wildcards)["options"])


def run_upstream(wildcards):
    """What a run needs besides its fold: for a compared loss's run, the check that the frozen
    baselines reproduce (rule check_frozen)."""
    if wildcards.experiment == plan.COMPARE_EXPERIMENT:
        return [plan.FROZEN_CHECKED.format(dataset=wildcards.dataset)]
    return []


def run_config_option(wildcards):
    """`--config-json TEXT`, the planned run config (bench.config.plan.run_config_argument), quoted
    for the shell. A function of the wildcards only, on purpose: Snakemake's params trigger records
    a param function's value unless it takes input, output, threads or resources, and that record
    is what reruns a run whose config changed (tests/test_workflow.py)."""
    text = _planned(plan.run_config_argument)(wildcards.experiment, wildcards.dataset, wildcards.method)
    return f"--config-json {shlex.quote(text)}"


def evaluated_runs(wildcards):
    return _planned(plan.evaluated_runs)(wildcards.name, wildcards.dataset, wildcards.fold)


def evaluated_records(wildcards):
    """The evaluated runs' tracked files (plan.run_inputs: a run's record, or the tuning record of
    the tune job that trains it); `ltr-bench evaluate` reads their scores."""
    return _planned(plan.evaluated_inputs)(wildcards.name, wildcards.dataset, wildcards.fold)


def evaluation_records(wildcards):
    return _planned(plan.evaluation_records)(wildcards.name, wildcards.dataset, wildcards.fold)


def evaluate_params(wildcards):
    return " ".join(_planned(plan.evaluate_args)(wildcards.name, wildcards.dataset))


def table_spec_json(wildcards):
    return _sorted_json(_planned(plan.table_spec)(wildcards.table))


def figure_spec_json(wildcards):
    return _sorted_json(_planned(plan.figure_spec)(wildcards.figure))


def figure_inputs(wildcards):
    return _planned(plan.figure_inputs)(wildcards.figure)


def figure_input_args(wildcards, input):
    # only files the figure reads directly (temperature reads run dirs named in its spec)
    return "--input " + " ".join(input) if plan.figure_reads_inputs(wildcards.figure) else ""


def study_protocol_json(dataset):
    return _sorted_json(_planned(plan.study_protocol)(config["freeze"]["protocol"], dataset))


def compare_spec_json(wildcards):
    return _sorted_json(_planned(plan.compare_spec)(wildcards.dataset))


# issue 26: tables from computed tables other than paired statistics (bench.config.plan.COMPUTED_TABLES)
STATS_TABLES = _alternatives(plan.TABLES)
COMPUTED_TABLES = _alternatives(plan.COMPUTED_TABLES)


def computed_table_inputs(wildcards):
    return _planned(plan.computed_table_inputs)(wildcards.table)


def computed_table_spec_json(wildcards):
    return _sorted_json(_planned(plan.computed_table_spec)(wildcards.table))


def table_labels(fmt):
    # the report's Results -> Tables lists each table by its title (the target beside it)
    def labels(wildcards):
        spec = config["tables"].get(wildcards.table) or config["computed_tables"][wildcards.table]
        return {"table": spec.get("title", wildcards.table), "target": wildcards.table, "format": fmt}

    return labels


def _sign(func):
    """Record ``func``'s parameters on it once (Snakemake's own ``overwrite_function_params``)."""
    if callable(func) and not hasattr(func, "_overwrite_params"):
        try:
            overwrite_function_params(func, inspect.signature(func).parameters)
        except (AttributeError, TypeError, ValueError):  # a builtin, a bound method: Snakemake inspects it
            pass


def sign_rule_functions():
    """Every function the rules call per job (input functions, params, resources), its parameters
    read once: Snakemake otherwise runs inspect.signature on each call for each job (9% of a
    paper-profile dry run's profile). The Snakefile calls this after its last rule."""
    _sign(Resource.evaluate)  # how Snakemake calls every resource of every job (a bound method reads its function's)
    for each in workflow.rules:
        items = [*each.input, *each.params, *(r._evaluator for r in (each.resources or {}).values()), each._group]
        for item in items:
            _sign(item)
            _sign(getattr(item, "callable", None))
            _sign(getattr(getattr(item, "_file", None), "callable", None))


def kernel_env(wildcards):
    """The pinned kernels' variables for the frozen methods' runs and the compare runs, else
    nothing (bench.training.determinism; docs/compare.md, "Pinned kernels")."""
    pinned = determinism.trains_pinned(config, wildcards.experiment, wildcards.dataset, wildcards.method)
    return determinism.env_assignments() if pinned else ""
