"""Study configuration: load, fill defaults, validate against the JSON schema, check references.

One validator serves the Snakefile and the tests: :func:`validate_config` fills the schema's
``default`` values into the config (a ``properties`` keyword that also sets defaults, the
same idea as ``snakemake.utils.validate(set_default=True)``), then checks the result with
``jsonschema`` (draft 2020-12). The first error is raised as :class:`ConfigError` with the
dotted key at fault, e.g. ``config key 'protocols.pirank.seeds.0': 'a' is not of type
'integer'`` or ``config key 'tables.pirank_table1': unknown key 'metric'``.

Profiles are layered like Snakemake's own ``configfile`` + ``--configfile``: the embedded
default (``config/default.yaml``) is read first and every later file is merged into it
recursively (mappings merge key by key, anything else is replaced). :func:`load_config`
does exactly that, so tests see the same config the workflow sees.

>>> cfg = validate_config({"datasets": {"d": {"source": "synthetic"}},
...                        "protocols": {"p": {"model": {}, "train": {}}},
...                        "methods": {"m": {"loss": "ranknet"}}})
>>> cfg["datasets"]["d"]["folds"], cfg["stats"]["correction"], cfg["methods"]["m"]["params"]
(['Fold1'], 'holm', {})
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from bench import search_space
from bench.choices import DATASET_CONVENTION, STABLE_TIES_CONVENTIONS
from bench.config import heatmap, kinds, plan, schema, selection, tuning
from bench.config.losses import check_losses
from bench.config.plan import (
    compare_method_name,
    dataset_convention,
    merged_model,
    method_kind,
    resolve_role,
    selection_point_spec,
    table_datasets,
    table_methods,
    table_selects,
)
from bench.config.run import check_choice, resolve_model
from bench.config.schema import ROOT, SCHEMA_PATH, StudyValidator, _key, deepest_error, describe, load_schema  # noqa: F401
from bench.config.settings import check_linear_scorer, gbdt_library
from bench.config.strings import type_strings
from bench.errors import ConfigError

DEFAULT_CONFIG = ROOT / "config" / "default.yaml"


def method_kind_keys() -> dict[str, tuple[list[str], list[str]]]:
    """Per branch of the schema's ``method.oneOf`` (one per method kind, named by the run kind
    whose method key it requires): ``(required keys, keys no other branch may carry)``.

    >>> method_kind_keys()["gbdt"]
    (['gbdt', 'objective'], ['gbdt', 'objective', 'num_trees', 'early_stopping_rounds'])
    """
    method = schema.definition("method")
    branches = method["oneOf"]
    banned = [{k for alt in b.get("not", {}).get("anyOf", []) for k in alt.get("required", [])} for b in branches]
    out = {}
    for i, branch in enumerate(branches):
        own = [k for k in method["properties"]
               if k not in banned[i] and all(k in banned[j] for j in range(len(branches)) if j != i)]
        name = next(n for n, kind in kinds.RUN_KINDS.items()
                    if kind.protocol_key is None and kind.method_key in branch["required"])
        out[name] = (list(branch["required"]), own)
    return out


def _method_kinds_message(where: str, entry: dict[str, Any]) -> str | None:
    """A method entry with keys of several kinds (or of none): say which keys clash."""
    kinds_keys = method_kind_keys()
    found = {kind: [k for k in own if k in entry] for kind, (_, own) in kinds_keys.items()}
    found = {kind: keys for kind, keys in found.items() if keys}
    if len(found) < 2:
        return None
    clash = "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys in found.items())
    forms = [f"{kind} ({' + '.join(required)})" for kind, (required, _) in kinds_keys.items()]
    return (f"config key '{where}': mixes keys of several method kinds ({clash}); a method is "
            f"{', '.join(forms[:-1])} or {forms[-1]}")


def _describe(error: jsonschema.ValidationError) -> str:
    """One line naming the key; a method entry mixing kinds says which keys clash."""
    path = list(error.absolute_path)
    if error.validator == "oneOf" and len(path) == 2 and path[0] == "methods" and isinstance(error.instance, dict):
        mixed = _method_kinds_message(_key(path), error.instance)
        if mixed:
            return mixed
    return describe(error)


def validate_config(config: dict[str, Any], schema_path: str | Path | None = None) -> dict[str, Any]:
    """Fill defaults into ``config`` (in place), validate it, check cross-references; return it."""
    if not isinstance(config, dict):
        raise ConfigError(f"config must be a mapping, got {type(config).__name__}")
    validator = StudyValidator(load_schema(schema_path))
    coerce_typed_strings(validator, config)
    error = deepest_error(validator, config)
    if error is not None:
        raise ConfigError(_describe(error))
    type_free_strings(config)
    check_profile(config)
    check_choices(config)
    check_references(config)
    check_losses(config)  # every loss resolved now, torch-free: a typo stops the DAG, not a job; types its params
    return config


def type_free_strings(config: dict[str, Any]) -> None:
    """Read back the ``--config`` strings of the free-form mappings the schema leaves open, in
    place, by :mod:`bench.config.strings`'s rule: a GBDT method's ``params`` by its library's
    default parameters, a dataset's ``options`` (no defaults here); a neural method's ``params``
    are typed by its loss's signature once the loss is resolved (:func:`check_losses`)."""
    for spec in config["methods"].values():
        if method_kind(spec) == "gbdt" and isinstance(spec.get("params"), dict):
            type_strings(spec["params"], gbdt_library(spec["gbdt"])[1])
    for dataset in config["datasets"].values():
        if isinstance(dataset.get("options"), dict):
            type_strings(dataset["options"], {})


