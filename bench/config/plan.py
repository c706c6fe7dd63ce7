"""Planning: every decision the workflow makes from the validated config, unit-tested.

The Snakefile's ``workflows/common.smk`` only maps wildcards to these functions and writes
their results as JSON (per-job config files and ``--spec`` arguments); nothing here knows
about Snakemake. Every function takes the validated config (:func:`bench.config.validate.
validate_config`) first.

- which tables and figures are enabled (:data:`TABLES`, :data:`FIGURES`: the names, defined
  once) and which files they need;
- the runs: one ``(experiment, dataset, fold, method, seed)`` per job, run by the rule (and
  ``ltr-bench`` command) of the method's kind (:mod:`bench.config.kinds`, the registry of run
  kinds); :func:`run_config` is the self-contained config one job reads (``--config``);
- what each evaluation, statistics table, table rendering and figure is given;
- hyperparameter selection on validation: a table's grid points (:mod:`bench.config.selection`),
  the runs each one reuses, and what the ``select`` stage and the selection table are given;
- the frozen comparison's protocol (:func:`study_protocol`).

>>> merged_model({"type": "mlp", "hidden": [8]}, {"dropout": 0.1})
{'type': 'mlp', 'hidden': [8], 'dropout': 0.1}
>>> merged_model({"type": "mlp", "hidden": [8]}, {"type": "context_aware"})
{'type': 'context_aware'}
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from bench import search_space
from bench.choices import DATASET_CONVENTION
from bench.config import heatmap, kinds, schema, selection, tuning
from bench.config.run import model_type, resolve_section
from bench.config.run import run_config_digest as run_digest
from bench.errors import ConfigError

TABLES: tuple[str, ...] = (
    "pirank_table1",
    "neuralndcg_table3",
    "arf_table2",
    "listsize_table3",
    "sinkprop_letor",
    "unified_table",
)
# what each table reproduces (None: this suite's own table)
TABLE_SOURCES = {
    "pirank_table1": "PiRank (Swezey et al., NeurIPS 2021) Table 1",
    "neuralndcg_table3": "NeuralNDCG (Pobrotyn & Bialobrzeski 2021) Table 3",
    "arf_table2": "ARF (Wang et al. 2024) Table 2",
    "listsize_table3": "PiRank (Swezey et al., NeurIPS 2021) Appendix Table 3",
    "sinkprop_letor": "SinkProp (Adams & Zemel 2011) Fig. 2",
    "unified_table": None,
}
FIGURES: tuple[str, ...] = ("scaling_figure", "temperature_figure", "listsize_figure", "recall_heatmap", "neuralndcg_curves")
COMPARE_EXPERIMENT = "compare"

# Issue 26: the papers' tables and figures beyond the paired-statistics tables above.
# ARF Tables 6-8 (temperature sensitivity) are statistics tables like the others.
TABLES += ("arf_table6", "arf_table7", "arf_table8")
TABLE_SOURCES.update({
    "arf_table6": "ARF (Wang et al. 2024) Appendix Table 6",
    "arf_table7": "ARF (Wang et al. 2024) Appendix Table 7",
    "arf_table8": "ARF (Wang et al. 2024) Appendix Table 8",
})
# Tables rendered from a computed table other than paired statistics (``computed_tables:``):
# name -> (kind, what it reproduces). The kind picks the builder (bench.report.computed).
COMPUTED_TABLES = {
    "neuralndcg_table1": ("toy_sort", "NeuralNDCG (Pobrotyn & Bialobrzeski 2021) Table 1"),
    "neuralndcg_table2": ("datasets", "NeuralNDCG (Pobrotyn & Bialobrzeski 2021) Table 2"),
    "arf_table9": ("run_costs", "ARF (Wang et al. 2024) Appendix Table 9"),
    "ranking_table": ("ranking", None),  # issue 40: this suite's own, across datasets and folds
}
# PiRank Fig. 13 (temperature annealing, tau = 1e12) and SinkProp Fig. 2 as curves
FIGURES += ("annealing_figure", "letor_curves")
# Issue 35: quality against cost per loss, from a statistics table's own runs (no training)
FIGURES += ("quality_cost_figure",)
FIGURES += ("cd_diagram",)  # issue 40: the critical-difference diagram of ranking_table
# figures of this suite's own, reproducing no paper figure (as TABLE_SOURCES' None for tables)
OWN_FIGURES: tuple[str, ...] = ("quality_cost_figure", "cd_diagram")


# ----------------------------------------------------------------------------- a fixed config's answers, once

#: id(config) -> (the config, its memo): the configs declared fixed (:func:`fix`)
_FIXED: dict[int, tuple[dict[str, Any], dict[tuple, Any]]] = {}
_Planner = TypeVar("_Planner", bound=Callable[..., Any])


def fix(config: dict[str, Any]) -> dict[str, Any]:
    """Declare that ``config`` will not change any more: the planning functions marked
    :func:`_memo` then answer each question about it once. The workflow (``workflows/common.smk``)
    fixes its config for the whole run: it asks the same questions for thousands of jobs (every
    run of an evaluation asks for the evaluation). The answers are shared, so no caller may modify
    one (none does: they read, copy or dump them)."""
    _FIXED.setdefault(id(config), (config, {}))
    return config


@contextmanager
def fixed(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """:func:`fix` within the block only (:mod:`bench.config.jobs` while it lists a target's jobs)."""
    owner = id(config) not in _FIXED
    fix(config)
    try:
        yield config
    finally:
        if owner:
            _FIXED.pop(id(config), None)


def _memo(fn: _Planner) -> _Planner:
    """``fn(config, *args)`` remembered per fixed config (:func:`fix`) and positional ``args``;
    any other config is planned afresh (tests build configs and change them)."""

    @functools.wraps(fn)
    def cached(config: dict[str, Any], *args: Any) -> Any:
        entry = _FIXED.get(id(config))
        if entry is None or entry[0] is not config:
            return fn(config, *args)
        key = (fn.__name__, *args)
        try:
            return entry[1][key]
        except KeyError:
            value = entry[1][key] = fn(config, *args)
            return value
        except TypeError:  # an unhashable argument (a list of datasets): asked rarely
            return fn(config, *args)

    return cast(_Planner, cached)


def one_of(names: Iterable[str]) -> str:
    """A regex matching exactly one of ``names`` (a workflow's wildcard constraint), as a prefix
    tree: the paper profile's 680 training methods as a flat alternation are 13 kB of regex that
    Snakemake substitutes into, and matches against, every run's paths; as a tree 3 kB, and a
    match follows one branch instead of trying each name.

    >>> one_of(["arf", "arf_relax", "ranknet"]), one_of([])
    ('(?:arf(?:_relax)?|ranknet)', '(?!)')
    """
    trie: dict[str, dict] = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}  # a name ends here

    def regex(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + regex(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return regex(trie) if trie else "(?!)"


# ----------------------------------------------------------------------------- methods and roles


def merged_model(shared: dict[str, Any] | None, local: dict[str, Any] | None) -> dict[str, Any]:
    """A method's model as the trainer builds it: a different ``type`` replaces the protocol's."""
    shared, local = dict(shared or {}), dict(local or {})
    if "type" in local and local["type"] != model_type(shared):
        return local
    return {**shared, **local}


def resolve_role(config: dict[str, Any], role: str, table_spec: dict[str, Any] | None = None) -> str:
    """Dataset name for a paper role (table override, then global ``roles``, else the name)."""
    if table_spec and role in table_spec.get("roles", {}):
        return table_spec["roles"][role]
    return config.get("roles", {}).get(role, role)


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def enabled_datasets(config: dict[str, Any]) -> list[str]:
    return [name for name, spec in config["datasets"].items() if spec.get("enabled", True)]


@_memo
def table_datasets(config: dict[str, Any], table: str) -> list[str]:
    """Configured datasets of a table, in order, roles resolved, duplicates dropped."""
    spec = config["tables"][table]
    if spec["datasets"] == "all":
        return enabled_datasets(config)
    return _dedupe(resolve_role(config, role, spec) for role in spec["datasets"])


def table_roles(config: dict[str, Any], table: str) -> dict[str, str]:
    """Dataset name -> the paper role it stands in for, when that role is its real source."""
    spec = config["tables"][table]
    roles = [] if spec["datasets"] == "all" else spec["datasets"]
    out: dict[str, str] = {}
    for role in roles:
        name = resolve_role(config, role, spec)
        if config["datasets"][name]["source"] == role and name not in out:
            out[name] = role
    return out


def table_methods(config: dict[str, Any], table: str) -> list[str]:
    spec = config["tables"][table]
    return list(config["methods"]) if spec["methods"] == "all" else list(spec["methods"])


def table_seeds(config: dict[str, Any], table: str) -> list[int]:
    spec = config["tables"][table]
    return list(spec.get("seeds") or config["protocols"][spec["protocol"]]["seeds"])


def table_folds(config: dict[str, Any], table: str, dataset: str) -> list[str]:
    spec = config["tables"][table]
    return list(spec.get("folds") or config["datasets"][dataset]["folds"])


@_memo
def enabled_tables(config: dict[str, Any]) -> list[str]:
    return [t for t in TABLES if t in config.get("tables", {}) and config["tables"][t].get("enabled", True)]


def enabled_figures(config: dict[str, Any]) -> list[str]:
    figs = config.get("figures", {})
    return [f for f in FIGURES if f in figs and figs[f].get("enabled", True)]


method_kind = kinds.method_kind  # the kind a method entry makes (bench.config.kinds.RUN_KINDS)
method_rule = kinds.rule_of  # the Snakemake rule (and ``ltr-bench`` command) that runs it


def compare_method_name(entry: str | dict[str, Any]) -> str:
    """Method name of a ``compare.losses`` entry: its ``name``, or the loss reference made path-safe.

    >>> compare_method_name("examples.listwise_hinge:listwise_hinge")
    'examples.listwise_hinge.listwise_hinge'
    """
    if isinstance(entry, dict):
        return entry["name"]
    return entry.replace(":", ".")


def compare_methods(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``compare.losses`` entries as method specs."""
    out = {}
    for entry in config.get("compare", {}).get("losses", []):
        if isinstance(entry, str):
            out[compare_method_name(entry)] = {"loss": entry, "params": {}}
        else:
            spec = {"loss": entry["loss"], "params": dict(entry.get("params", {}))}
            for key in ("label", "search"):  # search: tuned with the frozen baselines' budget (bench.config.tuning)
                if key in entry:
                    spec[key] = copy.deepcopy(entry[key])
            out[entry["name"]] = spec
    return out


@_memo
def method_spec(config: dict[str, Any], experiment: str, method: str) -> dict[str, Any]:
    """A method's spec; under the ``compare`` experiment also the user's new losses, under the
    recall heatmap's protocol also the models it trains per (m, k) (:func:`heatmap_methods`), and
    the grid points of the tables' hyperparameter selection (:func:`selection_methods`)."""
    if experiment == COMPARE_EXPERIMENT:
        extra = compare_methods(config)
        if method in extra:
            return extra[method]
    if method not in config["methods"] and experiment == heatmap_protocol(config):
        extra = heatmap_methods(config)
        if method in extra:
            return extra[method]
    if method not in config["methods"]:
        tuned = tuning_method_spec(config, experiment, method)  # a configuration or the chosen one's runs
        if tuned is not None:
            return tuned
        points = selection_methods(config)  # grid points (bench.config.selection)
        if method in points:
            return points[method]
        raise ConfigError(f"config key 'methods': {schema.unknown_name(method, config['methods'], 'method')}")
    return config["methods"][method]


def run_rule(config: dict[str, Any], experiment: str, method: str) -> str:
    """The rule (and ``ltr-bench`` command) that runs ``method``'s runs of ``experiment``."""
    return method_rule(method_spec(config, experiment, method))


def experiment_protocol(config: dict[str, Any], experiment: str) -> str:
    """Protocol name of an experiment: itself, or the frozen protocol for ``compare``."""
    if experiment == COMPARE_EXPERIMENT:
        if "freeze" not in config:
            raise ConfigError("config key 'freeze': missing; the compare experiment uses the frozen protocol")
        return config["freeze"]["protocol"]
    if experiment not in config["protocols"]:
        raise ConfigError(f"unknown protocol '{experiment}' (config key 'protocols')")
    return experiment


def protocol_for_dataset(config: dict[str, Any], protocol: str, dataset: str) -> tuple[dict, dict]:
    """The protocol's ``(model, train)`` with its override for ``dataset`` (by name, else source)."""
    proto = config["protocols"][protocol]
    model, train = copy.deepcopy(proto["model"]), copy.deepcopy(proto["train"])
    overrides = proto.get("overrides", {})
    source = config["datasets"][dataset]["source"] if dataset in config["datasets"] else None
    extra = overrides.get(dataset, overrides.get(source, {}))
    return merged_model(model, extra.get("model")), {**train, **extra.get("train", {})}


def run_config(config: dict[str, Any], experiment: str, dataset: str, method: str) -> dict[str, Any]:
    """The self-contained config one run reads (``ltr-bench train|gbdt|linear --config``).

    Top level: the protocol's ``model`` and ``train`` for this dataset (shared defaults the
    trainer merges with the method's own ``model``/``train`` overrides), the metric
    conventions, and a one-entry ``methods`` mapping; display-only keys (``label``) are dropped.
    ``dataset_recipe`` (the dataset's ``source`` and ``options``; the trainer ignores it) is
    here so that changing a dataset's options changes every run config on it, and Snakemake
    re-runs those runs (and the prepare step they need) instead of keeping stale results.
    A protocol section of a run kind (``sinkprop_protocol``: :func:`protocol_section`) is
    there when it lists this method: the kind trains it instead (:func:`bench.config.kinds.run_kind`).
    """
    protocol_name = experiment_protocol(config, experiment)
    protocol = config["protocols"][protocol_name]
    spec = {k: copy.deepcopy(v) for k, v in method_spec(config, experiment, method).items() if k != "label"}
    metrics = metric_conventions(config, protocol_name, dataset)
    if "metrics" in protocol:
        metrics["names"] = list(protocol["metrics"])
    model, train = protocol_for_dataset(config, protocol_name, dataset)
    curve = vali_curve_list_size(config, experiment, dataset, method)
    if curve is not None:
        train["vali_curve_list_size"] = curve
    out = {
        "experiment": experiment,
        "protocol_name": protocol_name,
        "dataset": dataset,
        "dataset_recipe": {k: copy.deepcopy(config["datasets"][dataset].get(k)) for k in ("source", "options")},
        "model": model,
        "train": train,
        "metrics": metrics,
        "methods": {method: spec},
    }
    for key in kinds.protocol_kinds():
        section = protocol_section(config, protocol_name, method, key)
        if section is not None:
            out[key] = section
    return out


def vali_curve_list_size(config: dict[str, Any], experiment: str, dataset: str, method: str) -> int | None:
    """The validation list size whose curve a run records (``train.vali_curve_list_size``): the
    temperature figure's ``vali_list_size`` for that figure's runs (its protocol, dataset and
    methods; PiRank Fig. 5 plots the relaxed loss on validation lists of L = 100), else None, so
    no other run's config, and no other run's output, changes."""
    spec = config.get("figures", {}).get("temperature_figure")
    if not spec or not spec.get("enabled", True) or experiment != spec["protocol"]:
        return None
    if dataset != resolve_role(config, spec["dataset"]) or method not in spec["methods"]:
        return None
    return int(spec["vali_list_size"])


def run_config_argument(config: dict[str, Any], experiment: str, dataset: str, method: str) -> str:
    """:func:`run_config` as the compact JSON a planned run is given on its command line
    (``--config-json``; the workflow writes no file per run config: 6,987 such jobs were a third
    of the paper profile's jobs). Snakemake keeps it among the job's params, so a changed run
    config reruns exactly that method's runs; the run records its digest
    (:func:`bench.config.run.run_config_digest`), which ``ltr-bench status`` compares."""
    return json.dumps(run_config(config, experiment, dataset, method), sort_keys=True, separators=(",", ":"))


def run_config_digest(config: dict[str, Any], experiment: str, dataset: str, method: str) -> str:
    """The digest a run made with this config records (``run.json``'s ``run_config_sha256``)."""
    return run_digest(run_config(config, experiment, dataset, method))


def protocol_section(config: dict[str, Any], protocol: str, method: str, key: str) -> dict[str, Any] | None:
    """The protocol's section ``key`` of a run kind (e.g. ``sinkprop_protocol``), without its
    ``methods``, when it lists ``method``; the kind then trains the method's runs
    (:mod:`bench.training.sinkprop_protocol` for SinkProp's own protocol), every other method of
    the protocol keeps its own kind.
    """
    spec = config["protocols"][protocol].get(key)
    if not spec or method not in spec.get("methods", []):
        return None
    return {k: copy.deepcopy(v) for k, v in spec.items() if k != "methods"}


def freeze_datasets(config: dict[str, Any]) -> list[str]:
    freeze = config["freeze"]
    if freeze["datasets"] == "all":
        return enabled_datasets(config)
    return _dedupe(resolve_role(config, role) for role in freeze["datasets"])


def freeze_methods(config: dict[str, Any]) -> list[str]:
    freeze = config["freeze"]
    return list(config["methods"]) if freeze["methods"] == "all" else list(freeze["methods"])


def compare_datasets(config: dict[str, Any]) -> list[str]:
    chosen = config.get("compare", {}).get("datasets", "all")
    frozen = freeze_datasets(config)
    if chosen == "all":
        return frozen
    out = _dedupe(resolve_role(config, role) for role in chosen)
    for name in out:
        if name not in frozen:
            raise ConfigError(f"config key 'compare.datasets': '{name}' has no frozen baselines (frozen: {frozen})")
    return out


def study_protocol(config: dict[str, Any], protocol: str, dataset: str) -> dict[str, Any]:
    """What a frozen comparison must share: data recipe, folds, model, schedule, seeds, metrics.

    Method-independent by construction; :func:`bench.frozen.protocol_hash` hashes it. A
    protocol with the section of a run kind (``sinkprop_protocol``) adds it (methods list
    included), so frozen runs trained by it are not compared with runs of other settings.
    """
    ds = config["datasets"][dataset]
    model, train = protocol_for_dataset(config, protocol, dataset)
    out = {
        "dataset": {"name": dataset, "source": ds["source"], "folds": list(ds["folds"]), "options": ds["options"]},
        "model": model,
        "train": train,
        "seeds": list(config["protocols"][protocol]["seeds"]),
        "evaluation": metric_conventions(config, protocol, dataset),
        "metrics": list(config["freeze"]["metrics"]),
    }
    for key in kinds.protocol_kinds():
        if config["protocols"][protocol].get(key):
            out[key] = copy.deepcopy(config["protocols"][protocol][key])
    if protocol in tuning.tuned_protocols(config):  # the budget, split, seeds and shared space both sides tune with
        out["tuning"] = tuning_protocol(config, dataset)
    return out


# ----------------------------------------------------------------------------- the workflow's files

DEFAULT_PROFILE = "default"
#: the folders the suite itself writes directly under results/ or reports/: no profile may be named
#: like one, since a profile's own folder sits beside them (:func:`profiled`)
SUITE_FOLDERS = frozenset({"calibration", "compare", "config", "configs", "evaluated", "fetched", "figures", "frozen",
                           "logs", "perf", "prepared", "report", "runs", "selection", "stats", "tables", "tuning"})


def profiled(config: dict[str, Any], path: str) -> str:
    """Where ``path`` (a summary's pattern: a table, figure, statistics, evaluation, selection,
    the report) lives in this config's profile: as it is for the default profile, else under the
    profile's own folder, ``results/<profile>/...`` and ``reports/<profile>/...``. So two profiles'
    tables, figures and reports coexist; their runs, keyed by experiment, dataset and method (and
    rerun by Snakemake when the run config differs), are shared as they are.

    >>> profiled({"profile": "default"}, STATS), profiled({"profile": "paper"}, STATS)
    ('results/stats/{table}.parquet', 'results/paper/stats/{table}.parquet')
    >>> profiled({"profile": "paper"}, "reports")
    'reports/paper'
    """
    profile = config["profile"]
    if profile == DEFAULT_PROFILE:
        return path
    top, _, rest = path.partition("/")
    return f"{top}/{profile}" + (f"/{rest}" if rest else "")


def reports_dir(config: dict[str, Any]) -> str:
    """The profile's ``reports`` folder (:func:`profiled`): its tables, figures and HTML report."""
    return profiled(config, "reports")


def report_file(config: dict[str, Any]) -> str:
    """The profile's HTML report."""
    return f"{reports_dir(config)}/report.html"


PREPARED = "results/prepared/{dataset}/{fold}"
RUN = "results/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}"
# The one file of a run directory that the workflow tracks: the `run` rule's output and every
# run reader's input. bench.results.write_run renames the whole directory (scores, metrics,
# curve, run.json, digests) into place in one step, so a run.json there means the rest is too,
# and each reader verifies the files it opens against their digests. One file per run, not four:
# Snakemake's cost per job grows with its files (docs/paper-scale.md).
RUN_RECORD = "run.json"
RUN_CONFIG = "results/configs/{experiment}/{dataset}/{method}.json"
FROZEN_CHECKED = "results/compare/{dataset}/frozen.ok"  # the frozen baselines reproduce here (check_frozen)
EVALUATED = "results/evaluated/{name}/{dataset}/{fold}.parquet"
STATS = "results/stats/{table}.parquet"
LOSS_CURVES = "results/figures/neuralndcg_curves.parquet"
SCALING_CSV = "results/perf/scaling.csv"
TABLE_FORMATS = ("md", "tex", "html")
FIGURE_FORMATS = ("png", "pdf")


def run_record(run_dir: str) -> str:
    """The file the workflow tracks for the run in ``run_dir`` (:data:`RUN_RECORD`).

    >>> run_record("results/runs/pirank/syn-web/Fold1/ranknet/seed0")
    'results/runs/pirank/syn-web/Fold1/ranknet/seed0/run.json'
    """
    return f"{run_dir}/{RUN_RECORD}"


@_memo
def all_methods(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every method a run can name: the config's methods, the compared new losses, the
    recall heatmap's models per (m, k), the grid points of hyperparameter selection and the
    tuned methods' configurations and chosen-configuration runs (:func:`tuning_methods`)."""
    return {**config["methods"], **compare_methods(config), **heatmap_methods(config), **selection_methods(config),
            **tuning_methods(config)}


def method_names(config: dict[str, Any], *, kind: str | None = None, rule: str | None = None) -> list[str]:
    """The methods of one kind (of :data:`bench.config.kinds.RUN_KINDS`) or run by one rule, sorted;
    by rule they are the wildcard constraints of the run rules (``workflows/train.smk``)."""
    if (kind is None) == (rule is None):
        raise ValueError("give kind or rule")
    if kind is not None and kind not in kinds.RUN_KINDS:
        raise ValueError(f"kind must be one of {tuple(kinds.RUN_KINDS)}, got {kind!r}")
    if rule is not None and rule not in kinds.rules():
        raise ValueError(f"rule must be one of {kinds.rules()}, got {rule!r}")
    return sorted(m for m, spec in all_methods(config).items()
                  if (method_kind(spec) == kind if kind is not None else method_rule(spec) == rule))


def run_job_methods(config: dict[str, Any], rule: str) -> list[str]:
    """The methods whose runs ``rule``'s jobs train (its wildcard constraint, ``workflows/train.smk``):
    :func:`method_names` less a tuned method's configurations 2..B and its chosen configuration,
    whose runs the tuning's jobs train (:func:`tuning_record_of`); a run job would train
    ``<method>+tuned`` without the chosen configuration."""
    return [m for m in method_names(config, rule=rule)
            if tuning.parse_name(m) is None and tuning.base_of_tuned(m) is None]


def dataset_spec(config: dict[str, Any], dataset: str) -> dict[str, Any]:
    if dataset not in config["datasets"]:
        raise ConfigError(f"unknown dataset {dataset!r} (config key 'datasets')")
    return config["datasets"][dataset]


def fetched_inputs(config: dict[str, Any], dataset: str) -> list[str]:
    """The fetch flag a dataset's prepare step waits for (none for synthetic data)."""
    source = dataset_spec(config, dataset)["source"]
    return [] if source == "synthetic" else [f"results/fetched/{source}.done"]


def prepared_folds(config: dict[str, Any], dataset: str) -> list[str]:
    return [PREPARED.format(dataset=dataset, fold=f) for f in config["datasets"][dataset]["folds"]]


def table_outputs(config: dict[str, Any], table: str) -> list[str]:
    if table not in enabled_tables(config):
        raise ConfigError(f"table {table} is not enabled in profile {config['profile']} (config key 'tables.{table}')")
    return [f"{reports_dir(config)}/tables/{table}.{fmt}" for fmt in TABLE_FORMATS]


def figure_outputs(config: dict[str, Any], figure: str) -> list[str]:
    if figure not in enabled_figures(config):
        raise ConfigError(
            f"figure {figure} is not enabled in profile {config['profile']} (config key 'figures.{figure}')"
        )
    return [f"{reports_dir(config)}/figures/{figure}.{fmt}" for fmt in FIGURE_FORMATS]


def report_inputs(config: dict[str, Any]) -> list[str]:
    """Every enabled table and figure: the inputs of ``all`` and of the HTML report."""
    tables = [f for t in enabled_tables(config) for f in table_targets(config, t)]
    tables += [f for t in enabled_computed_tables(config) for f in computed_table_outputs(config, t)]
    return tables + [f for fig in enabled_figures(config) for f in figure_outputs(config, fig)] + [profiled(config, COVERAGE)]


def freeze_outputs(config: dict[str, Any]) -> list[str]:
    if "freeze" not in config:
        raise ConfigError("no 'freeze' section in the config: nothing to freeze")
    return [f"{frozen_dir(config, ds)}/manifest.json" for ds in freeze_datasets(config)]


REPRODUCED = "results/compare/{dataset}/reproduced.json"


def frozen_dir(config: dict[str, Any], dataset: str) -> str:
    return f"results/frozen/{config['profile']}/{dataset}"


def reproduction_outputs(config: dict[str, Any], exists: Callable[[str], bool]) -> list[str]:
    """The records of ``ltr-bench check-reproduced``, one per frozen dataset whose baselines exist
    (``exists(manifest path)``): the study trains the frozen methods' runs anyway, so it checks
    them against the frozen files at the cost of one evaluation."""
    if "freeze" not in config:
        return []
    return [REPRODUCED.format(dataset=ds) for ds in freeze_datasets(config)
            if exists(f"{frozen_dir(config, ds)}/manifest.json")]


def compare_outputs(config: dict[str, Any]) -> list[str]:
    if not config.get("compare", {}).get("losses"):
        raise ConfigError(
            "config key 'compare.losses' is empty: add the losses to compare, e.g. "
            "`--configfile config/compare-example.yaml` "
            "(see docs/compare.md, section 'The worked example')"
        )
    return [f"reports/compare/{ds}.{fmt}" for ds in compare_datasets(config) for fmt in ("md", "html")]


# ----------------------------------------------------------------------------- evaluations


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation target (a table, the recall heatmap, freeze, compare) evaluates."""

    experiment: str
    methods: list[str]
    seeds: list[int]
    folds: list[str]
    metrics: list[str]
    list_sizes: list[int]
    #: a method selected on validation -> ``(grid point, method whose runs train it)`` per point
    candidates: dict[str, list[tuple[str | None, str]]] = field(default_factory=dict)
    #: a tuned method -> its configurations' names (each trains under its own name: configuration
    #: 1 is the method itself), chosen on ``tuning_fold`` with ``tuning_seeds`` (bench.config.tuning)
    tuned: dict[str, list[str]] = field(default_factory=dict)
    tuning_fold: str | None = None
    tuning_seeds: list[int] = field(default_factory=list)

    def run_names(self, fold: str) -> list[tuple[str, str | None, str, int]]:
        """``(method, point, run method, seed)`` of every run the evaluation reads on ``fold``: a
        selected method's every grid point (``point`` its name); a tuned method's every configuration
        with the tuning seeds on the tuning fold (``point`` the configuration) and its chosen
        configuration's runs (``<method>+tuned``, no point) on every other fold and seed; any other
        method's own runs."""
        out: list[tuple[str, str | None, str, int]] = []
        for m in self.methods:
            if m in self.tuned:
                on_tuning = fold == self.tuning_fold
                for s in self.seeds:
                    if on_tuning and s in self.tuning_seeds:
                        out += [(m, c, c, s) for c in self.tuned[m]]
                    else:
                        out.append((m, None, tuning.tuned_name(m), s))
                continue
            for point, run in self.candidates.get(m, [(None, m)]):
                out += [(m, point, run, s) for s in self.seeds]
        return out

    def trained_on(self, fold: str) -> list[tuple[str, list[int]]]:
        """The runs the evaluation needs on ``fold``: ``(run method, seeds)``, each method once."""
        seeds: dict[str, list[int]] = {}
        for _, _, run, s in self.run_names(fold):
            seeds.setdefault(run, [])
            if s not in seeds[run]:
                seeds[run].append(s)
        return list(seeds.items())


@_memo
def evaluation(config: dict[str, Any], name: str, dataset: str) -> Evaluation:
    """The runs (experiment, methods, seeds, folds) and metrics of evaluation ``name`` on ``dataset``.

    A table's evaluated frames grade its own metrics and then the protocol's ``metrics`` (what
    every run of the protocol stores), so a metric the table does not show (LETOR's P@k) is
    still in its per-query frames."""
    folds = config["datasets"][dataset]["folds"]
    base = defaults_of(name)
    if base is not None:  # the tuned methods' defaults on the tuning fold: what tuning bought (tuning_summary)
        table = evaluation(config, base, dataset)
        return Evaluation(table.experiment, list(table.tuned), table.tuning_seeds, [tuning_fold(config, dataset)],
                          table.metrics, table.list_sizes)
    if name in TABLES:
        spec = config["tables"][name]
        graded = _dedupe([*spec["metrics"], *config["protocols"][spec["protocol"]].get("metrics", [])])
        candidates: dict[str, list[tuple[str | None, str]]] = {
            base: [(p.name, run) for p, run in pairs] for base, pairs in selection_candidates(config, name, dataset).items()}
        paper_rows: dict[str, list[tuple[str | None, str]]] = {  # no point: a paper row is always kept
            PAPER_ROW.format(base=base): [(None, rows[dataset][1])] for base, rows in paper_point_rows(config, name).items()}
        return _tuned(config, Evaluation(spec["protocol"], [*table_methods(config, name), *paper_rows],
                                         table_seeds(config, name), table_folds(config, name, dataset), graded,
                                         spec.get("list_sizes", []), {**candidates, **paper_rows}), dataset)
    if name == heatmap.FIGURE:
        spec = config["figures"][name]
        seeds = spec.get("seeds") or config["protocols"][spec["protocol"]]["seeds"]
        methods = _dedupe(run for _, run in heatmap_rows(config, dataset))
        return Evaluation(spec["protocol"], methods, seeds, [spec["fold"]] if spec.get("fold") else folds[:1],
                          heatmap.metric_names(spec), [])
    if name in ("freeze", COMPARE_EXPERIMENT):
        protocol = config["freeze"]["protocol"]
        experiment, methods = ((protocol, freeze_methods(config)) if name == "freeze"
                               else (COMPARE_EXPERIMENT, list(compare_methods(config))))
        return _tuned(config, Evaluation(experiment, methods, config["protocols"][protocol]["seeds"], folds,
                                         config["freeze"]["metrics"], []), dataset)
    raise ConfigError(f"no evaluation named {name!r}")


def evaluated_runs(config: dict[str, Any], name: str, dataset: str, fold: str) -> list[dict[str, Any]]:
    """``{method, seed, dir}`` of every run evaluation ``name`` reads on one fold; a method
    selected on validation has one per grid point and seed, each with its ``point`` (the
    evaluation keeps the chosen point's: :func:`bench.config.selection.keep_chosen`)."""
    return _runs_of(evaluation(config, name, dataset), dataset, fold)


def evaluated_inputs(config: dict[str, Any], name: str, dataset: str, fold: str) -> list[str]:
    """The files that stand for the runs evaluation ``name`` reads on one fold (:func:`run_inputs`)."""
    return run_inputs(config, [run["dir"] for run in evaluated_runs(config, name, dataset, fold)])


def _runs_of(ev: Evaluation, dataset: str, fold: str) -> list[dict[str, Any]]:
    out = []
    for m, point, run, s in ev.run_names(fold):
        entry = {"method": m, "seed": s,
                 "dir": RUN.format(experiment=ev.experiment, dataset=dataset, fold=fold, method=run, seed=s)}
        out.append({**entry, "point": point} if point is not None else entry)
    return out


def dataset_convention(config: dict[str, Any], dataset: str) -> str:
    """The evaluation convention (``bench.metrics.CONVENTIONS``) of ``dataset``.

    ``evaluation.convention`` other than ``dataset`` applies to every dataset; ``dataset``
    (the default) takes ``datasets.<name>.convention``, else the registry entry of the
    dataset's ``source`` (LETOR 3.0 sets ``letor3``, MQ2007/MQ2008 ``letor4``), else
    ``default`` (synthetic data, a source the registry does not know).
    """
    chosen = config.get("evaluation", {}).get("convention", DATASET_CONVENTION)
    if chosen != DATASET_CONVENTION:
        return chosen
    ds = config["datasets"][dataset]
    if ds.get("convention"):
        return ds["convention"]
    from bench.data.registry import REGISTRY

    entry = REGISTRY.get(ds.get("source", dataset))
    return entry.convention if entry is not None else "default"


@_memo
def evaluation_convention(config: dict[str, Any], name: str, dataset: str) -> str:
    """The convention evaluation ``name`` (a table, the recall heatmap, freeze, compare) grades
    ``dataset``'s test split by: ``evaluation.convention`` when it names one (it forces every
    evaluation), else the table's (or the heatmap's) own ``convention`` -- a paper's table graded
    by its paper's tool, e.g. ``tfranking`` for PiRank's --, else the dataset's
    (:func:`dataset_convention`). Validation is graded by the protocol's
    (:func:`protocol_convention`).
    """
    name = defaults_of(name) or name  # the tuned defaults are graded as their table
    if config.get("evaluation", {}).get("convention", DATASET_CONVENTION) == DATASET_CONVENTION:
        spec = (config.get("tables", {}).get(name) if name in TABLES
                else config.get("figures", {}).get(name) if name == heatmap.FIGURE else None)
        if spec and spec.get("convention"):
            return spec["convention"]
    return dataset_convention(config, dataset)


@_memo
def protocol_readers(config: dict[str, Any], protocol: str, dataset: str) -> list[str]:
    """The enabled tables (and the recall heatmap) that read ``protocol``'s runs on ``dataset``."""
    out = [t for t in enabled_tables(config)
           if config["tables"][t]["protocol"] == protocol and dataset in table_datasets(config, t)]
    spec = config.get("figures", {}).get(heatmap.FIGURE)
    if (spec and spec.get("enabled", True) and spec["protocol"] == protocol
            and dataset in [ds for ds, _ in heatmap_datasets(config)]):
        out.append(heatmap.FIGURE)
    return out


@_memo
def protocol_convention(config: dict[str, Any], protocol: str, dataset: str) -> str:
    """The convention a run of ``protocol`` on ``dataset`` grades its validation split by: early
    stopping, the tested checkpoint, selection, tuning and the recorded validation curves.

    ``evaluation.convention`` when it names one (it forces everything); else
    ``protocols.<p>.convention``; else the one convention every evaluation reading the
    protocol's runs on ``dataset`` grades its test split by (:func:`protocol_readers`,
    :func:`evaluation_convention`) -- a paper's table is validated as its paper's tool grades,
    e.g. PiRank's by TF-Ranking's rules, under which a validation query without a relevant
    document scores 0, not 1 --; else the dataset's. Runs are shared by every table of their
    protocol, so when those tables grade by different conventions the protocol must say which
    one validates (a :class:`ConfigError` naming ``protocols.<p>.convention`` otherwise).
    """
    if config.get("evaluation", {}).get("convention", DATASET_CONVENTION) != DATASET_CONVENTION:
        return dataset_convention(config, dataset)
    own = config["protocols"][protocol].get("convention")
    if own and own != DATASET_CONVENTION:
        return own
    if own == DATASET_CONVENTION:
        return dataset_convention(config, dataset)
    graded = {reader: evaluation_convention(config, reader, dataset)
              for reader in protocol_readers(config, protocol, dataset)}
    if len(set(graded.values())) > 1:
        listed = ", ".join(f"{reader} ({conv})" for reader, conv in graded.items())
        raise ConfigError(f"config key 'protocols.{protocol}.convention': the evaluations sharing the "
                          f"protocol's runs on '{dataset}' grade by different conventions ({listed}); "
                          "set it to the one validation (early stopping, checkpoint, selection) grades by")
    return next(iter(graded.values()), dataset_convention(config, dataset))


def metric_conventions(config: dict[str, Any], protocol: str, dataset: str) -> dict[str, Any]:
    """What a run of ``protocol`` on ``dataset`` is graded by: ``empty_query``, ``ties`` and,
    when it is not ``default``, the protocol's ``convention`` (:func:`protocol_convention`; absent
    for ``default``, so configs and protocol hashes of default-convention runs stay as they were)."""
    out = {k: v for k, v in config["evaluation"].items() if k != "convention"}
    convention = protocol_convention(config, protocol, dataset)
    if convention != "default":
        out["convention"] = convention
    return out


def evaluate_args(config: dict[str, Any], name: str, dataset: str) -> list[str]:
    """``ltr-bench evaluate``'s metric and convention arguments for evaluation ``name``."""
    ev, conventions = evaluation(config, name, dataset), config["evaluation"]
    args = ["--metrics", *ev.metrics, "--empty-query", conventions["empty_query"], "--ties", conventions["ties"],
            "--convention", evaluation_convention(config, name, dataset)]
    return args + (["--list-sizes", *map(str, ev.list_sizes)] if ev.list_sizes else [])


def evaluated_files(config: dict[str, Any], name: str, datasets: list[str]) -> list[str]:
    return [profiled(config, EVALUATED).format(name=name, dataset=ds, fold=f) for ds in datasets
            for f in evaluation(config, name, ds).folds]


def stats_args(config: dict[str, Any], table: str) -> list[str]:
    """``ltr-bench stats``' test arguments for ``table`` (:func:`table_stats`)."""
    st = table_stats(config, table)
    references = table_references(config, table)
    return ["--test", st["test"], "--correction", st["correction"], "--alpha", str(st["alpha"]),
            "--n-boot", str(st["n_boot"]), "--seed", str(st["seed"]),
            *(["--references", *references] if references else [])]


# ----------------------------------------------------------------------------- tables and figures


def method_labels(config: dict[str, Any], names: list[str]) -> list[dict[str, str]]:
    methods = all_methods(config)
    return [{"name": m, "label": methods[m].get("label", m)} for m in names]


def _stand_ins(config: dict[str, Any], spec: dict[str, Any]) -> dict[str, list[str]]:
    """Synthetic dataset -> the paper roles it stands in for in a table."""
    stands: dict[str, list[str]] = {}
    for role in [] if spec["datasets"] == "all" else spec["datasets"]:
        name = resolve_role(config, role, spec)
        if config["datasets"][name]["source"] == "synthetic" and role != name:
            stands.setdefault(name, []).append(role)
    return stands


def table_spec(config: dict[str, Any], table: str) -> dict[str, Any]:
    """What ``ltr-bench table`` renders: datasets (with roles), methods, metrics, marks, sources."""
    spec = config["tables"][table]
    roles, stands = table_roles(config, table), _stand_ins(config, spec)
    datasets = [{"name": ds, "label": config["datasets"][ds].get("label", ds), "role": roles.get(ds),
                 "stands_for": stands.get(ds, [])} for ds in table_datasets(config, table)]
    return {
        "name": table,
        "title": spec.get("title", table),
        "profile": config["profile"],
        "layout": "listsize" if table == "listsize_table3" else "methods",
        "datasets": datasets,
        "methods": table_rows(config, table),
        "metrics": spec["metrics"],
        "seeds": table_seeds(config, table),
        "list_sizes": spec.get("list_sizes", []),
        "l_train": spec.get("l_train", {}),
        "stats": table_stats(config, table),
        "evaluation": config["evaluation"],
        "conventions": {ds: evaluation_convention(config, table, ds) for ds in table_datasets(config, table)},
        "validation": validation_spec(config, spec["protocol"], table_datasets(config, table), table),
        "paper": spec.get("paper"),
        "source": TABLE_SOURCES.get(table),
        "note": sinkprop_ranking_note(config, table),
        "protocol": spec["protocol"],
        "choices": table_choices(config, table),
        "caption_metrics": list(spec.get("caption_metrics") or []),
        "notes": [*spec.get("notes", []), *training_notes(config, spec["protocol"]), *data_notes(config, table)],
        **_table_tuning(config, table),
    }


def table_rows(config: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """A table's rows in order: its methods (name, label), each selected method followed by its
    row at the paper's chosen point where it has one (:func:`paper_point_rows`; ``paper_as``: the
    method whose paper numbers it is compared with, ``points``: dataset label -> the point's label,
    ``reference``: shown beside the table's test family, never in it)."""
    rows = paper_point_rows(config, table)
    out: list[dict[str, Any]] = []
    for entry in method_labels(config, table_methods(config, table)):
        out.append(entry)
        base = entry["name"]
        if base in rows:
            paper = table_selects(config, table)[base]["paper"]
            keys = ", ".join(dict.fromkeys(k.rpartition(".")[2] for values in paper.values() for k in values))
            out.append({"name": PAPER_ROW.format(base=base), "label": f"{entry['label']} at the paper's {keys}",
                        "paper_as": base, "reference": True,
                        "points": {config["datasets"][ds].get("label", ds): point.label
                                   for ds, (point, _) in rows[base].items()}})
    return out


def table_references(config: dict[str, Any], table: str) -> list[str]:
    """The rows a table shows beside its test family, not in it (the paper's chosen points)."""
    return [PAPER_ROW.format(base=base) for base in paper_point_rows(config, table)]


def data_notes(config: dict[str, Any], table: str) -> list[str]:
    """The caption's sentences on how the table's datasets were filtered (the ARF filter), once per
    distinct filter, naming the datasets when they differ."""
    from bench.data.prepare import describe_arf_filter

    said: dict[str, list[str]] = {}
    for ds in table_datasets(config, table):
        entry = config["datasets"][ds]
        text = describe_arf_filter(entry.get("options"), entry["source"] == "synthetic")
        if text:
            said.setdefault(text, []).append(config["datasets"][ds].get("label", ds))
    return [text if len(said) == 1 else f"{', '.join(names)}: {text}" for text, names in said.items()]


def training_notes(config: dict[str, Any], protocol: str) -> list[str]:
    """The caption's sentence on which model is tested (``train.checkpoint``) and on what it was
    trained (``train.refit``: refit on train + validation, NeuralNDCG's "full training fold"), when
    the protocol does not test the best validation checkpoint of the first training."""
    train = {**schema.defaults("train"), **config["protocols"][protocol]["train"]}
    checkpoint, refit = train.get("checkpoint", "best"), train.get("refit", False)
    if checkpoint == "best" and not refit:
        return []
    if not refit:
        return ["Tested model: the last epoch's (train.checkpoint: last), not the best validation epoch's."]
    budget = ("for the number of epochs (or steps) the first training ran" if checkpoint == "last"
              else "for as many epochs (or steps) as the first training's best validation checkpoint had")
    return [f"Tested model: each run is refit from scratch on the training and validation splits together "
            f"(train.refit), with the same seed and schedule, {budget}, and its last model is tested; validation "
            "values (curves, selection) come from the first training."]


def table_stats(config: dict[str, Any], table: str) -> dict[str, Any]:
    """The statistics a table tests by: the top-level ``stats`` with the table's own ``stats`` over
    it key by key (a paper table testing as its paper did, e.g. PiRank's uncorrected t-test)."""
    return {**config["stats"], **(config["tables"][table].get("stats") or {})}


def validation_spec(config: dict[str, Any], protocol: str, datasets: list[str], reader: str) -> dict[str, Any]:
    """How ``protocol``'s runs on ``datasets`` grade validation (early stopping, the tested
    checkpoint, selection, validation curves), for a caption or a figure title: ``rules`` per
    dataset (:func:`bench.metrics.validation_rules` of :func:`protocol_convention`), ``conventions``
    per dataset, and the other evaluations that share the runs (``shared``, without ``reader``)."""
    from bench.metrics import validation_rules

    empty = config["evaluation"]["empty_query"]
    conventions = {ds: protocol_convention(config, protocol, ds) for ds in datasets}
    shared = _dedupe(r for ds in datasets for r in protocol_readers(config, protocol, ds) if r != reader)
    return {"protocol": protocol, "conventions": conventions,
            "rules": {ds: validation_rules(conv, empty) for ds, conv in conventions.items()}, "shared": shared}


def _table_tuning(config: dict[str, Any], table: str) -> dict[str, Any]:
    """A tuned table's facts for its caption (:func:`_tuning_caption_facts`) and its methods that
    the tuning did not tune (nothing to tune, or trained by a protocol section); none otherwise."""
    facts = _tuning_caption_facts(config, table)
    if facts is None:
        return {}
    tuned = tuned_entries(config, config["tables"][table]["protocol"])
    return {"tuning": facts, "untuned": [m for m in table_methods(config, table) if m not in tuned]}


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)


def table_choices(config: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The values a table's paper does not state or the suite sets otherwise, as the config marks
    them (``choices`` of its protocol and of its datasets; :mod:`bench.config.paper_choices`), each
    ``{scope, role, label, key, value, reason}`` with its configured value (a protocol key's values on
    the table's datasets joined by " / " where they differ; a method key only for the table's own
    methods). Only on the paper's own datasets: a table on stand-ins compares nothing with the paper."""
    from bench.config.paper_choices import dataset_settings, expand_keys, protocol_settings

    spec = config["tables"][table]
    roles = table_roles(config, table)
    if not roles:
        return []
    protocol = spec["protocol"]
    methods = set(table_methods(config, table))
    values: dict[str, list[str]] = {}
    for dataset in roles:
        model, train = protocol_for_dataset(config, protocol, dataset)
        for key, value in protocol_settings(config, protocol, model, train).items():
            values.setdefault(key, [])
            if _shown(value) not in values[key]:
                values[key].append(_shown(value))
    out = []
    for key, reason in expand_keys(config["protocols"][protocol].get("choices")).items():
        if key.startswith("methods."):
            name, _, path = key[len("methods."):].partition(".")
            if name not in methods:
                continue
            node: Any = config["methods"][name]
            for part in path.split(".") if path else []:
                node = node.get(part) if isinstance(node, dict) else None
            value = "default" if node is None else _shown(node)
            label = config["methods"][name].get("label", name)
        else:
            value, label = " / ".join(values.get(key, ["?"])), ""
        out.append({"scope": "protocol", "role": None, "label": label, "key": key, "value": value, "reason": reason})
    for dataset, role in roles.items():
        options = dataset_settings(config, dataset)
        for key, reason in expand_keys(config["datasets"][dataset].get("choices")).items():
            value = options.get(key, (config["datasets"][dataset].get("options") or {}).get(key[len("options."):]))
            out.append({"scope": "dataset", "role": role, "label": config["datasets"][dataset].get("label", dataset),
                        "key": key, "value": value, "reason": reason})
    return out


def sinkprop_ranking_note(config: dict[str, Any], table: str) -> str:
    """The caption's sentence on the methods SinkProp's own protocol trains in ``table``: how
    their test queries are ranked (the run's ``sinkprop_protocol.test_ranking``), since a row
    ranked by the short-cut Hungarian method is not the order of its scores; ``""`` if none.

    >>> cfg = {"tables": {"t": {"protocol": "p", "methods": ["sp"]}}, "methods": {"sp": {"label": "SinkProp"}},
    ...        "protocols": {"p": {"sinkprop_protocol": {"methods": ["sp"], "ranking_top": 10}}}}
    >>> sinkprop_ranking_note(cfg, "t")[:81]
    "SinkProp: SinkProp's own protocol; test queries ranked by the short-cut Hungarian"
    """
    protocol = config["tables"][table]["protocol"]
    labels = {m["name"]: m["label"] for m in method_labels(config, table_methods(config, table))}
    parts = []
    for method in table_methods(config, table):
        section = protocol_section(config, protocol, method, "sinkprop_protocol")
        if section is None:
            continue
        c = resolve_section("sinkprop_protocol", section, f"protocols.{protocol}.sinkprop_protocol")
        if c["test_ranking"] == "scores":
            how = "the order of its linear scores"
        else:
            top = c["ranking_top"]
            exact = ("an exact assignment over the whole list" if top is None else
                     f"the top {top} documents by expected rank assigned exactly, the rest in expected-rank order")
            how = f"the short-cut Hungarian method on the chosen weights' SinkProp matrix ({exact})"
        parts.append(f"{labels[method]}: SinkProp's own protocol; test queries ranked by {how}.")
    return " ".join(parts)


def figure_spec(config: dict[str, Any], figure: str) -> dict[str, Any]:
    """What ``ltr-bench figure`` draws besides its input files."""
    spec = config["figures"][figure]
    if figure in PAPER_FIGURE_SPECS:
        return PAPER_FIGURE_SPECS[figure](config)
    if figure == "scaling_figure":
        return {"steps": spec["steps"], "batch_lists": spec["batch_lists"]}
    if figure == "temperature_figure":
        dataset = resolve_role(config, spec["dataset"])
        return {"runs": figure_runs(config, "temperature_figure"), "metrics": spec.get("metrics") or ["ndcg@10"],
                "vali_list_size": spec["vali_list_size"], "smoothing": spec["smoothing"],
                "subject": figure_subject(config, spec["methods"], dataset),
                "graded": validation_spec(config, spec["protocol"], [dataset], figure)["rules"][dataset]}
    if figure == "listsize_figure":
        table = config["tables"][spec["table"]]
        dataset = table_datasets(config, spec["table"])[0]
        return {"dataset": dataset, "l_train": table["l_train"], "list_sizes": table["list_sizes"],
                "metrics": spec["metrics"], "subject": figure_subject(config, table["l_train"], dataset)}
    if figure == heatmap.FIGURE:
        return heatmap_spec(config)
    if figure == "quality_cost_figure":
        return quality_cost_figure_spec(config)
    if figure == "cd_diagram":
        return cd_diagram_spec(config)
    if figure == "neuralndcg_curves":
        return {"taus": list(spec["taus"])}
    return {}


def figure_subject(config: dict[str, Any], methods: Iterable[str], dataset: str) -> str:
    """What a figure's runs are, for its title: the losses its methods train (the method's name
    when it names no loss) on the dataset (its label).

    >>> cfg = {"methods": {"a": {"loss": "pirank_ndcg"}, "b": {"loss": "pirank_ndcg"}},
    ...        "datasets": {"syn-web": {"label": "syn-web"}}}
    >>> figure_subject(cfg, ["a", "b"], "syn-web")
    'loss pirank_ndcg on syn-web'
    """
    losses = _dedupe(config["methods"][m].get("loss", m) for m in methods)
    label = config["datasets"][dataset].get("label", dataset)
    return f"loss{'es' if len(losses) > 1 else ''} {', '.join(losses)} on {label}"


def figure_inputs(config: dict[str, Any], figure: str) -> list[str]:
    """The computed tables a figure reads (temperature, annealing: the runs named in its spec, by their records)."""
    figure_outputs(config, figure)  # enabled?
    spec = config["figures"][figure]
    if figure == "annealing_figure":
        return run_inputs(config, [d for _, dirs in figure_runs(config, figure) for d in dirs])
    if figure == "letor_curves":
        return evaluated_files(config, spec["table"], table_datasets(config, spec["table"]))
    if figure == "scaling_figure":
        return [profiled(config, SCALING_CSV)]
    if figure == "temperature_figure":
        return run_inputs(config, [d for _, dirs in figure_runs(config, "temperature_figure") for d in dirs])
    if figure == "listsize_figure":
        return [profiled(config, STATS).format(table=spec["table"])]
    if figure == heatmap.FIGURE:
        return evaluated_files(config, figure, [ds for ds, _ in heatmap_datasets(config)])
    if figure == "quality_cost_figure":
        return [profiled(config, QUALITY_COST)]
    if figure == "cd_diagram":
        return cd_diagram_inputs(config)
    return [profiled(config, LOSS_CURVES)]


def figure_reads_inputs(figure: str) -> bool:
    """Whether ``ltr-bench figure`` gets its inputs as ``--input`` (temperature reads its spec)."""
    return figure not in ("temperature_figure", "annealing_figure")


def loss_curves_args(config: dict[str, Any]) -> list[str]:
    spec = config["figures"]["neuralndcg_curves"]
    return ["--taus", *map(str, spec["taus"]), "--points", str(spec["points"])]


def perf_args(config: dict[str, Any]) -> list[str]:
    """``ltr-bench perf scaling``'s arguments for the scaling figure."""
    spec = config["figures"]["scaling_figure"]
    return ["--lengths", ",".join(map(str, spec["sizes"])), "--batch", str(spec["batch_lists"]),
            "--steps", str(spec["steps"]), "--k", str(spec["k"]), "--n-features", str(spec["n_features"]),
            "--max-seconds", str(spec["max_seconds"]), "--losses", ",".join(spec["losses"]) or "none"]


def compare_spec(config: dict[str, Any], dataset: str) -> dict[str, Any]:
    """What ``ltr-bench compare-table`` needs: the frozen protocol, metrics, stats, labels, the
    torch threads (platform facts) and what each compared loss is (its ledger record)."""
    labels = {m: s.get("label", m) for m, s in all_methods(config).items()}
    tuned = tuned_entries(config, COMPARE_EXPERIMENT)
    budget = tuning.budget(config)
    return {"dataset": dataset, "profile": config["profile"], "metrics": config["freeze"]["metrics"],
            "protocol": study_protocol(config, config["freeze"]["protocol"], dataset),
            "stats": config["stats"], "labels": labels, "threads": config["threads"],
            "new_specs": {m: {"loss": s["loss"], "params": s["params"], "label": s.get("label", m),
                              "budget": budget if m in tuned else 1}
                          for m, s in compare_methods(config).items()}}


# ----------------------------------------------------------------------------- the recall heatmaps (ARF Figs. 2-6)
# bench.config.heatmap: which models a method trains over the grid, their names and entries


def _heatmap_section(config: dict[str, Any]) -> dict[str, Any] | None:
    spec = config.get("figures", {}).get(heatmap.FIGURE)
    return spec if spec and spec.get("enabled", True) else None


def heatmap_protocol(config: dict[str, Any]) -> str | None:
    """The protocol the recall heatmap's models train under (None: the figure is off)."""
    spec = _heatmap_section(config)
    return None if spec is None else spec["protocol"]


@_memo
def heatmap_methods(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every model the recall heatmap trains per (m, k), as a method entry (none when it is off)."""
    spec = _heatmap_section(config)
    return {} if spec is None else heatmap.derived_methods(config["methods"], spec)


def heatmap_datasets(config: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """``(dataset, [paper roles it draws])`` of the heatmap, in order; roles resolved (the
    figure's ``roles``, then the global ones), two roles on one dataset drawn once."""
    spec = config["figures"][heatmap.FIGURE]
    out: dict[str, list[str]] = {}
    for role in spec["datasets"]:
        out.setdefault(resolve_role(config, role, spec), []).append(role)
    return list(out.items())


def _selection(config: dict[str, Any], protocol: str, dataset: str, method: str) -> str:
    """The validation metric a catalogue method's runs select on, on ``dataset``."""
    _, train = protocol_for_dataset(config, protocol, dataset)
    own = config["methods"][method].get("train", {})
    return own.get("early_stopping_metric") or train.get("early_stopping_metric") \
        or schema.defaults("train")["early_stopping_metric"]


@_memo
def heatmap_rows(config: dict[str, Any], dataset: str) -> list[tuple[heatmap.Row, str]]:
    """Every row of the heatmap on ``dataset`` with the method whose runs train it: the catalogue
    method itself when it is that model (same cut-offs and selection metric: the run the ARF
    table trains), else the derived model (:func:`bench.config.heatmap.derived_spec`)."""
    spec = config["figures"][heatmap.FIGURE]
    out = []
    for base in spec["methods"]:
        entry = config["methods"][base]
        selection = _selection(config, spec["protocol"], dataset, base)
        for row in heatmap.training_rows(base, entry["params"], spec["grid"]):
            out.append((row, base if heatmap.shares_base(row, entry, selection) else row.name))
    return out


def heatmap_spec(config: dict[str, Any]) -> dict[str, Any]:
    """What ``ltr-bench figure recall_heatmap`` draws: the grid (the columns) and one panel per
    (dataset, method), its rows the models trained per (m, k) and the ARF figures it redraws,
    and the evaluation convention of each dataset (the caption states it)."""
    spec = config["figures"][heatmap.FIGURE]
    panels = []
    for dataset, roles in heatmap_datasets(config):
        ds = config["datasets"][dataset]
        rows = heatmap_rows(config, dataset)
        for base in spec["methods"]:
            loss = config["methods"][base]["loss"]
            panels.append({
                "dataset": dataset, "dataset_label": ds.get("label", dataset),
                "stands_for": [] if ds["source"] in roles else roles,
                "method": base, "label": config["methods"][base].get("label", base),
                "title": heatmap.panel_title(base, config["methods"][base]),
                "paper_figures": sorted({heatmap.PAPER_FIGURES[(r, loss)] for r in roles
                                         if (r, loss) in heatmap.PAPER_FIGURES}),
                "rows": [{"method": run, "m": row.m, "k": row.k, "label": row.title}
                         for row, run in rows if row.base == base],
            })
    conventions = {dataset: evaluation_convention(config, heatmap.FIGURE, dataset) for dataset, _ in heatmap_datasets(config)}
    return {"metric": heatmap.RECALL, "grid": [list(p) for p in heatmap.grid_pairs(spec)], "panels": panels,
            "conventions": conventions, "evaluation": config["evaluation"], "notes": heatmap_selection_notes(config)}


def heatmap_selection_notes(config: dict[str, Any]) -> list[str]:
    """A sentence per heatmap method that a table of the heatmap's protocol selects on validation:
    the heatmap trains it at its configured values at every (m, k) (ARF's Figs. 2-6 do not say
    which temperature they used; ARF Table 2 selects L_Relax's)."""
    spec = config["figures"][heatmap.FIGURE]
    out = []
    for method in spec["methods"]:
        entry = config["methods"][method]
        for table in enabled_tables(config):
            select = table_selects(config, table).get(method)
            if config["tables"][table]["protocol"] != spec["protocol"] or not select:
                continue
            keys = list(select["grid"])
            values = {**{f"params.{k}": v for k, v in _signature_defaults(entry).items()},
                      **{k: _entry_value(entry, k) for k in keys if _entry_value(entry, k) is not None}}
            shown = ", ".join(f"{k.rpartition('.')[2]} = {_shown(values.get(k, 'the default'))}" for k in keys)
            out.append(f"{entry.get('label', method)} is trained at its configured {shown} at every (m, k); "
                       f"{table} selects {', '.join(k.rpartition('.')[2] for k in keys)} on validation, "
                       "which the heatmap does not repeat per point.")
            break
    return out


# ----------------------------------------------------------------------------- computed tables (issue 26)

TOY_SORT = "results/tables/neuralsort_toy.parquet"
COVERAGE = "reports/coverage.html"  # docs/coverage.md as a page of the report
REPORT_CAPTIONS = "results/report/captions"  # each table's and figure's title and caption (workflows/report/*.rst)


def coverage_args(config: dict[str, Any]) -> list[str]:
    """``ltr-bench coverage``'s ``--enabled`` and ``--profile``: the targets this profile builds."""
    names = [*enabled_tables(config), *enabled_computed_tables(config), *enabled_figures(config)]
    return ["--enabled", *names, "--profile", config["profile"]]


def enabled_computed_tables(config: dict[str, Any]) -> list[str]:
    """The enabled entries of ``computed_tables:``, in :data:`COMPUTED_TABLES` order."""
    section = config.get("computed_tables", {})
    return [t for t in COMPUTED_TABLES if t in section and section[t].get("enabled", True)]


def computed_table_outputs(config: dict[str, Any], name: str) -> list[str]:
    if name not in enabled_computed_tables(config):
        raise ConfigError(f"table {name} is not enabled in profile {config['profile']} "
                          f"(config key 'computed_tables.{name}')")
    return [f"{reports_dir(config)}/tables/{name}.{fmt}" for fmt in TABLE_FORMATS]


def study_datasets(config: dict[str, Any]) -> list[str]:
    """Every dataset the profile prepares: the enabled ones, then those its enabled tables and
    figures reach through a role (the ARF-filtered copies are disabled but used by ARF's tables)."""
    names = enabled_datasets(config) + [ds for t in enabled_tables(config) for ds in table_datasets(config, t)]
    figures = config.get("figures", {})
    names += [resolve_role(config, figures[f]["dataset"]) for f in enabled_figures(config) if "dataset" in figures[f]]
    if heatmap.FIGURE in enabled_figures(config):
        names += [dataset for dataset, _ in heatmap_datasets(config)]
    return _dedupe(names)


def _table_runs(config: dict[str, Any], key: str) -> tuple[str, list[dict[str, Any]]]:
    """The dataset and the runs (method, seed, dir) of a statistics table on it, for the targets
    that read a table's own runs (config key ``key`` with ``table`` and ``dataset``, a role)."""
    section, name = key.rsplit(".", 1)
    spec = config[section][name]
    table = spec["table"]
    if table not in enabled_tables(config):
        raise ConfigError(f"config key '{key}.table': {table!r} is not an enabled table")
    dataset = resolve_role(config, spec["dataset"], config["tables"][table])
    if dataset not in table_datasets(config, table):
        raise ConfigError(f"config key '{key}.dataset': {spec['dataset']!r} is not a "
                          f"dataset of table {table} ({table_datasets(config, table)})")
    ev = evaluation(config, table, dataset)
    shown_only = set(table_references(config, table))  # a paper's point: its runs are a grid point's
    return dataset, [run for f in ev.folds for run in _runs_of(ev, dataset, f) if run["method"] not in shown_only]


def _cost_runs(config: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """``arf_table9``: the dataset and the runs (method, seed, dir) of its source table on it."""
    return _table_runs(config, "computed_tables.arf_table9")


def computed_table_inputs(config: dict[str, Any], name: str) -> list[str]:
    """The files a computed table reads: the toy table, the prepared folds, or the runs' records."""
    computed_table_outputs(config, name)  # enabled?
    kind = COMPUTED_TABLES[name][0]
    if kind == "ranking":
        return ranking_table_inputs(config)
    if kind == "toy_sort":
        return [profiled(config, TOY_SORT)]
    if kind == "datasets":
        return [d for ds in study_datasets(config) for d in prepared_folds(config, ds)]
    dataset, runs = _cost_runs(config)
    table = config["computed_tables"][name]["table"]
    return _dedupe([*run_inputs(config, [r["dir"] for r in runs]), *table_records(config, table, [dataset])])


def computed_table_spec(config: dict[str, Any], name: str) -> dict[str, Any]:
    """What ``ltr-bench computed-table`` renders besides its input files."""
    spec = config["computed_tables"][name]
    kind, source = COMPUTED_TABLES[name]
    out: dict[str, Any] = {"name": name, "kind": kind, "title": spec.get("title", name), "source": source,
                           "profile": config["profile"], "paper": spec.get("paper")}
    if kind == "toy_sort":
        out["taus"] = list(spec["taus"])
    elif kind == "datasets":
        compared = table_roles(config, spec["compare_table"]) if spec["compare_table"] in enabled_tables(config) else {}
        out["datasets"] = [{"name": ds, "label": config["datasets"][ds].get("label", ds),
                            "source": config["datasets"][ds]["source"], "role": compared.get(ds),
                            "folds": prepared_folds(config, ds)} for ds in study_datasets(config)]
    elif kind == "ranking":
        out.update(ranking_table_spec(config))
    else:
        dataset, runs = _cost_runs(config)
        table = spec["table"]
        _, train = protocol_for_dataset(config, config["tables"][table]["protocol"], dataset)
        out.update({"dataset": dataset, "label": config["datasets"][dataset].get("label", dataset),
                    "role": table_roles(config, table).get(dataset), "runs": runs,
                    "selection": table_records(config, table, [dataset]),
                    "methods": method_labels(config, table_methods(config, table)),
                    "batch_size": train["batch_size"], "list_size": train["list_size"]})
    return out


# ----------------------------------------------------------------------------- paper figures (issue 26)


def figure_runs(config: dict[str, Any], figure: str) -> list[list]:
    """``[[label, [run dir per seed]], ...]`` of a figure drawn from run curves, in legend order."""
    spec = config["figures"][figure]
    dataset = resolve_role(config, spec["dataset"])
    fold = spec.get("fold") or config["datasets"][dataset]["folds"][0]
    seeds = spec.get("seeds") or config["protocols"][spec["protocol"]]["seeds"]
    return [[config["methods"][m].get("label", m),
             [RUN.format(experiment=spec["protocol"], dataset=dataset, fold=fold, method=m, seed=s) for s in seeds]]
            for m in spec["methods"]]


def _annealing_spec(config: dict[str, Any]) -> dict[str, Any]:
    """PiRank Fig. 13: the runs, which of them the paper highlights, the schedule of each."""
    spec = config["figures"]["annealing_figure"]
    methods = config["methods"]
    for key in ("annealed", "high_tau"):
        if spec[key] not in spec["methods"]:
            raise ConfigError(f"config key 'figures.annealing_figure.{key}': {spec[key]!r} is not one of its methods")
    dataset = resolve_role(config, spec["dataset"])
    return {"runs": figure_runs(config, "annealing_figure"), "metric": spec["metric"],
            "graded": validation_spec(config, spec["protocol"], [dataset], "annealing_figure")["rules"][dataset],
            "annealed": methods[spec["annealed"]].get("label", spec["annealed"]),
            "high_tau": methods[spec["high_tau"]].get("label", spec["high_tau"]),
            "taus": {methods[m].get("label", m): (methods[m].get("params") or {}).get("tau") for m in spec["methods"]}}


def _letor_curves_spec(config: dict[str, Any]) -> dict[str, Any]:
    """SinkProp Fig. 2: the LETOR table's datasets (with their paper role), methods and NDCG@1..k."""
    spec = config["figures"]["letor_curves"]
    table = spec["table"]
    if table not in enabled_tables(config):
        raise ConfigError(f"config key 'figures.letor_curves.table': {table!r} is not an enabled table")
    roles = table_roles(config, table)
    return {"table": table, "metrics": [f"ndcg@{k}" for k in range(1, spec["max_k"] + 1)],
            "datasets": [{"name": ds, "label": config["datasets"][ds].get("label", ds), "role": roles.get(ds)}
                         for ds in table_datasets(config, table)],
            "methods": method_labels(config, table_methods(config, table)),
            "paper": config["tables"][table].get("paper")}


PAPER_FIGURE_SPECS = {"annealing_figure": _annealing_spec, "letor_curves": _letor_curves_spec}


# ----------------------------------------------------------------------------- hyperparameter selection (issue 32)
# bench.config.selection: the grids, their points and names; here: which runs a point reuses on
# a dataset, the `select` stage's files and what it and the tables are given

SELECTION = "results/selection/{table}/{dataset}/{fold}.json"
SELECTION_SUFFIX = "_selection"  # reports/tables/<table>_selection.*: every grid point


def table_selects(config: dict[str, Any], table: str) -> dict[str, dict[str, Any]]:
    """``tables.<table>.select``: method -> ``{grid, metric?, paper?}`` (empty: nothing selected;
    a method set to null, as a profile drops a grid it inherits, is not selected)."""
    return {m: s for m, s in (config["tables"][table].get("select") or {}).items() if s is not None}


def selection_grid(config: dict[str, Any], table: str) -> dict[str, list[selection.Point]]:
    """Each selected method of ``table`` with its grid points, in the config's order."""
    return {m: selection.grid_points(m, s["grid"]) for m, s in table_selects(config, table).items()}


def selection_point_spec(config: dict[str, Any], table: str, point: selection.Point) -> dict[str, Any]:
    """The method entry a grid point of ``table`` trains (:func:`bench.config.selection.point_spec`)."""
    entry = config["methods"][point.base]
    metric = table_selects(config, table)[point.base].get("metric")
    return selection.point_spec(entry, point, metric, method_kind(entry))


@_memo
def selection_methods(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every grid point of an enabled table, by name, as a method entry."""
    return {p.name: selection_point_spec(config, table, p)
            for table in enabled_tables(config) for points in selection_grid(config, table).values() for p in points}


def effective_entry(config: dict[str, Any], protocol: str, dataset: str, spec: dict[str, Any]) -> dict[str, Any]:
    """What a run of method entry ``spec`` trains with under ``protocol`` on ``dataset``: a neural
    method's model merged over the protocol's and its ``train`` over the protocol's and the
    schema's defaults; a GBDT or linear method's early-stopping metric filled from the
    protocol's; no label. Two entries with the same effective entry train the same run (up to
    the seed stream, which follows the method's name: :func:`bench.seeds.derive_seed`)."""
    model, train = protocol_for_dataset(config, protocol, dataset)
    train = {**schema.defaults("train"), **train}
    out = {k: copy.deepcopy(v) for k, v in spec.items() if k != "label"}
    out.setdefault("params", {})
    if "loss" in spec:
        out["model"] = merged_model(model, spec.get("model"))
        out["train"] = {**train, **(spec.get("train") or {})}
    else:
        out.setdefault("early_stopping_metric", train["early_stopping_metric"])
    return out


@_memo
def selection_candidates(config: dict[str, Any], table: str,
                         dataset: str) -> dict[str, list[tuple[selection.Point, str]]]:
    """Per selected method of ``table``: each grid point with the method whose runs train it on
    ``dataset``. A point that trains what another method already trains under the table's
    protocol (the same effective entry, :func:`effective_entry`) reuses that method's runs: the
    table's method itself first, then the methods of the enabled tables and figures of the
    protocol (:func:`protocol_methods`), in the catalogue's order (ARF Tables 6-8's
    ``arf_tau0.8`` is the point ``arf+tau=0.8+lr=0.001`` of ARF Table 2 at the protocol's lr);
    methods of a protocol section (SinkProp's own protocol) are never reused. Else the point
    trains under its own name."""
    selects = table_selects(config, table)
    if not selects:
        return {}
    protocol = config["tables"][table]["protocol"]
    sectioned = {m for key in kinds.protocol_kinds() for m in (config["protocols"][protocol].get(key) or {})
                 .get("methods", [])}
    trained = protocol_methods(config, protocol) | set(selects)
    known = [(m, effective_entry(config, protocol, dataset, spec)) for m, spec in config["methods"].items()
             if m in trained and m not in sectioned]
    out = {}
    for base, points in selection_grid(config, table).items():
        order = sorted(known, key=lambda item: item[0] != base)  # the method itself first (a stable sort)
        pairs = []
        for point in points:
            mine = effective_entry(config, protocol, dataset, selection_point_spec(config, table, point))
            pairs.append((point, next((m for m, eff in order if eff == mine), point.name)))
        out[base] = pairs
    return out


#: the row of a selected method at the paper's chosen point (:func:`paper_point_rows`)
PAPER_ROW = "{base}@paper"


def _first_role(config: dict[str, Any], table: str, dataset: str) -> str | None:
    """The first of ``table``'s paper roles that ``dataset`` plays (its real source or a stand-in)."""
    spec = config["tables"][table]
    roles = [] if spec["datasets"] == "all" else spec["datasets"]
    return next((role for role in roles if resolve_role(config, role, spec) == dataset), None)


def _entry_value(entry: dict[str, Any], path: str) -> Any:
    """The value at key path ``path`` (``train.lr``, ``params.tau``) of an effective method entry."""
    value: Any = entry
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


@_memo
def paper_point_rows(config: dict[str, Any], table: str) -> dict[str, dict[str, tuple[selection.Point, str]]]:
    """Per selected method of ``table`` whose ``paper`` entry names the values its paper chose: on
    each dataset, the grid point at those values (every other grid key at the method's own value
    under the protocol, e.g. the protocol's lr) and the method whose runs train it
    (:func:`selection_candidates`). The table shows it as the row ``<method>@paper`` beside the
    validation-selected one: a paper whose rows equal its best-on-test grid rows (ARF Table 2) is then
    compared like with like. A dataset takes the value of the first role it plays in the table (a
    stand-in's too). Only methods with such a point on every dataset of the table get the row."""
    protocol = config["tables"][table]["protocol"]
    out: dict[str, dict[str, tuple[selection.Point, str]]] = {}
    for base, select in table_selects(config, table).items():
        paper = select.get("paper") or {}
        rows = {}
        for dataset in table_datasets(config, table):
            values = paper.get(_first_role(config, table, dataset) or dataset)
            if not values:
                break
            own = effective_entry(config, protocol, dataset, config["methods"][base])
            wanted = {k: values[k] if k in values else _entry_value(own, k) for k in select["grid"]}
            pair = next(((point, run) for point, run in selection_candidates(config, table, dataset)[base]
                         if all(v == wanted[k] for k, v in point.settings)), None)
            if pair is None:
                break
            rows[dataset] = pair
        else:
            if rows:
                out[base] = rows
    return out


@_memo
def protocol_methods(config: dict[str, Any], protocol: str) -> set[str]:
    """The catalogue methods the enabled tables and figures train under ``protocol`` (a figure
    with a ``protocol`` and ``methods``: the temperature, annealing and heatmap figures)."""
    out = {m for t in enabled_tables(config) if config["tables"][t]["protocol"] == protocol
           for m in table_methods(config, t)}
    figures = config.get("figures", {})
    return out | {m for f in enabled_figures(config) if figures[f].get("protocol") == protocol
                  for m in figures[f].get("methods", [])}


def selection_metric(config: dict[str, Any], table: str, dataset: str, method: str) -> str:
    """The validation metric a selected method's points are compared by on ``dataset``: the
    select entry's ``metric``, else the method's own early-stopping metric there."""
    chosen = table_selects(config, table)[method].get("metric")
    if chosen:
        return chosen
    eff = effective_entry(config, config["tables"][table]["protocol"], dataset, config["methods"][method])
    return eff["train"]["early_stopping_metric"] if "loss" in eff else eff["early_stopping_metric"]


def selection_files(config: dict[str, Any], table: str, datasets: list[str] | None = None) -> list[str]:
    """The ``select`` stage's records of ``table`` (one per dataset and fold; none: nothing selected)."""
    if not table_selects(config, table):
        return []
    pattern = profiled(config, SELECTION)
    return [pattern.format(table=table, dataset=ds, fold=f) for ds in datasets or table_datasets(config, table)
            for f in table_folds(config, table, ds)]


def table_records(config: dict[str, Any], table: str, datasets: list[str] | None = None) -> list[str]:
    """Every record that says which runs of ``table`` count: its grid selections' and its tuning's."""
    return selection_files(config, table, datasets) + table_tuning_records(config, table, datasets)


def evaluation_selection(config: dict[str, Any], name: str, dataset: str, fold: str) -> list[str]:
    """The selection record an evaluation of ``name`` on one fold keeps the chosen points by."""
    if name not in TABLES or not table_selects(config, name):
        return []
    return [profiled(config, SELECTION).format(table=name, dataset=dataset, fold=fold)]


def evaluation_records(config: dict[str, Any], name: str, dataset: str, fold: str) -> list[str]:
    """Every record an evaluation of ``name`` on one fold keeps the chosen runs by: its table's
    selection record (:func:`evaluation_selection`) and, on the tuning fold, the tuning record
    of each tuned method (:func:`tuning_records`)."""
    tuned = tuning_records(config, name, dataset) if fold == tuning_fold(config, dataset) else []
    return evaluation_selection(config, name, dataset, fold) + tuned


def select_spec(config: dict[str, Any], table: str, dataset: str, fold: str) -> dict[str, Any]:
    """What ``ltr-bench select`` compares on one fold: per selected method, its metric and every
    grid point with its settings and its runs' directories (one per seed)."""
    ev = evaluation(config, table, dataset)
    if fold not in ev.folds:
        raise ConfigError(f"table {table} does not evaluate fold {fold!r} of {dataset} (folds: {ev.folds})")
    methods = {}
    for base, pairs in selection_candidates(config, table, dataset).items():
        methods[base] = {"metric": selection_metric(config, table, dataset, base), "points": [
            {"name": p.name, "label": p.label, "settings": p.values, "run": run,
             "dirs": [RUN.format(experiment=ev.experiment, dataset=dataset, fold=fold, method=run, seed=s)
                      for s in ev.seeds]} for p, run in pairs]}
    return {"table": table, "dataset": dataset, "fold": fold, "seeds": ev.seeds, "methods": methods}


def select_inputs(config: dict[str, Any], table: str, dataset: str, fold: str) -> list[str]:
    """The runs ``ltr-bench select`` reads (their ``run.json`` and ``curve.csv``): every grid point's,
    each tracked by its :func:`run_record`."""
    spec = select_spec(config, table, dataset, fold)
    return run_inputs(config, [d for m in spec["methods"].values() for p in m["points"] for d in p["dirs"]])


def selection_table_outputs(config: dict[str, Any], table: str) -> list[str]:
    """``reports/tables/<table>_selection.*``: every grid point's or configuration's validation mean
    (none: nothing selected or tuned)."""
    table_outputs(config, table)  # enabled?
    if not table_selects(config, table) and not table_tuning_records(config, table):
        return []
    return [f"{reports_dir(config)}/tables/{table}{SELECTION_SUFFIX}.{fmt}" for fmt in TABLE_FORMATS]


def table_targets(config: dict[str, Any], table: str) -> list[str]:
    """What the table's named target builds: the table and, when it selects, its selection table."""
    return table_outputs(config, table) + selection_table_outputs(config, table)


def selection_labels(config: dict[str, Any], table: str) -> dict[str, str]:
    """Selected method -> its label in the table."""
    return {m["name"]: m["label"] for m in method_labels(config, list(table_selects(config, table)))}


def selection_table_spec(config: dict[str, Any], table: str) -> dict[str, Any]:
    """What ``ltr-bench selection-table`` renders besides the records: titles, labels, the grid
    keys and the values the paper chose where it reveals them (per dataset role)."""
    spec = config["tables"][table]
    roles, stands = table_roles(config, table), _stand_ins(config, spec)
    return {
        "name": f"{table}{SELECTION_SUFFIX}", "table": table, "profile": config["profile"],
        "title": f"{spec.get('title', table)}: hyperparameters selected on validation",
        "source": TABLE_SOURCES.get(table),
        "datasets": [{"name": ds, "label": config["datasets"][ds].get("label", ds), "role": roles.get(ds),
                      "stands_for": stands.get(ds, [])} for ds in table_datasets(config, table)],
        "methods": [{"name": m, "label": label, "keys": list(table_selects(config, table)[m]["grid"]),
                     "paper": copy.deepcopy(table_selects(config, table)[m].get("paper") or {})}
                    for m, label in selection_labels(config, table).items()] + _tuned_rows(config, table),
        "tuning": _tuning_caption_facts(config, table),
    }


def _tuned_rows(config: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The selection table's tuned methods: each with its searched keys (its space's paths)."""
    experiment = config["tables"][table]["protocol"]
    entries = tuned_entries(config, experiment)
    labels = {m["name"]: m["label"] for m in method_labels(config, table_methods(config, table))}
    return [{"name": m, "label": labels[m], "keys": list(tuning.method_space(config, *entries[m])), "paper": {},
             "tuned": True}
            for m in table_methods(config, table) if m in entries]


def _tuning_caption_facts(config: dict[str, Any], table: str) -> dict[str, Any] | None:
    """The tuning facts a tuned table's captions state: budget, sampler seed, split, seeds, shared space."""
    if not table_tuning_records(config, table):
        return None
    protocol = config["tables"][table]["protocol"]
    sec = tuning.section(config)
    return {"budget": tuning.budget(config), "seed": int(sec.get("seed") or 0),
            "folds": {ds: tuning_fold(config, ds) for ds in table_datasets(config, table)},
            "seeds": tuning_seeds(config, protocol),
            "space": {kind: tuning.describe_space({p: search_space.parse(d, f"tuning.space.{kind}.{p}")
                                                  for p, d in dims.items()})
                      for kind, dims in (sec.get("space") or {}).items()}}


# ----------------------------------------------------------------------------- equal-budget tuning (issue 40)
# bench.config.tuning: the budget, the search spaces and the configurations; here: which methods
# an experiment tunes, the runs each evaluation reads, and what the `tune`, `tuned_runs` and
# `tuning_summary` jobs are given

TUNING = "results/tuning/{experiment}/{dataset}/{method}.json"
TUNED_RUNS = TUNING  # with method <method>+tuned: the record of the chosen configuration's runs (rule tuned_runs)
TUNING_SUMMARY = "results/tuning/{table}.parquet"
DEFAULTS_SUFFIX = "+default"  # results/evaluated/<table>+default/...: the tuned methods' defaults (configuration 1)


def defaults_of(name: str) -> str | None:
    """The table whose tuned methods' defaults evaluation ``name`` is (``<table>+default``), else None.

    >>> defaults_of("unified_table+default"), defaults_of("unified_table")
    ('unified_table', None)
    """
    base = name[: -len(DEFAULTS_SUFFIX)] if name.endswith(DEFAULTS_SUFFIX) else None
    return base if base in TABLES else None


def tuning_fold(config: dict[str, Any], dataset: str) -> str:
    """The fold whose validation split tunes on ``dataset``: ``tuning.fold``, else its first fold."""
    return tuning.section(config).get("fold") or config["datasets"][dataset]["folds"][0]


def tuning_seeds(config: dict[str, Any], protocol: str) -> list[int]:
    """The seeds each configuration trains with on the tuning fold: ``tuning.seeds``, else the protocol's."""
    return list(tuning.section(config).get("seeds") or config["protocols"][protocol]["seeds"])


def tuning_protocol(config: dict[str, Any], dataset: str) -> dict[str, Any]:
    """What every side of a tuned comparison shares (the frozen protocol's ``tuning``): the budget,
    the sampler and its seed, the split and seeds that choose, and the shared dimensions."""
    sec = tuning.section(config)
    return {"budget": tuning.budget(config), "seed": int(sec.get("seed") or 0), "fold": tuning_fold(config, dataset),
            "seeds": sec.get("seeds"), "sampler": "scipy.stats.qmc.Halton(scramble=True), configuration 1 the default",
            "space": copy.deepcopy(sec.get("space") or {})}


@_memo
def _tuning_candidates(config: dict[str, Any], experiment: str) -> list[str]:
    """The methods ``experiment`` would tune if they have something to (:func:`tuned_entries`)."""
    protocol = experiment_protocol(config, experiment)
    if protocol not in tuning.tuned_protocols(config) or tuning.budget(config) < 2:
        return []
    if experiment == COMPARE_EXPERIMENT:
        return [compare_method_name(e) for e in config["compare"]["losses"]]
    names = [m for t in enabled_tables(config) if config["tables"][t]["protocol"] == protocol
             for m in table_methods(config, t)]
    if config.get("freeze", {}).get("protocol") == protocol:
        names += freeze_methods(config)
    sectioned = {m for key in kinds.protocol_kinds() for m in (config["protocols"][protocol].get(key) or {})
                 .get("methods", [])}
    return [m for m in _dedupe(names) if m not in sectioned]


@_memo
def tuned_entry(config: dict[str, Any], experiment: str, method: str) -> tuple[dict[str, Any], str] | None:
    """``(entry, config key)`` of ``method`` when ``experiment`` tunes it (:func:`tuned_entries`), else None."""
    if method not in _tuning_candidates(config, experiment):
        return None
    if experiment == COMPARE_EXPERIMENT:
        index = [compare_method_name(e) for e in config["compare"]["losses"]].index(method)
        entry, where = compare_methods(config)[method], f"compare.losses.{index}"
        if "search" not in entry:
            return None
    else:
        entry, where = config["methods"][method], f"methods.{method}"
    return (entry, where) if len(tuning_configurations(config, method, entry, where)) > 1 else None


@_memo
def tuned_entries(config: dict[str, Any], experiment: str) -> dict[str, tuple[dict[str, Any], str]]:
    """The methods ``experiment`` tunes, each with its entry and config key: under a tuned
    protocol, the methods its enabled tables and the frozen baselines train (not those a protocol
    section trains, nor those with nothing to tune); under ``compare``, the new losses given a
    ``search`` when the frozen protocol is tuned."""
    found = {m: tuned_entry(config, experiment, m) for m in _tuning_candidates(config, experiment)}
    return {m: found_m for m, found_m in found.items() if found_m is not None}


def tuning_configurations(config: dict[str, Any], method: str, entry: dict[str, Any],
                          where: str | None = None) -> list[tuning.Configuration]:
    """:func:`bench.config.tuning.configurations`, drawn once per process and (tuning section, method, entry)."""
    # not key-sorted: a space's dimensions are drawn in the order the config and registry declare them
    key = json.dumps([tuning.section(config), entry], default=str)
    return list(_configurations(key, method, where))


@functools.lru_cache(maxsize=4096)
def _configurations(key: str, method: str, where: str | None) -> tuple[tuning.Configuration, ...]:
    section, entry = json.loads(key)
    return tuple(tuning.configurations({"tuning": section}, method, entry, where))


def _tuned(config: dict[str, Any], ev: Evaluation, dataset: str) -> Evaluation:
    """``ev`` with its tuned methods' configurations, tuning fold and seeds filled in."""
    entries = {m: tuned_entry(config, ev.experiment, m) for m in ev.methods}
    tuned = {m: [c.name for c in tuning_configurations(config, m, *found)] for m, found in entries.items() if found}
    if not tuned:
        return ev
    return dataclasses.replace(ev, tuned=tuned, tuning_fold=tuning_fold(config, dataset),
                               tuning_seeds=tuning_seeds(config, experiment_protocol(config, ev.experiment)))


@_memo
def tuning_methods(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every run name tuning adds, as a method entry: each tuned method's configurations 2..B
    (``<method>+cfg<i>``) and its chosen configuration's runs (``<method>+tuned``, the method's
    entry: the configuration is read from the tuning record when its run config is written)."""
    out: dict[str, dict[str, Any]] = {}
    for experiment in tuning_experiments(config):
        for m, (entry, where) in tuned_entries(config, experiment).items():
            for c in tuning_configurations(config, m, entry, where)[1:]:
                out[c.name] = tuning.configuration_spec(entry, c)
            out[tuning.tuned_name(m)] = {k: copy.deepcopy(v) for k, v in entry.items() if k != "search"}
    return out


def tuning_experiments(config: dict[str, Any]) -> list[str]:
    """The experiments that may tune: the tuned protocols, and ``compare`` when it has losses."""
    out = [p for p in tuning.tuned_protocols(config) if p in config["protocols"]]
    if config.get("compare", {}).get("losses") and "freeze" in config:
        out.append(COMPARE_EXPERIMENT)
    return out


def tuned_method_names(config: dict[str, Any]) -> list[str]:
    """Every tuned method of every experiment, sorted (the ``tune`` rule's wildcard constraint)."""
    return sorted({m for experiment in tuning_experiments(config) for m in tuned_entries(config, experiment)})


def tuning_method_spec(config: dict[str, Any], experiment: str, method: str) -> dict[str, Any] | None:
    """The entry of a tuning run name of ``experiment`` (a configuration or ``<method>+tuned``), else None."""
    if experiment not in config["protocols"] and experiment != COMPARE_EXPERIMENT:
        return None
    parsed = tuning.parse_name(method)
    base = parsed[0] if parsed else tuning.base_of_tuned(method)
    found = tuned_entry(config, experiment, base) if base else None
    if base is None or found is None:
        return None
    entry, where = found
    if parsed is None:
        return {k: copy.deepcopy(v) for k, v in entry.items() if k != "search"}
    configs = tuning_configurations(config, base, entry, where)
    if not 1 < parsed[1] <= len(configs):
        return None
    return tuning.configuration_spec(entry, configs[parsed[1] - 1])


def tuning_records(config: dict[str, Any], name: str, dataset: str) -> list[str]:
    """The tuning records evaluation ``name`` on ``dataset`` keeps its tuned methods' chosen configurations by."""
    ev = evaluation(config, name, dataset)
    return [TUNING.format(experiment=ev.experiment, dataset=dataset, method=m) for m in ev.tuned]


def table_tuning_records(config: dict[str, Any], table: str, datasets: list[str] | None = None) -> list[str]:
    """Every tuning record of ``table`` (its tuned methods on each dataset; none: nothing tuned)."""
    return [r for ds in datasets or table_datasets(config, table) for r in tuning_records(config, table, ds)]


def _default_settings(config: dict[str, Any], protocol: str, dataset: str, entry: dict[str, Any],
                      paths: list[str]) -> dict[str, Any]:
    """Configuration 1's value of each searched key path: the entry's own, the protocol's
    ``train``/``model``, else the default the run takes (a loss's signature default read from its
    source; a GBDT library's parameter default of the schema); None where none is known (the
    library's own default)."""
    eff = effective_entry(config, protocol, dataset, {k: v for k, v in entry.items() if k != "search"})
    fallback = _signature_defaults(entry)
    out = {}
    for path in paths:
        head, _, key = path.partition(".")
        node = eff.get(head) if key else eff.get(path)
        value = node.get(key) if key and isinstance(node, dict) else (node if not key else None)
        out[path] = fallback.get(key) if value is None and head == "params" else value
    return out


def _signature_defaults(entry: dict[str, Any]) -> dict[str, Any]:
    """The parameter defaults a method's runs take when its entry sets none: a neural loss's
    (its signature, read from source: :mod:`bench.losses.hyperparameters`), a GBDT library's
    (the schema's ``gbdt_<library>`` params)."""
    if "gbdt" in entry:
        return dict(schema.definition(f"gbdt_{entry['gbdt']}")["properties"]["params"].get("default") or {})
    if "loss" not in entry:
        return {}
    from bench.losses import hyperparameters, registry

    try:
        signature = hyperparameters.from_source(registry.info(str(entry["loss"])).target)
    except (ValueError, hyperparameters.LossNotFound):
        return {}
    return signature.defaults() if signature is not None else {}


@_memo
def tune_spec(config: dict[str, Any], experiment: str, dataset: str, method: str) -> dict[str, Any]:
    """What ``ltr-bench tune`` trains and compares for one tuned method on one dataset: every
    configuration with its settings, its run config and the rule whose command trains it, and its
    runs on the tuning fold (one per tuning seed, trained from ``prepared``), the metric, the
    budget and the space (written into the record)."""
    found = tuned_entry(config, experiment, method)
    if found is None:
        raise ConfigError(f"method {method!r} is not tuned under {experiment!r} (config key 'tuning.protocols')")
    entry, where = found
    protocol = experiment_protocol(config, experiment)
    fold, seeds = tuning_fold(config, dataset), tuning_seeds(config, protocol)
    configs = tuning_configurations(config, method, entry, where)
    space = tuning.method_space(config, entry, where)
    eff = effective_entry(config, protocol, dataset, {k: v for k, v in entry.items() if k != "search"})
    metric = eff["train"]["early_stopping_metric"] if "loss" in eff else eff["early_stopping_metric"]
    points = []
    for c in configs:
        settings = c.values if c.index > 1 else _default_settings(config, protocol, dataset, entry, list(space))
        points.append({"name": c.name, "label": c.label, "settings": settings, "run": c.name,
                       "rule": run_rule(config, experiment, c.name),
                       "run_config": run_config(config, experiment, dataset, c.name),
                       "dirs": [RUN.format(experiment=experiment, dataset=dataset, fold=fold, method=c.name, seed=s)
                                for s in seeds]})
    return {"experiment": experiment, "dataset": dataset, "fold": fold, "seeds": seeds,
            "prepared": PREPARED.format(dataset=dataset, fold=fold),
            "tuning": {**tuning_protocol(config, dataset), "method_space": {p: d.as_config() for p, d in space.items()},
                       "space_text": tuning.describe_space(space)},
            "methods": {method: {"metric": metric, "points": points}}}


def tune_inputs(config: dict[str, Any], experiment: str, dataset: str, method: str) -> list[str]:
    """What ``ltr-bench tune`` needs: the tuning fold it trains the configurations on and, for a
    compared loss, the check that the frozen baselines reproduce (as a compare run needs it)."""
    fold = PREPARED.format(dataset=dataset, fold=tuning_fold(config, dataset))
    return [fold] + ([FROZEN_CHECKED.format(dataset=dataset)] if experiment == COMPARE_EXPERIMENT else [])


@_memo
def _tuning_runs(config: dict[str, Any], experiment: str, dataset: str) -> tuple[str, frozenset[int], dict[str, str]]:
    """``(tuning fold, tuning seeds, run name -> record)`` of ``experiment`` on ``dataset``: each
    configuration's name -> its tuning record, each chosen configuration's (``<method>+tuned``) ->
    the record of its runs (:data:`TUNED_RUNS`)."""
    if experiment not in tuning_experiments(config):
        return "", frozenset(), {}
    records: dict[str, str] = {}
    for method, (entry, where) in tuned_entries(config, experiment).items():
        record = TUNING.format(experiment=experiment, dataset=dataset, method=method)
        records.update((c.name, record) for c in tuning_configurations(config, method, entry, where))
        chosen = tuning.tuned_name(method)
        records[chosen] = TUNED_RUNS.format(experiment=experiment, dataset=dataset, method=chosen)
    return (tuning_fold(config, dataset), frozenset(tuning_seeds(config, experiment_protocol(config, experiment))),
            records)


def tuning_record_of(config: dict[str, Any], experiment: str, dataset: str, fold: str, method: str,
                     seed: int) -> str | None:
    """The record of the job that trains this run, when a tuning's job does, else None (a run job does).

    A tuned method is two jobs per dataset, each training its runs one after another: its
    tuning (rule ``tune``: every configuration, the method itself as configuration 1, on the
    tuning fold with the tuning seeds, then the choice) and its chosen configuration's runs
    (rule ``tuned_runs``: ``<method>+tuned`` on every other fold and seed any evaluation reads,
    :func:`tuned_run_keys`). Those runs have no job of their own; whatever reads one needs the
    record (:func:`run_input`)."""
    tuned_fold, seeds, records = _tuning_runs(config, experiment, dataset)
    record = records.get(method)
    if record is None:
        return None
    base = tuning.base_of_tuned(method)
    if base is None:
        return record if fold == tuned_fold and int(seed) in seeds else None
    if (fold, int(seed)) not in tuned_run_keys(config, experiment, dataset, base):
        raise ConfigError(f"run {method} of {experiment} on {dataset} {fold} seed {seed}: not among the chosen "
                          "configuration's runs (bench.config.plan.tuned_run_keys)")
    return record


def run_input(config: dict[str, Any], run_dir: str) -> str:
    """The file the workflow tracks for the run in ``run_dir`` (:data:`RUN`): the record of the
    tuning's job that trains it (:func:`tuning_record_of`), else its own :func:`run_record`,
    which its run job writes."""
    head, _, seed = run_dir.rpartition("/seed")
    experiment, dataset, fold, method = head.removeprefix("results/runs/").split("/", 3)
    return tuning_record_of(config, experiment, dataset, fold, method, int(seed)) or run_record(run_dir)


def run_inputs(config: dict[str, Any], run_dirs: Iterable[str]) -> list[str]:
    """:func:`run_input` of each run, each file once (a tuning record stands for all its runs)."""
    return list(dict.fromkeys(run_input(config, d) for d in run_dirs))


def _reading_tables(config: dict[str, Any]) -> list[str]:
    """The tables whose evaluations a study builds: the enabled ones and those an enabled figure or
    computed table reads (``table:``)."""
    named = [spec.get("table") for group in ("figures", "computed_tables")
             for spec in config.get(group, {}).values() if spec.get("enabled", True)]
    return _dedupe([*enabled_tables(config), *(t for t in named if t in config.get("tables", {}))])


@_memo
def tuned_run_keys(config: dict[str, Any], experiment: str, dataset: str, method: str) -> tuple[tuple[str, int], ...]:
    """``(fold, seed)`` of every run of ``<method>+tuned`` (``method`` tuned under ``experiment``)
    on ``dataset``: whatever any evaluation reads (a table, the frozen baselines, the compare
    page), in fold then seed order. One job trains them all (rule ``tuned_runs``), so that the
    runs are the same whichever target asks."""
    names = [t for t in _reading_tables(config)  # a table's runs are its protocol's experiment's
             if config["tables"][t]["protocol"] == experiment and dataset in table_datasets(config, t)]
    if "freeze" in config and experiment == config["freeze"]["protocol"] and dataset in freeze_datasets(config):
        names.append("freeze")
    if experiment == COMPARE_EXPERIMENT and dataset in compare_datasets(config):
        names.append(COMPARE_EXPERIMENT)
    chosen = tuning.tuned_name(method)
    keys = {(fold, s) for name in names for fold in evaluation(config, name, dataset).folds
            for _, _, run, s in evaluation(config, name, dataset).run_names(fold) if run == chosen}
    order = {f: i for i, f in enumerate(config["datasets"][dataset]["folds"])}
    return tuple(sorted(keys, key=lambda k: (order.get(k[0], len(order)), k[0], k[1])))


@_memo
def tuned_runs_spec(config: dict[str, Any], experiment: str, dataset: str, method: str) -> dict[str, Any]:
    """What ``ltr-bench tuned-runs`` needs for ``<method>+tuned``: the tuning record saying which
    configuration was chosen, the run config of each configuration (its method renamed
    ``<method>+tuned``; the chosen one is written to ``config_out`` and trains the runs), the rule
    whose command trains them, and the runs (:func:`tuned_run_keys`) with their prepared folds."""
    base = tuning.base_of_tuned(method)
    found = tuned_entry(config, experiment, base) if base else None
    if base is None or found is None:
        raise ConfigError(f"{method!r} is no tuned method's chosen configuration under {experiment!r}")
    entry, where = found
    configs = {}
    for c in tuning_configurations(config, base, entry, where):
        run = run_config(config, experiment, dataset, c.name)
        run["methods"] = {method: run["methods"][c.name]}
        configs[c.name] = run
    runs = [{"fold": f, "seed": s, "prepared": PREPARED.format(dataset=dataset, fold=f),
             "dir": RUN.format(experiment=experiment, dataset=dataset, fold=f, method=method, seed=s)}
            for f, s in tuned_run_keys(config, experiment, dataset, base)]
    return {"record": TUNING.format(experiment=experiment, dataset=dataset, method=base), "method": base,
            "run": method, "rule": run_rule(config, experiment, base), "configs": configs,
            "config_out": RUN_CONFIG.format(experiment=experiment, dataset=dataset, method=method), "runs": runs}


def tuning_job_runs(config: dict[str, Any], rule: str, experiment: str, dataset: str,
                    method: str) -> list[dict[str, Any]]:
    """The runs a tuning's job trains, in order, each as ``{rule, method, fold, seed, dir}``: a
    ``tune`` job's every configuration with each tuning seed (:func:`tune_spec`), a ``tuned_runs``
    job's chosen configuration on its folds and seeds (:func:`tuned_runs_spec`)."""
    if rule == "tune":
        spec = tune_spec(config, experiment, dataset, method)
        return [{"rule": p["rule"], "method": p["run"], "fold": spec["fold"], "seed": seed, "dir": d}
                for p in spec["methods"][method]["points"] for seed, d in zip(spec["seeds"], p["dirs"])]
    chosen = tuned_runs_spec(config, experiment, dataset, method)
    return [{"rule": chosen["rule"], "method": chosen["run"], "fold": r["fold"], "seed": r["seed"], "dir": r["dir"]}
            for r in chosen["runs"]]


def tuned_runs_inputs(config: dict[str, Any], experiment: str, dataset: str, method: str) -> list[str]:
    """What ``ltr-bench tuned-runs`` needs: the tuning record, the folds its runs train on and, for a
    compared loss, the check that the frozen baselines reproduce."""
    spec = tuned_runs_spec(config, experiment, dataset, method)
    frozen = [FROZEN_CHECKED.format(dataset=dataset)] if experiment == COMPARE_EXPERIMENT else []
    return [spec["record"], *_dedupe(r["prepared"] for r in spec["runs"]), *frozen]


def tuned_tables(config: dict[str, Any]) -> list[str]:
    """The enabled tables with a tuned method on some dataset."""
    return [t for t in enabled_tables(config) if table_tuning_records(config, t)]


def tuning_summary_inputs(config: dict[str, Any], table: str) -> list[str]:
    """What ``ltr-bench tuning-summary`` reads: the tuning records, the table's evaluated frames of
    the tuning folds (the chosen configurations' test values) and the defaults' frames."""
    out = []
    for ds in table_datasets(config, table):
        if not tuning_records(config, table, ds):
            continue
        fold = tuning_fold(config, ds)
        out += tuning_records(config, table, ds)
        out += [profiled(config, EVALUATED).format(name=table, dataset=ds, fold=fold),
                profiled(config, EVALUATED).format(name=table + DEFAULTS_SUFFIX, dataset=ds, fold=fold)]
    return out


def tuning_summary_spec(config: dict[str, Any], table: str) -> dict[str, Any]:
    """``ltr-bench tuning-summary``'s spec: per dataset its records and frames, the metrics."""
    datasets = []
    for ds in table_datasets(config, table):
        records = tuning_records(config, table, ds)
        if not records:
            continue
        fold = tuning_fold(config, ds)
        datasets.append({"dataset": ds, "fold": fold, "records": records,
                         "chosen": profiled(config, EVALUATED).format(name=table, dataset=ds, fold=fold),
                         "defaults": profiled(config, EVALUATED).format(name=table + DEFAULTS_SUFFIX, dataset=ds, fold=fold),
                         "seeds": evaluation(config, table, ds).tuning_seeds})
    return {"table": table, "metrics": config["tables"][table]["metrics"], "datasets": datasets}


# ----------------------------------------------------------------------------- quality against cost (issue 35)

QUALITY_COST = "results/figures/quality_cost_figure.parquet"


def quality_cost_inputs(config: dict[str, Any]) -> list[str]:
    """What ``ltr-bench quality-cost`` reads: the table's statistics, its runs' ``run.json`` and,
    for a table that selects hyperparameters, the selection records (the chosen points' runs)."""
    figure_outputs(config, "quality_cost_figure")  # enabled?
    dataset, runs = _table_runs(config, "figures.quality_cost_figure")
    table = config["figures"]["quality_cost_figure"]["table"]
    return _dedupe([profiled(config, STATS).format(table=table), *run_inputs(config, [r["dir"] for r in runs]),
                    *table_records(config, table, [dataset])])


def quality_cost_spec(config: dict[str, Any]) -> dict[str, Any]:
    """``ltr-bench quality-cost``'s spec: the dataset, the metric, the methods and their runs."""
    spec = config["figures"]["quality_cost_figure"]
    dataset, runs = _table_runs(config, "figures.quality_cost_figure")
    table = spec["table"]
    if spec["metric"] not in config["tables"][table]["metrics"]:
        raise ConfigError(f"config key 'figures.quality_cost_figure.metric': {spec['metric']!r} is not a metric of "
                          f"table {table} ({config['tables'][table]['metrics']})")
    methods = all_methods(config)
    return {"table": table, "dataset": dataset, "metric": spec["metric"], "runs": runs,
            "selection": table_records(config, table, [dataset]),
            "methods": [{**m, "kind": method_kind(methods[m["name"]])}
                        for m in method_labels(config, table_methods(config, table))]}


def quality_cost_figure_spec(config: dict[str, Any]) -> dict[str, Any]:
    """What the figure prints besides its table: the dataset, the protocol's batches, the seeds."""
    spec = config["figures"]["quality_cost_figure"]
    dataset, _ = _table_runs(config, "figures.quality_cost_figure")
    table = spec["table"]
    _, train = protocol_for_dataset(config, config["tables"][table]["protocol"], dataset)
    return {"table": table, "metric": spec["metric"], "profile": config["profile"],
            "dataset_label": config["datasets"][dataset].get("label", dataset),
            "folds": evaluation(config, table, dataset).folds, "seeds": table_seeds(config, table),
            "batch_size": train["batch_size"], "list_size": train["list_size"]}


# ----------------------------------------------------------------------------- ranking across datasets and folds (issue 40)
# bench/ranking.py ranks a statistics table's methods in each dataset-fold block of its evaluated
# frames (mean ranks, Friedman, Nemenyi, critical difference); `ltr-bench ranking` (rule `ranking`)
# writes RANKING, the computed table `ranking_table` renders it and the figure `cd_diagram` draws it

RANKING = "results/tables/ranking_table.parquet"
RANKING_KEY = "computed_tables.ranking_table"
#: the smallest design ranked: 2 blocks (one has no spread of ranks to test) and 3 methods (the
#: Friedman test compares three or more; scipy refuses fewer); bench.ranking checks the frames too
RANKING_MIN_BLOCKS, RANKING_MIN_METHODS = 2, 3


def ranking_source(config: dict[str, Any]) -> str:
    """The statistics table ``ranking_table`` ranks (``computed_tables.ranking_table.table``):
    enabled, with at least :data:`RANKING_MIN_BLOCKS` dataset-fold blocks and
    :data:`RANKING_MIN_METHODS` methods, else a ConfigError naming that key and what is needed."""
    computed_table_outputs(config, "ranking_table")  # enabled?
    key, table = f"{RANKING_KEY}.table", config["computed_tables"]["ranking_table"]["table"]
    if table not in enabled_tables(config):
        raise ConfigError(f"config key '{key}': {table!r} is not an enabled statistics table "
                          f"(enabled: {', '.join(enabled_tables(config))})")
    blocks, methods = ranking_blocks(config, table), table_methods(config, table)
    if len(blocks) < RANKING_MIN_BLOCKS:
        raise ConfigError(f"config key '{key}': ranking across datasets and folds needs at least {RANKING_MIN_BLOCKS} "
                          f"dataset-fold blocks, table {table} is evaluated on {len(blocks)} ({', '.join(blocks)}); "
                          f"give tables.{table} more datasets or folds, or rank another table")
    if len(methods) < RANKING_MIN_METHODS:
        raise ConfigError(f"config key '{key}': the Friedman test needs at least {RANKING_MIN_METHODS} methods, "
                          f"table {table} has {len(methods)}")
    return table


def ranking_blocks(config: dict[str, Any], table: str) -> list[str]:
    """The blocks of ``table``'s evaluated frames, ``<dataset>/<fold>`` (one per test list size L_test
    where the table cuts the test lists: the frames' datasets are then one per L_test)."""
    sizes = config["tables"][table].get("list_sizes") or [None]
    return [f"{ds}/{fold}" + (f" (L_test = {size})" if size else "") for ds in table_datasets(config, table)
            for fold in evaluation(config, table, ds).folds for size in sizes]


def ranking_metrics(config: dict[str, Any]) -> list[str]:
    """``computed_tables.ranking_table.metrics`` (default: the ranked table's), each one its frames grade."""
    table = ranking_source(config)
    chosen = config["computed_tables"]["ranking_table"].get("metrics") or config["tables"][table]["metrics"]
    graded = evaluation(config, table, table_datasets(config, table)[0]).metrics
    absent = [m for m in chosen if m not in graded]
    if absent:
        raise ConfigError(f"config key '{RANKING_KEY}.metrics': {absent} are not graded in table {table}'s "
                          f"evaluated frames ({', '.join(graded)})")
    return list(chosen)


def ranking_inputs(config: dict[str, Any]) -> list[str]:
    """What ``ltr-bench ranking`` reads: every evaluated frame of the ranked table (the runs its
    evaluation keeps: a method selected on validation by its chosen point's)."""
    table = ranking_source(config)
    return evaluated_files(config, table, table_datasets(config, table))


def ranking_spec(config: dict[str, Any]) -> dict[str, Any]:
    """``ltr-bench ranking``'s spec: the table, its methods in order, the metrics, alpha and the config key."""
    table = ranking_source(config)
    return {"table": table, "methods": table_methods(config, table), "metrics": ranking_metrics(config),
            "alpha": config["computed_tables"]["ranking_table"]["alpha"], "key": f"{RANKING_KEY}.table"}


def ranking_table_inputs(config: dict[str, Any]) -> list[str]:
    """The computed table ``ranking_table`` reads the ranking alone."""
    ranking_source(config)
    return [profiled(config, RANKING)]


def _ranking_subject(config: dict[str, Any], table: str) -> dict[str, Any]:
    """What the ranking's table and figure name: the ranked table, its datasets, methods, seeds, blocks."""
    return {"table": table, "table_title": config["tables"][table].get("title", table), "profile": config["profile"],
            "datasets": [{"name": ds, "label": config["datasets"][ds].get("label", ds)}
                         for ds in table_datasets(config, table)],
            "list_sizes": list(config["tables"][table].get("list_sizes") or []),
            "methods": method_labels(config, table_methods(config, table)), "seeds": table_seeds(config, table),
            "blocks": ranking_blocks(config, table)}


def ranking_table_spec(config: dict[str, Any]) -> dict[str, Any]:
    """What the computed table ``ranking_table`` renders besides the ranking: the ranked table's
    datasets, methods (labels), seeds and blocks, the metrics and alpha."""
    table = ranking_source(config)
    return {**_ranking_subject(config, table), "metrics": ranking_metrics(config),
            "alpha": config["computed_tables"]["ranking_table"]["alpha"], "evaluation": config["evaluation"],
            "conventions": {ds: evaluation_convention(config, table, ds) for ds in table_datasets(config, table)}}


def cd_diagram_inputs(config: dict[str, Any]) -> list[str]:
    """The figure ``cd_diagram`` reads the ranking (its metrics among those ranked)."""
    cd_diagram_spec(config)
    return [profiled(config, RANKING)]


def cd_diagram_spec(config: dict[str, Any]) -> dict[str, Any]:
    """What ``ltr-bench figure cd_diagram`` draws: one panel per metric of ``figures.cd_diagram.metrics``
    (each ranked by ``computed_tables.ranking_table``, which must be enabled), with the labels."""
    if "ranking_table" not in enabled_computed_tables(config):
        raise ConfigError("config key 'figures.cd_diagram': it draws computed_tables.ranking_table, which is not "
                          f"enabled in profile {config['profile']}")
    ranked, wanted = ranking_metrics(config), list(config["figures"]["cd_diagram"]["metrics"])
    absent = [m for m in wanted if m not in ranked]
    if absent:
        raise ConfigError(f"config key 'figures.cd_diagram.metrics': {absent} are not ranked by "
                          f"{RANKING_KEY} (its metrics: {', '.join(ranked)})")
    return {**_ranking_subject(config, ranking_source(config)), "metrics": wanted}
