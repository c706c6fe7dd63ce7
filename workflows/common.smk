# Shared helpers of the workflow: config validation and the input/param functions the rules
# use. Rules live in the per-stage files; every plan decision is delegated to bench.config,
# which the tests exercise directly.
import json
import os
import re
from pathlib import Path

from snakemake.utils import min_version

from bench import config as bc

min_version("8.0")

SCHEMA = Path(workflow.basedir) / "workflows" / "schemas" / "config.schema.yaml"
try:
    bc.validate_config(config, SCHEMA)
except bc.ConfigError as exc:
    raise WorkflowError(f"invalid configuration: {exc}") from None

PROFILE = config["profile"]
PREPARED = "results/prepared/{dataset}/{fold}"
RUN = "results/runs/{experiment}/{dataset}/{fold}/{method}/seed{seed}"
RUN_CONFIG = "results/configs/{experiment}/{dataset}/{method}.json"
EVALUATED = "results/evaluated/{name}/{dataset}/{fold}.parquet"
STATS = "results/stats/{table}.parquet"
TABLE_FORMATS = ("md", "tex", "html")
GPU = 1 if config["gpu"] else 0

report: "report/workflow.rst"


def _alternatives(names):
    """A regex matching exactly one of ``names`` (wildcard constraint)."""
    names = sorted(set(names))
    return "(?:" + "|".join(re.escape(n) for n in names) + ")" if names else "(?!)"


ALL_METHODS = {**config["methods"], **bc.compare_methods(config)}
GBDT_METHODS = _alternatives(m for m, s in ALL_METHODS.items() if bc.is_gbdt(s))
NEURAL_METHODS = _alternatives(m for m, s in ALL_METHODS.items() if not bc.is_gbdt(s))


# ----------------------------------------------------------------------------- targets


def _require_table(table):
    if table not in bc.enabled_tables(config):
        raise WorkflowError(f"table {table} is not enabled in profile {PROFILE} (config key 'tables.{table}')")


def _require_figure(figure):
    if figure not in bc.enabled_figures(config):
        raise WorkflowError(f"figure {figure} is not enabled in profile {PROFILE} (config key 'figures.{figure}')")


def table_outputs(table):
    _require_table(table)
    return [f"reports/tables/{table}.{fmt}" for fmt in TABLE_FORMATS]


def figure_outputs(figure):
    _require_figure(figure)
    return [f"reports/figures/{figure}.{fmt}" for fmt in ("png", "pdf")]


def report_inputs():
    out = []
    for table in bc.enabled_tables(config):
        out += table_outputs(table)
    for figure in bc.enabled_figures(config):
        out += figure_outputs(figure)
    return out


def freeze_outputs():
    if "freeze" not in config:
        raise WorkflowError("no 'freeze' section in the config: nothing to freeze")
    return [f"results/frozen/{PROFILE}/{ds}/manifest.json" for ds in bc.freeze_datasets(config)]


def compare_outputs():
    if not config.get("compare", {}).get("losses"):
        raise WorkflowError(
            "config key 'compare.losses' is empty: add the losses to compare, e.g. "
            "`--configfile config/compare-example.yaml` (see workflows/README-sections.md)"
        )
    return [f"reports/compare/{ds}.{fmt}" for ds in bc.compare_datasets(config) for fmt in ("md", "html")]


# ----------------------------------------------------------------------------- data


def dataset_spec(wildcards):
    if wildcards.dataset not in config["datasets"]:
        raise WorkflowError(f"unknown dataset {wildcards.dataset!r} (config key 'datasets')")
    return config["datasets"][wildcards.dataset]


def fetched_input(wildcards):
    source = dataset_spec(wildcards)["source"]
    return [] if source == "synthetic" else [f"results/fetched/{source}.done"]


def prepare_options(wildcards):
    return json.dumps(dataset_spec(wildcards)["options"], sort_keys=True)


# ----------------------------------------------------------------------------- runs