#: JSON schema type -> does a YAML-parsed value have it (bool is not an integer here)
_TYPE_CHECKS = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def coerce_typed_strings(validator: jsonschema.protocols.Validator, config: dict[str, Any]) -> None:
    """Give a string the type the schema expects where it reads as one, in place.

    Snakemake hands ``--config`` values to the workflow as strings, nested mappings included
    (``--config gpu=true`` is ``'true'``; ``'protocols={p: {train: {epochs: 3}}}'`` has
    ``'3'``), where a config file's YAML gives ``True`` and ``3``. So a string at a key whose
    schema type is integer, number or boolean is read as YAML would read it (``3``, ``1e-3``,
    ``true``, ``True``; a number also as Python reads it, ``1e-2``) and kept when that has
    the expected type; any other string is left as
    it is, and validation then names the key and the type it expected. Quoted numbers in a
    config file are read the same way: the schema, not the quoting, decides a key's type.
    The free-form mappings the schema does not type (method ``params``, dataset ``options``)
    are read back by :func:`type_free_strings` and :func:`check_losses`.

    >>> cfg = {"gpu": "True", "threads": "2"}
    >>> coerce_typed_strings(StudyValidator(load_schema()), cfg); cfg["gpu"], cfg["threads"]
    (True, 2)
    """
    for _ in range(100):  # each pass fixes what validation can reach; a fix may expose deeper keys
        fixes = [(list(e.absolute_path), value) for e in _type_errors(validator.iter_errors(config))
                 if (value := _as_type(e.instance, e.validator_value)) is not None]
        if not fixes:
            return
        for path, value in fixes:
            parent = config
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = value


def _type_errors(errors: Iterable[jsonschema.ValidationError]) -> Iterable[jsonschema.ValidationError]:
    """Every ``type`` error on a string, inside ``oneOf``/``anyOf`` branches too."""
    for error in errors:
        if error.validator == "type" and isinstance(error.instance, str) and error.absolute_path:
            yield error
        yield from _type_errors(error.context or [])


