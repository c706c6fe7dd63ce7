"""No document claims an option the code lacks: every config option docs/experiments.md names exists.

**What counts as naming an option.** A Markdown code span (backticks, possibly wrapping a line;
a fenced block is one span of several lines and matches neither form, so it is not read: the
document has none) whose whole text has one of two forms:

1. a **dotted key path**: at least two segments joined by ``.``, each a lowercase identifier
   (``[a-z_][a-z0-9_]*``) or, after the first, a placeholder ``<...>`` standing for any name:
   ``train.lr``, ``tables.<table>.select``, ``figures.temperature_figure.smoothing``;
2. a **key with a colon**: a bare key or a dotted path as in 1, then ``:`` ending the span or
   followed by a space and a value: ``straight_through: false``, ``checkpoint: best|last``,
   ``ranking_top: null``, ``tables:``; or several, separated by ``, `` outside braces and
   brackets (``refit: true, checkpoint: last``: two). (``rank:ndcg``, no space, is an XGBoost
   objective.)

Not options, though dotted: file names (the last segment a file extension: ``run.json``,
``metrics.parquet``), Python names (the first segment one of :data:`PYTHON_ROOTS`:
``bench.losses.registry``, ``scipy.stats...``) and the fields of a run's record ``run.json``
(:data:`RECORD_ROOTS`: ``result.best_vali``), which are outputs. Everything else is prose: a bare
word (``tau``, ``restore_best``: as often a method, a metric, a column or a record field as an
option) and ``name = value`` (math: ``tau = 1000``).

**How a named option resolves** (``workflows/schemas/config.schema.yaml``, following ``$ref``,
``allOf``, ``oneOf`` and ``anyOf``):

* the first segment is a top-level property of the schema; failing that, a property of any
  object in it (a section named where it sits: ``train.lr`` is every ``train`` section's ``lr``,
  ``sinkprop_protocol.test_ranking`` a protocol's), or a section of one job's run config, which
  the schema defines as ``$defs/run_<section>`` (``metrics.convention`` is ``run_metrics``'s);
* each next segment is a property of the object reached, or, for another name, allowed by its
  ``additionalProperties`` (``protocols.letor``); a placeholder matches every property and
  additional property; an object with no declared keys (dataset ``options``) takes any name;
* a method's ``params`` (free-form in the schema) resolves its next segment against the loss's
  signature (``bench.losses.registry.signature``): the method's own loss where the path names a
  method of ``config/*.yaml`` (a GBDT method's library parameters are not checked), else any
  registered loss's hyperparameter or a GBDT library default's key;
* a bare key (form 2) resolves if it is a property of some object of the schema or a
  hyperparameter of some registered loss;
* a value (form 2) is checked as YAML scalars, each ``|``-separated alternative on its own:
  against the schema of at least one place the key resolved to, or, for a loss hyperparameter
  whose default is a boolean, as a boolean. A value with a placeholder or a flow collection
  (``{<method>: null}``) is not checked.

The test fails with one line per option that does not resolve, with its line in the document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from bench.losses import registry

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "experiments.md"
SCHEMA = ROOT / "workflows" / "schemas" / "config.schema.yaml"

#: first segments of dotted Python names, not config keys
PYTHON_ROOTS = frozenset({"bench", "scipy", "scikit_posthocs", "numpy", "torch", "pandas", "sklearn"})
#: first segments of a run's record (run.json), outputs rather than options
RECORD_ROOTS = frozenset({"result"})
#: a last segment that makes a dotted span a file name
FILE_EXTENSIONS = frozenset(
    {
        "json",
        "csv",
        "parquet",
        "npy",
        "md",
        "yaml",
        "yml",
        "py",
        "smk",
        "tex",
        "html",
        "pdf",
        "png",
        "txt",
        "gz",
        "zip",
        "digest",
        "toml",
        "sh",
    }
)

_SEG = r"[a-z_][a-z0-9_]*"
_PATH = rf"{_SEG}(?:\.(?:{_SEG}|<[^<>\s]+>))*"
DOTTED = re.compile(rf"^{_SEG}(?:\.(?:{_SEG}|<[^<>\s]+>))+$")
KEY_VALUE = re.compile(rf"^(?P<key>{_PATH}):(?:\s+(?P<value>\S.*))?$")
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


@dataclass(frozen=True)
class Named:
    line: int
    span: str  # the code span's text, whitespace collapsed
    key: str  # the dotted path or bare key it names
    value: str | None  # the value of a `key: value` span


def _items(span: str) -> list[str]:
    """``span`` cut at each ``, `` outside braces and brackets that a ``key:`` follows."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(span):
        depth += (ch in "{[") - (ch in "}]")
        if depth == 0 and span.startswith(", ", i) and KEY_VALUE.match(span[i + 2 :].split(",")[0]):
            out.append(span[start:i])
            start = i + 2
    return [*out, span[start:]]