def run_config_json(wildcards):
    return json.dumps(bc.run_config(config, wildcards.experiment, wildcards.dataset, wildcards.method),
                      indent=2, sort_keys=True) + "\n"


def evaluation_plan(name, dataset):
    """(experiment, methods, seeds, folds, metrics, list_sizes) of one evaluation target."""
    if name in bc.TABLES:
        spec = config["tables"][name]
        return (spec["protocol"], bc.table_methods(config, name), bc.table_seeds(config, name),
                bc.table_folds(config, name, dataset), spec["metrics"], spec.get("list_sizes", []))
    if name == "recall_heatmap":
        spec = config["figures"][name]
        seeds = spec.get("seeds") or config["protocols"][spec["protocol"]]["seeds"]
        folds = [spec["fold"]] if spec.get("fold") else config["datasets"][dataset]["folds"][:1]
        metrics = [f"recall@{m}@{k}" for m in spec["m"] for k in spec["k"]]
        return spec["protocol"], spec["methods"], seeds, folds, metrics, []
    if name == "freeze":
        protocol = config["freeze"]["protocol"]
        return (protocol, bc.freeze_methods(config), config["protocols"][protocol]["seeds"],
                config["datasets"][dataset]["folds"], config["freeze"]["metrics"], [])
    if name == bc.COMPARE_EXPERIMENT:
        protocol = config["freeze"]["protocol"]
        return (bc.COMPARE_EXPERIMENT, list(bc.compare_methods(config)), config["protocols"][protocol]["seeds"],
                config["datasets"][dataset]["folds"], config["freeze"]["metrics"], [])
    raise WorkflowError(f"no evaluation named {name!r}")


def evaluated_runs(wildcards):
    experiment, methods, seeds, _, _, _ = evaluation_plan(wildcards.name, wildcards.dataset)
    return [
        {"method": m, "seed": s, "dir": RUN.format(experiment=experiment, dataset=wildcards.dataset,
                                                    fold=wildcards.fold, method=m, seed=s)}
        for m in methods
        for s in seeds
    ]


def evaluated_scores(wildcards):
    return [f"{run['dir']}/scores.npy" for run in evaluated_runs(wildcards)]


def evaluate_params(wildcards):
    _, _, _, _, metrics, sizes = evaluation_plan(wildcards.name, wildcards.dataset)
    ev = config["evaluation"]
    args = ["--metrics", *metrics, "--empty-query", ev["empty_query"], "--ties", ev["ties"]]
    if sizes:
        args += ["--list-sizes", *map(str, sizes)]
    return " ".join(args)


def evaluated_files(name, datasets):
    out = []
    for ds in datasets:
        folds = evaluation_plan(name, ds)[3]
        out += [EVALUATED.format(name=name, dataset=ds, fold=f) for f in folds]
    return out


def recall_dataset():
    spec = config["figures"]["recall_heatmap"]
    return bc.resolve_role(config, spec["dataset"])


def temperature_runs():
    spec = config["figures"]["temperature_figure"]
    dataset = bc.resolve_role(config, spec["dataset"])
    fold = spec.get("fold") or config["datasets"][dataset]["folds"][0]
    seeds = spec.get("seeds") or config["protocols"][spec["protocol"]]["seeds"]
    # a list of [label, run dirs] pairs: JSON keeps its order (the legend order)
    return [
        [config["methods"][m].get("label", m),
         [RUN.format(experiment=spec["protocol"], dataset=dataset, fold=fold, method=m, seed=s) for s in seeds]]
        for m in spec["methods"]
    ]


# ----------------------------------------------------------------------------- specs (JSON for the CLI)


def stats_params():
    st = config["stats"]
    return f"--test {st['test']} --correction {st['correction']} --alpha {st['alpha']} --n-boot {st['n_boot']} --seed {st['seed']}"


def method_labels(names):
    return [{"name": m, "label": ALL_METHODS[m].get("label", m)} for m in names]