def _as_type(text: str, expected: str | list[str]) -> Any:
    """``text`` read as YAML when that has one of the ``expected`` non-string types, else None."""
    wanted = [t for t in ([expected] if isinstance(expected, str) else expected) if t in _TYPE_CHECKS]
    if not wanted:
        return None
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if isinstance(value, str) and "number" in wanted:  # YAML 1.1 reads 1e-2 (no dot) as a string
        try:
            value = float(text)
        except ValueError:
            return None
    return value if any(_TYPE_CHECKS[t](value) for t in wanted) else None


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Recursive merge as Snakemake merges config files: mappings key by key, else replace.

    >>> merge({"a": {"x": 1, "y": 2}, "b": [1]}, {"a": {"y": 3}, "b": [2]})
    {'a': {'x': 1, 'y': 3}, 'b': [2]}
    """
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from ``path``; errors name the file (and line for syntax errors)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"config file {where}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: top level must be a mapping")
    return data


def load_config(*paths: str | Path, base: str | Path | None = DEFAULT_CONFIG, overrides: dict | None = None) -> dict:
    """``base`` merged with each of ``paths`` then ``overrides``, validated with defaults."""
    config: dict[str, Any] = read_yaml(base) if base is not None else {}
    for path in paths:
        config = merge(config, read_yaml(path))
    if overrides:
        config = merge(config, overrides)
    return validate_config(config)


# ----------------------------------------------------------------------------- references


def _require(known: dict | Iterable[str], name: str, where: str, what: str) -> None:
    if name not in known:
        raise ConfigError(f"config key '{where}': {schema.unknown_name(name, known, what)}")


def check_model(model: dict[str, Any], where: str) -> None:
    """A merged model meets its type's definition in the schema (:func:`bench.config.run.resolve_model`)."""
    resolve_model(model, where)


def check_choices(config: dict[str, Any]) -> None:
    """``evaluation``'s conventions, ``stats``' test and correction and each dataset's
    ``convention`` are among :mod:`bench.choices`' choices (the schema types them as strings)."""
    for name, value in config.get("evaluation", {}).items():
        check_choice(value, f"evaluation.{name}", *([DATASET_CONVENTION] if name == "convention" else []))
    for name, value in config.get("stats", {}).items():
        check_choice(value, f"stats.{name}")
    for name, spec in config["datasets"].items():
        if "convention" in spec:
            check_choice(spec["convention"], f"datasets.{name}.convention")
    for section, name, spec in _evaluation_specs(config):
        if "convention" in spec:
            check_choice(spec["convention"], f"{section}.{name}.convention")
    for name, spec in (config.get("tables") or {}).items():
        for key, value in (spec.get("stats") or {}).items():
            check_choice(value, f"tables.{name}.stats.{key}")
    for name, spec in config["protocols"].items():
        if "convention" in spec:
            check_choice(spec["convention"], f"protocols.{name}.convention", DATASET_CONVENTION)


def _evaluation_specs(config: dict[str, Any]):
    """``(section, name, spec)`` of every table and figure that may name its own ``convention``."""
    for name, spec in (config.get("tables") or {}).items():
        yield "tables", name, spec
    heatmap_spec = (config.get("figures") or {}).get(heatmap.FIGURE)
    if heatmap_spec:
        yield "figures", heatmap.FIGURE, heatmap_spec


def check_sinkprop_protocol(config: dict[str, Any], protocol: str) -> None:
    """``protocols.<p>.sinkprop_protocol.methods`` name neural methods, and the protocol's model is linear."""
    spec = config["protocols"][protocol].get("sinkprop_protocol")
    if not spec:
        return
    where = f"protocols.{protocol}.sinkprop_protocol"
    for i, name in enumerate(spec["methods"]):
        _require(config["methods"], name, f"{where}.methods.{i}", "method")
        if method_kind(config["methods"][name]) != "neural":
            raise ConfigError(f"config key '{where}.methods.{i}': '{name}' is not a neural method (a loss); "
                              "the SinkProp protocol trains a loss")
    check_linear_scorer(config["protocols"][protocol]["model"], f"protocols.{protocol}.model")


def check_refit(config: dict[str, Any], protocol: str) -> None:
    """A protocol with ``train.refit: true`` trains only methods that can refit (neural and GBDT
    runs, :data:`bench.training.refit.REFIT_KINDS`): a least-squares fit or SinkProp's own
    protocol is refused here, before any job, naming the key and the method."""
    if not config["protocols"][protocol]["train"].get("refit"):
        return
    sectioned = {m for key in kinds.protocol_kinds() for m in (config["protocols"][protocol].get(key) or {})
                 .get("methods", [])}
    for method in sorted(plan.protocol_methods(config, protocol)):
        kind = method_kind(config["methods"][method])
        if method in sectioned or kind not in ("neural", "gbdt"):
            what = "trained by the protocol's own section" if method in sectioned else f"a {kind} run"
            raise ConfigError(f"config key 'protocols.{protocol}.train.refit': method '{method}' is {what}, "
                              "which cannot refit on train + validation (only neural and GBDT runs do)")