def named_options(text: str) -> Iterator[Named]:
    """Every option ``text`` names, by the rule of the module docstring."""
    for m in SPAN.finditer(text):
        span = " ".join(m.group(2).split())
        line = text.count("\n", 0, m.start()) + 1
        items = _items(span)
        matches = [KEY_VALUE.match(item) for item in items]
        if all(matches):
            named = [(kv.group("key"), kv.group("value")) for kv in matches if kv]
        elif DOTTED.match(span):
            named = [(span, None)]
        else:
            continue
        for key, value in named:
            segments = key.split(".")
            if len(segments) > 1 and (segments[-1] in FILE_EXTENSIONS or segments[0] in PYTHON_ROOTS | RECORD_ROOTS):
                continue
            yield Named(line, span, key, value)


# ----------------------------------------------------------------------------- the schema side


@cache
def _schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))


def _branches(node: Any) -> list[dict[str, Any]]:
    """``node`` and every schema it refers to or combines (``$ref``, ``allOf``, ``oneOf``, ``anyOf``)."""
    out: list[dict[str, Any]] = []
    todo = [node]
    while todo:
        cur = todo.pop()
        if not isinstance(cur, dict) or any(cur is seen for seen in out):
            continue
        out.append(cur)
        ref = cur.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            todo.append(_schema()["$defs"][ref.split("/")[-1]])
        for word in ("allOf", "oneOf", "anyOf"):
            todo.extend(cur.get(word) or [])
    return out


def _free_form(nodes: list[dict[str, Any]]) -> bool:
    """An object that declares no keys at all (an option bag such as a dataset's ``options``)."""
    return not any(key in n for n in nodes for key in ("properties", "additionalProperties", "propertyNames")) and any(
        n.get("type") == "object" for n in nodes
    )