def table_spec_json(wildcards):
    table = wildcards.table
    spec = config["tables"][table]
    roles = bc.table_roles(config, table)
    stands = {}
    if spec["datasets"] != "all":
        for role in spec["datasets"]:
            name = bc.resolve_role(config, role, spec)
            if config["datasets"][name]["source"] == "synthetic" and role != name:
                stands.setdefault(name, []).append(role)
    datasets = [
        {"name": ds, "label": config["datasets"][ds].get("label", ds), "role": roles.get(ds),
         "stands_for": stands.get(ds, [])}
        for ds in bc.table_datasets(config, table)
    ]
    sizes = spec.get("list_sizes", [])
    out = {
        "name": table,
        "title": spec.get("title", table),
        "profile": PROFILE,
        "layout": "listsize" if table == "listsize_table3" else "methods",
        "datasets": datasets,
        "methods": method_labels(bc.table_methods(config, table)),
        "metrics": spec["metrics"],
        "seeds": bc.table_seeds(config, table),
        "list_sizes": sizes,
        "l_train": spec.get("l_train", {}),
        "stats": config["stats"],
        "evaluation": config["evaluation"],
        "paper": spec.get("paper"),
        "source": bc.TABLE_SOURCES.get(table),
    }
    return json.dumps(out, sort_keys=True)


def figure_spec_json(wildcards):
    figure = wildcards.figure
    spec = config["figures"][figure]
    if figure == "scaling_figure":
        out = {"steps": spec["steps"], "batch_lists": spec["batch_lists"]}
    elif figure == "temperature_figure":
        out = {"runs": temperature_runs(), "metrics": spec.get("metrics") or ["ndcg@10"]}
    elif figure == "listsize_figure":
        table = config["tables"][spec["table"]]
        out = {"dataset": bc.table_datasets(config, spec["table"])[0], "l_train": table["l_train"],
               "list_sizes": table["list_sizes"], "metrics": spec["metrics"]}
    elif figure == "recall_heatmap":
        out = {"methods": spec["methods"], "m": spec["m"], "k": spec["k"],
               "labels": {m: ALL_METHODS[m].get("label", m) for m in spec["methods"]}}
    else:
        out = {"taus": spec["taus"], "points": spec["points"]}
    return json.dumps(out, sort_keys=True)


def figure_inputs(wildcards):
    figure = wildcards.figure
    _require_figure(figure)
    spec = config["figures"][figure]
    if figure == "scaling_figure":
        return ["results/perf/scaling.csv"]
    if figure == "temperature_figure":
        return [f"{d}/curve.csv" for _, dirs in temperature_runs() for d in dirs]
    if figure == "listsize_figure":
        return [STATS.format(table=spec["table"])]
    if figure == "recall_heatmap":
        return evaluated_files("recall_heatmap", [recall_dataset()])
    return []


def figure_input_args(wildcards, input):
    # only files the figure reads directly (temperature reads run dirs named in its spec)
    if wildcards.figure in ("temperature_figure", "neuralndcg_curves"):
        return ""
    return "--input " + " ".join(input)


def perf_args():
    spec = config["figures"]["scaling_figure"]
    return (f"--lengths {','.join(map(str, spec['sizes']))} --batch {spec['batch_lists']} --steps {spec['steps']} "
            f"--k {spec['k']} --n-features {spec['n_features']} --max-seconds {spec['max_seconds']} "
            f"--losses {','.join(spec['losses']) or 'none'}")


def study_protocol_json(dataset):
    return json.dumps(bc.study_protocol(config, config["freeze"]["protocol"], dataset), sort_keys=True)


def prepared_folds(dataset):
    return [PREPARED.format(dataset=dataset, fold=f) for f in config["datasets"][dataset]["folds"]]


def compare_spec_json(wildcards):
    dataset = wildcards.dataset
    labels = {m: s.get("label", m) for m, s in ALL_METHODS.items()}
    return json.dumps(
        {"dataset": dataset, "profile": PROFILE, "metrics": config["freeze"]["metrics"],
         "protocol": bc.study_protocol(config, config["freeze"]["protocol"], dataset),
         "stats": config["stats"], "labels": labels},
        sort_keys=True,
    )