def check_paper_choices(config: dict[str, Any]) -> None:
    """Each key of a protocol's or a dataset's ``choices`` names a setting of it: ``model.<key>`` of
    the protocol's model type, ``train.<key>``, ``seeds``, ``<run-kind section>.<key>`` or
    ``methods.<method>.<path>`` of a known method; ``options.<key>`` of the preparation options."""
    from bench.config.paper_choices import expand_keys
    from bench.data.prepare import DEFAULT_OPTIONS

    train_keys = set(schema.defaults("train"))
    for name, proto in config["protocols"].items():
        model_keys = set(resolve_model(proto["model"], f"protocols.{name}.model"))
        sections = {key: set(schema.defaults(key)) for key in kinds.protocol_kinds() if proto.get(key)}
        for key in expand_keys(proto.get("choices")):
            head, _, rest = key.partition(".")
            ok = (key == "seeds" or (head == "model" and rest in model_keys) or (head == "train" and rest in train_keys)
                  or (head in sections and rest in sections[head])
                  or (head == "methods" and rest.partition(".")[0] in config["methods"]))
            if not ok:
                raise ConfigError(f"config key 'protocols.{name}.choices': {key!r} names no setting of the protocol "
                                  "(model.<key>, train.<key>, seeds, <run-kind section>.<key> or methods.<method>.<path>)")
    for name, ds in config["datasets"].items():
        for key in expand_keys(ds.get("choices")):
            head, _, rest = key.partition(".")
            if head != "options" or rest not in DEFAULT_OPTIONS:
                raise ConfigError(f"config key 'datasets.{name}.choices': {key!r} is not options.<key> of a "
                                  f"preparation option ({', '.join(DEFAULT_OPTIONS)})")


def check_conventions(config: dict[str, Any]) -> None:
    """Every protocol's runs have one validation convention on each dataset
    (:func:`bench.config.plan.protocol_convention` names ``protocols.<p>.convention`` when the
    tables sharing them disagree), and a LETOR evaluation convention keeps score ties in file
    order: ``evaluation.ties`` must be ``stable`` when any dataset is graded by one, in its runs
    or in a table's evaluation."""
    for protocol in config["protocols"]:
        for dataset in config["datasets"]:
            plan.protocol_convention(config, protocol, dataset)
    if config.get("evaluation", {}).get("ties", "stable") == "stable":
        return
    graded = [(f"dataset '{name}'", dataset_convention(config, name)) for name in config["datasets"]]
    if config.get("evaluation", {}).get("convention", DATASET_CONVENTION) == DATASET_CONVENTION:
        graded += [(f"{section}.{name}", spec["convention"]) for section, name, spec in _evaluation_specs(config)
                   if spec.get("convention")]
    for what, convention in graded:
        if convention in STABLE_TIES_CONVENTIONS:
            raise ConfigError(
                f"config key 'evaluation.ties': {what} is graded by convention '{convention}', which "
                "keeps score ties in file order; set ties: stable (or evaluation.convention: default)"
            )


def check_recall_heatmap(config: dict[str, Any]) -> None:
    """The recall heatmap's protocol, datasets (roles) and methods exist; its methods and grid
    make sense (:func:`bench.config.heatmap.check_methods`)."""
    spec = config.get("figures", {}).get("recall_heatmap")
    if not spec:
        return
    where = "figures.recall_heatmap"
    _require(config["protocols"], spec["protocol"], f"{where}.protocol", "protocol")
    for role, name in spec.get("roles", {}).items():
        _require(config["datasets"], name, f"{where}.roles.{role}", "dataset")
    for i, role in enumerate(spec["datasets"]):
        _require(config["datasets"], resolve_role(config, role, spec), f"{where}.datasets.{i}", "dataset or role")
    for i, name in enumerate(spec["methods"]):
        _require(config["methods"], name, f"{where}.methods.{i}", "method")
    heatmap.check_methods(config["methods"], spec, where)