def _children(nodes: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The schemas ``name`` (or a placeholder, every name) has under an object of ``nodes``."""
    out = []
    for n in nodes:
        props = n.get("properties") or {}
        if name.startswith("<"):
            out += list(props.values())
        elif name in props:
            out.append(props[name])
    if name.startswith("<") or not out:
        out += [n["additionalProperties"] for n in nodes if isinstance(n.get("additionalProperties"), dict)]
    return out


@cache
def _all_objects() -> tuple[tuple[str, Any], ...]:
    """``(property name, its schema)`` for every property of every object of the schema."""
    found: list[tuple[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                found.append((name, sub))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(_schema())
    return tuple(found)


@cache
def _method_losses() -> dict[str, str | None]:
    """Every method of ``config/*.yaml``: its loss, or None for a GBDT or linear method."""
    out: dict[str, str | None] = {}
    for path in sorted((ROOT / "config").glob("*.yaml")):
        for name, entry in ((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("methods") or {}).items():
            if isinstance(entry, dict):
                out.setdefault(name, entry.get("loss"))
    return out


@cache
def _loss_hyperparameters() -> dict[str, dict[str, Any]]:
    """Every registered loss's hyperparameters: name -> default (``NOT_LITERAL`` when not shown)."""
    return {
        name: {p.name: p.default if p.has_default else None for p in registry.signature(name).params} for name in registry.names()
    }


def _gbdt_params() -> set[str]:
    defs = _schema()["$defs"]
    return {key for lib in ("gbdt_lightgbm", "gbdt_xgboost") for key in defs[lib]["properties"]["params"]["default"]}


def _loss_param_defaults(param: str, method: str | None) -> list[Any] | None:
    """The defaults of ``param`` where it is a hyperparameter (``method``'s loss, else any loss); None: no loss has it."""
    losses = _loss_hyperparameters()
    if method is not None and method in _method_losses():
        loss = _method_losses()[method]
        if loss is None:
            return []  # a GBDT method's library parameters: the library checks them
        hyper = losses.get(loss)
        if hyper is None:  # a user's loss, 'package.module:function'
            hyper = {p.name: p.default if p.has_default else None for p in registry.signature(loss).params}
        return [hyper[param]] if param in hyper else None
    found = [hyper[param] for hyper in losses.values() if param in hyper]
    if found or param in _gbdt_params():
        return found
    return None


def _resolve(segments: list[str]) -> tuple[list[dict[str, Any]], list[Any] | None, str | None]:
    """``(schemas, loss defaults, problem)`` of a key path: where it leads, or why it leads nowhere."""
    first, rest = segments[0], segments[1:]
    top = _schema()["properties"]
    if first in top:
        starts = [top[first]]
    else:
        starts = [sub for name, sub in _all_objects() if name == first]
        run_section = _schema()["$defs"].get(f"run_{first}")
        starts += [run_section] if run_section is not None else []
    nodes = [b for s in starts for b in _branches(s)]
    if not rest:  # a bare key: a key of the schema or a loss hyperparameter, or both
        defaults = _loss_param_defaults(first, None)
        if not starts and defaults is None:
            return [], None, f"'{first}' is no key of the config schema nor a loss hyperparameter"
        return nodes, defaults, None
    if not starts:
        return [], None, f"'{first}' is no key of the config schema"
    path = [first]
    for i, seg in enumerate(rest):
        if path[-1] == "params" and not any(n.get("properties") for n in nodes):
            method = segments[1] if segments[0] == "methods" and len(segments) > 2 and not segments[1].startswith("<") else None
            defaults = _loss_param_defaults(seg, method)
            if defaults is None:
                whose = f"method '{method}'s loss '{_method_losses()[method]}'" if method in _method_losses() else "any loss"
                return [], None, f"'{seg}' is no hyperparameter of {whose}"
            if i + 1 < len(rest):
                return [], None, f"a loss hyperparameter ('{seg}') has no keys under it"
            return [], defaults, None
        if _free_form(nodes):
            return [], None, None  # an option bag: any key
        children = _children(nodes, seg)
        if not children:
            return [], None, f"no key '{seg}' under '{'.'.join(path)}'"
        nodes = [b for c in children for b in _branches(c)]
        path.append(seg)
    return nodes, None, None


def _value_ok(value: str, nodes: list[dict[str, Any]], defaults: list[Any] | None) -> bool:
    if "<" in value or value.startswith(("{", "[")):
        return True  # a placeholder or a flow collection: not checked
    if not nodes and defaults is None:
        return True  # an option bag's key: any value
    schema_defs = {"$defs": _schema()["$defs"]}
    for alternative in value.split("|"):
        try:
            parsed = yaml.safe_load(alternative)
        except yaml.YAMLError:
            return False
        ok = any(jsonschema.Draft202012Validator({**schema_defs, **n}).is_valid(parsed) for n in nodes)
        if defaults is not None:  # a loss hyperparameter: only a boolean one's value is checked
            ok = ok or not all(isinstance(d, bool) for d in defaults) or not defaults or isinstance(parsed, bool)
        if not ok:
            return False
    return True


def missing_options(text: str, name: str = "docs/experiments.md") -> list[str]:
    """One line per option ``text`` names that the schema and the losses do not have."""
    out = []
    for opt in named_options(text):
        nodes, defaults, problem = _resolve(opt.key.split("."))
        if problem is None and opt.value is not None and not _value_ok(opt.value, nodes, defaults):
            problem = f"'{opt.value}' is not a value of '{opt.key}'"
        if problem is not None:
            out.append(f"{name}:{opt.line}: `{opt.span}`: {problem}")
    return out


# ----------------------------------------------------------------------------- the tests


def test_every_option_the_document_names_exists():
    missing = missing_options(DOC.read_text(encoding="utf-8"))
    assert not missing, "docs/experiments.md names options the config schema and the losses lack:\n" + "\n".join(missing)


def test_the_rule_finds_the_documents_options():
    # not vacuous: the document names some 30 distinct options (35 spans when this test was written)
    assert len({opt.key for opt in named_options(DOC.read_text(encoding="utf-8"))}) > 20


def test_the_checker_reports_a_missing_option_with_its_line():
    text = "Intro.\n\nThe schedule (`train.lr`, `train.no_such_key`) and\n`figures.no_such_figure.grid`.\n"
    assert missing_options(text, "x.md") == [
        "x.md:3: `train.no_such_key`: no key 'no_such_key' under 'train'",
        "x.md:4: `figures.no_such_figure.grid`: no key 'no_such_figure' under 'figures'",
    ]


@pytest.mark.parametrize(
    "span",
    [
        "methods.neuralsort_ce_t1000.params.no_such_hyper",  # a method's loss lacks it
        "params.no_such_hyper",  # no loss has it
        "no_such_section.lr",  # not a config key at all
        "no_such_key: 3",
        "ranking_top: many",  # the key exists, the value is not one it takes
        "straight_through: maybe",  # a boolean loss hyperparameter
        "tables.no_such_table.select",  # tables is a closed set
        "train.lr.deeper",
        "ranking_top: null, test_ranking: nowhere",  # the second of two
        "metrics.no_such_key",
    ],
)
def test_the_checker_refuses(span):
    assert len(missing_options(f"see `{span}`\n")) == 1


@pytest.mark.parametrize(
    "span",
    [
        "train.lr",
        "tables.<table>.select",
        "tables.pirank_table1.select",
        "protocols.letor.sinkprop_protocol",
        "sinkprop_protocol.test_ranking",
        "methods.<m>.params.tau",
        "methods.neuralsort_ce_t1000.params.straight_through",
        "methods.lightgbm_lambdarank.params.num_leaves",
        "params.tau",
        "datasets.syn_web",
        "datasets.<d>.options.anything",
        "straight_through: false",
        "type: context_aware",
        "ranking_top: null",
        "select: {<method>: null}",
        "tables:",
        "train.vali_curve_list_size: <size>",
        "evaluation.convention",
        "metrics.convention",  # a job's run config section ($defs/run_metrics)
        "ranking_top: null, test_ranking: scores",
        "select: {a: 1, b: 2}",
        # not options: a file, Python names, a run record's field, an objective, math, a bare word
        "run.json",
        "bench.losses.registry",
        "scipy.stats.qmc.Halton",
        "result.best_vali",
        "rank:ndcg",
        "tau = 1000",
        "restore_best",
    ],
)
def test_the_checker_accepts(span):
    assert missing_options(f"see `{span}`\n") == []