def check_selections(config: dict[str, Any]) -> None:
    """Each table's ``select``: its methods are the table's (neural or GBDT, not trained by a
    protocol section), its grids make sense (:func:`bench.config.selection.check_grid`), a grid
    that sets ``model`` keys gives a valid model, the paper's choices name the table's dataset
    roles and grid keys, and a point's name is neither a catalogue method's nor another
    table's point with other settings."""
    named: dict[str, tuple[dict[str, Any], str]] = {}
    for table, spec in config.get("tables", {}).items():
        where = f"tables.{table}.select"
        protocol = config["protocols"][spec["protocol"]]
        sectioned = {m for key in kinds.protocol_kinds() for m in (protocol.get(key) or {}).get("methods", [])}
        for name, select in table_selects(config, table).items():
            at = f"{where}.{name}"
            _require(table_methods(config, table), name, at, "method of the table")
            if name in sectioned:
                raise ConfigError(f"config key '{at}': '{name}' is trained by the protocol's own section "
                                  f"({', '.join(k for k in kinds.protocol_kinds() if protocol.get(k))}); "
                                  "it cannot be selected on a grid")
            entry = config["methods"][name]
            points = selection.check_grid(name, entry, method_kind(entry), select, at)
            roles = [] if spec["datasets"] == "all" else spec["datasets"]
            for role, values in (select.get("paper") or {}).items():
                _require(roles, role, f"{at}.paper", "dataset role of the table")
                for key in values:
                    _require(select["grid"], key, f"{at}.paper.{role}", "grid key")
            for point in points:
                point_entry = selection_point_spec(config, table, point)
                if "model" in point_entry:
                    check_model(merged_model(protocol["model"], point_entry["model"]), f"{at}.grid")
                if point.name in config["methods"]:
                    raise ConfigError(f"config key '{at}': its grid point '{point.name}' has the name of a method "
                                      "of the catalogue; rename that method")
                earlier = named.setdefault(point.name, (point_entry, at))
                if earlier[0] != point_entry:
                    raise ConfigError(f"config key '{at}': its grid point '{point.name}' is also a point of "
                                      f"'{earlier[1]}' with other settings (its selection metric); give one of "
                                      "them the other's metric")


def check_tuning(config: dict[str, Any]) -> None:
    """The ``tuning`` section and the ``search`` keys: the tuned protocols exist, the tuning fold is
    a fold of every dataset a tuned protocol trains on, the shared dimensions parse, a linear
    method has no ``search`` (least squares picks its penalty itself), a tuned protocol's table
    does not also select on a grid, and every tuned method's space is one its kind may set with
    every drawn configuration a valid method entry (:func:`bench.config.tuning.check_space`); a
    configuration's name is no catalogue method's."""
    section = tuning.section(config)
    for i, name in enumerate(section.get("protocols") or []):
        _require(config["protocols"], name, f"tuning.protocols.{i}", "protocol")
    for kind, dims in (section.get("space") or {}).items():
        for path, dim in dims.items():
            search_space.parse(dim, f"tuning.space.{kind}.{path}")
    for name, entry in config["methods"].items():
        if entry.get("search") and method_kind(entry) == "linear":
            raise ConfigError(f"config key 'methods.{name}.search': a least-squares method has nothing to tune "
                              "(it chooses its ridge penalty from `penalties` on validation)")
    for table, spec in config.get("tables", {}).items():
        if spec["protocol"] in tuning.tuned_protocols(config) and table_selects(config, table):
            raise ConfigError(f"config key 'tables.{table}.select': the table's protocol '{spec['protocol']}' is tuned "
                              "(tuning.protocols); a tuned method is not also selected on a grid")
    for experiment in plan.tuning_experiments(config):
        for name, (entry, where) in plan.tuned_entries(config, experiment).items():
            for c in tuning.check_space(config, name, entry, where)[1:]:
                if c.name in config["methods"]:
                    raise ConfigError(f"config key '{where}': its configuration '{c.name}' has the name of a method "
                                      "of the catalogue; rename that method")
    fold = section.get("fold")
    if fold:
        for experiment in plan.tuning_experiments(config):
            protocol = plan.experiment_protocol(config, experiment)
            for t in plan.enabled_tables(config):
                if config["tables"][t]["protocol"] == protocol:
                    for ds in table_datasets(config, t):
                        _require(config["datasets"][ds]["folds"], fold, "tuning.fold", f"fold of dataset {ds}")


def check_profile(config: dict[str, Any]) -> None:
    """A profile other than the default keeps its summaries in ``results/<profile>/`` and
    ``reports/<profile>/`` (:func:`bench.config.plan.profiled`): it may not take the name of a
    folder the suite writes there itself."""
    if config["profile"] in plan.SUITE_FOLDERS:
        raise ConfigError(f"config key 'profile': {config['profile']!r} is the name of a folder the suite writes under "
                          f"results/ or reports/ (one of {', '.join(sorted(plan.SUITE_FOLDERS))}); choose another name")


def check_references(config: dict[str, Any]) -> None:
    """Every protocol, method, dataset and role a table/figure/freeze names must exist."""
    datasets, protocols, methods = config["datasets"], config["protocols"], config["methods"]
    for name, proto in protocols.items():
        check_model(proto["model"], f"protocols.{name}.model")
        for ds, extra in proto.get("overrides", {}).items():
            if ds not in datasets and ds not in {d["source"] for d in datasets.values()}:
                raise ConfigError(f"config key 'protocols.{name}.overrides.{ds}': not a dataset name or source")
            check_model(merged_model(proto["model"], extra.get("model")), f"protocols.{name}.overrides.{ds}.model")
        for method, spec in methods.items():
            if "model" in spec:
                check_model(merged_model(proto["model"], spec["model"]), f"methods.{method}.model")
        check_sinkprop_protocol(config, name)
        check_refit(config, name)
    for role, name in config.get("roles", {}).items():
        _require(datasets, name, f"roles.{role}", "dataset")
    for table, spec in config.get("tables", {}).items():
        where = f"tables.{table}"
        _require(protocols, spec["protocol"], f"{where}.protocol", "protocol")
        for role, name in spec.get("roles", {}).items():
            _require(datasets, name, f"{where}.roles.{role}", "dataset")
        if spec["datasets"] != "all":
            for i, role in enumerate(spec["datasets"]):
                _require(datasets, resolve_role(config, role, spec), f"{where}.datasets.{i}", "dataset or role")
        if spec["methods"] != "all":
            for i, name in enumerate(spec["methods"]):
                _require(methods, name, f"{where}.methods.{i}", "method")
        for name in spec.get("l_train", {}):
            _require(spec["methods"] if spec["methods"] != "all" else methods, name, f"{where}.l_train", "method")
        if spec.get("folds"):
            for ds in table_datasets(config, table):
                for fold in spec["folds"]:
                    _require(datasets[ds]["folds"], fold, f"{where}.folds", f"fold of dataset {ds}")
    spec = config.get("figures", {}).get("temperature_figure")
    if spec:
        where = "figures.temperature_figure"
        _require(protocols, spec["protocol"], f"{where}.protocol", "protocol")
        _require(datasets, resolve_role(config, spec["dataset"]), f"{where}.dataset", "dataset or role")
        for i, name in enumerate(spec["methods"]):
            _require(methods, name, f"{where}.methods.{i}", "method")
    check_recall_heatmap(config)
    check_selections(config)
    check_tuning(config)
    lsf = config.get("figures", {}).get("listsize_figure")
    if lsf and lsf.get("enabled", True):
        _require(config.get("tables", {}), lsf["table"], "figures.listsize_figure.table", "table")
    freeze = config.get("freeze")
    if freeze:
        _require(protocols, freeze["protocol"], "freeze.protocol", "protocol")
        if freeze["methods"] != "all":
            for i, name in enumerate(freeze["methods"]):
                _require(methods, name, f"freeze.methods.{i}", "method")
        if freeze["datasets"] != "all":
            for i, role in enumerate(freeze["datasets"]):
                _require(datasets, resolve_role(config, role), f"freeze.datasets.{i}", "dataset or role")
        for metric in freeze.get("platform_tolerance", {}):
            _require(freeze["metrics"], metric, f"freeze.platform_tolerance.{metric}", "frozen metric")
    check_conventions(config)
    check_paper_choices(config)
    compare = config.get("compare", {})
    if compare.get("losses") and not freeze:
        raise ConfigError("config key 'compare.losses': comparing needs a 'freeze' section (the frozen protocol)")
    for i, entry in enumerate(compare.get("losses", [])):
        name = compare_method_name(entry)
        if name in methods:
            raise ConfigError(
                f"config key 'compare.losses.{i}': method name '{name}' is already a baseline; give the entry a new 'name'"
            )


