"""The loss registry: one name -> one callable with the common loss signature.

``loss(scores [B, L], labels [B, L], mask bool [B, L], **hyper) -> scalar Tensor``
(one registered loss, the point-wise grade classifier, takes ``scores [B, L, C]``: its
entry says so, :attr:`LossInfo.outputs`).

Three ways to name a loss:

* a built-in name (table :data:`BUILTIN` below: name -> ``"module:attribute"``), imported
  lazily on first use, so a broken or missing module only affects its own losses;
* a plug-in: any module ``bench/losses/<file>.py`` that declares
  ``__losses__ = ("my_loss", ...)`` at top level is discovered by reading its source (no
  import; each plug-in directory is read once per process), and each listed function or
  ``nn.Module`` class becomes a loss of that name.
  Adding a loss is one function in one file, picked up by name (benchopt's spirit);
* ``"package.module:function"`` for a user's loss anywhere on ``sys.path``.

If the target is a class subclassing ``torch.nn.Module`` (e.g. ``arf``'s learnable
``alpha``), :func:`get` returns a fresh instance, and :func:`has_parameters` tells the
trainer to hand its parameters to the optimiser. Hyperparameter overrides given to
:func:`get` are checked against the callable's signature, so a typo in a config fails
with the loss name and the accepted keys.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.losses.hyperparameters import LossSignature, from_callable
from bench.search_space import Dimension, log_uniform


@dataclass(frozen=True)
class LossInfo:
    """Registry entry.

    ``relaxed``: hyperparameters selecting the loss's differentiable path (e.g.
    ``straight_through=False``), used by gradient checks against finite differences.
    ``stochastic``: the value depends on random draws (ListMLE's tie order, Gumbel noise,
    sampled rankings), so checks that compare two calls must use tie-free labels or the same
    generator state and batch shape.
    ``estimated_gradient``: the gradient is an unbiased estimate of the gradient of the value's
    expectation over the draws, not the derivative of the value (PL-Rank: the sampled metric
    is flat between rankings), so finite differences of one call cannot check it.
    ``search``: the loss's own tunable hyperparameters, name -> :class:`bench.search_space.Dimension`
    (the range a study's tuning stage draws from, :mod:`bench.config.tuning`; the learning rate,
    dropout and every other setting a protocol shares are the study config's ``tuning.space``).
    Empty: the loss has nothing of its own to tune (ListNet, Softmax, ListMLE, RMSE), or what it
    has is a cut-off or a cost that defines the loss rather than tunes it (``k``, ``m``, sample
    counts). Temperatures and sharpness parameters span two decades around the default, so the
    default sits inside every range.
    ``outputs``: what the scorer hands the loss. ``"scores"`` (every loss but one): one score
    per item, ``scores [B, L]``, the common signature below. ``"grade_logits"``: one logit per
    label grade, ``scores [B, L, C]`` with ``C`` the loss's ``grades`` hyperparameter; the
    trainer builds a scorer with ``C`` outputs and ranks by its expected grade
    (:class:`bench.models.ExpectedGrade`), as for ARF's point-wise Softmax
    (:mod:`bench.losses.grades`).
    """

    name: str
    target: str
    relaxed: Mapping[str, Any] = field(default_factory=dict)
    stochastic: bool = False
    outputs: str = "scores"
    estimated_gradient: bool = False
    search: Mapping[str, Dimension] = field(default_factory=dict)


def _entry(name: str, target: str, **kw: Any) -> tuple[str, LossInfo]:
    return name, LossInfo(name, target, **kw)


# the ranges the tuning stage draws a loss's own hyperparameters from (LossInfo.search)
TAU = {"tau": log_uniform(0.1, 10.0)}  # a relaxation's temperature (defaults 1 and 5)
SIGMA = {"sigma": log_uniform(0.1, 10.0)}  # a pairwise logistic's steepness (default 1)
ALPHA = {"alpha": log_uniform(1.0, 100.0)}  # ApproxNDCG's rank-sigmoid sharpness (default 10)


BUILTIN: dict[str, LossInfo] = dict(
    [
        _entry("pirank_ndcg", "bench.losses.pirank:pirank_ndcg", relaxed={"straight_through": False}, search=TAU),
        _entry("pirank_arp", "bench.losses.pirank:pirank_arp", relaxed={"straight_through": False}, search=TAU),
        _entry("neuralndcg", "bench.losses.neuralndcg:neuralndcg", search=TAU),
        _entry("neuralndcg_transposed", "bench.losses.neuralndcg:neuralndcg_transposed", search=TAU),
        _entry("sinkprop", "bench.losses.sinkprop:sinkprop", search=SIGMA),
        _entry("arf", "bench.losses.arf:ARFLoss", search={**TAU, "alpha": log_uniform(0.1, 10.0)}),
        _entry("arf_relax", "bench.losses.arf:arf_relax", search=TAU),
        _entry("approxndcg", "bench.losses.approxndcg:approxndcg", search=ALPHA),
        _entry("lambdaloss", "bench.losses.lambdaloss:lambdaloss", search={**SIGMA, "mu": log_uniform(1.0, 100.0)}),
        _entry("lambda_recall", "bench.losses.lambdaloss:lambda_recall", search=SIGMA),
        _entry("lambda_opa", "bench.losses.lambdaloss:lambda_opa", search=SIGMA),
        _entry("ranknet", "bench.losses.ranknet:ranknet", search=SIGMA),
        _entry("listnet", "bench.losses.listwise:listnet"),
        _entry("neuralsort_ce", "bench.losses.neuralsort_ce:neuralsort_ce", relaxed={"straight_through": False}, search=TAU),
        _entry("softmax", "bench.losses.listwise:softmax"),
        _entry("listmle", "bench.losses.listwise:listmle", stochastic=True),
        _entry("rmse", "bench.losses.listwise:rmse"),
        _entry("softrank_ndcg", "bench.losses.softrank:softrank_ndcg", search={"epsilon": log_uniform(0.1, 10.0)}),
        _entry("softrank_spearman", "bench.losses.softrank:softrank_spearman", search={"epsilon": log_uniform(0.1, 10.0)}),
        _entry("softsort_ndcg", "bench.losses.relaxed_ndcg:softsort_ndcg", search=TAU),
        _entry("diffsort_ndcg", "bench.losses.relaxed_ndcg:diffsort_ndcg", search={"steepness": log_uniform(1.0, 100.0)}),
        _entry("softmax_pointwise", "bench.losses.grades:softmax_pointwise", outputs="grade_logits"),
        _entry("plrank_ndcg", "bench.losses.plackett_luce:plrank_ndcg", stochastic=True, estimated_gradient=True),
        _entry("gumbel_approxndcg", "bench.losses.gumbel:gumbel_approxndcg", stochastic=True, search=ALPHA),
        _entry("gumbel_neuralsort_ce", "bench.losses.gumbel:gumbel_neuralsort_ce", stochastic=True, search=TAU),
    ]
)

# (package, directory) pairs scanned for ``__losses__`` plug-ins; extendable by callers.
PLUGIN_PACKAGES: list[tuple[str, Path]] = [("bench.losses", Path(__file__).resolve().parent)]
_RUNTIME: dict[str, LossInfo] = {}


def _declared_losses(path: Path) -> tuple[str, ...]:
    """The literal ``__losses__`` of a module, read from its source without importing it."""
    text = path.read_text(encoding="utf-8")
    if "__losses__" not in text:
        return ()
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise ValueError(f"{path}:{exc.lineno}: cannot parse loss plug-in: {exc.msg}") from exc
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__losses__" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError as exc:
                raise ValueError(f"{path}:{node.lineno}: __losses__ must be a literal tuple of names") from exc
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{path}:{node.lineno}: __losses__ must be a tuple of strings")
            return tuple(value)
    return ()


@functools.cache
def _scan(package: str, directory: Path) -> tuple[tuple[Path, str, str], ...]:
    """``(file, module, loss name)`` for every ``__losses__`` entry of one plug-in directory.

    Read once per process and directory (every :func:`names`, :func:`info` and :func:`get`
    consults the table): a plug-in file added to a directory that was already scanned is
    seen by the next process. A scan that fails (a malformed ``__losses__``, a name that
    clashes with a built-in or with another file's) is not cached: the error comes back on
    every call until the file is fixed.
    """
    builtin_modules = {info.target.split(":")[0] for info in BUILTIN.values()}
    found: list[tuple[Path, str, str]] = []
    for path in sorted(directory.glob("*.py")):
        module = f"{package}.{path.stem}"
        if path.stem.startswith("_") or module in builtin_modules:
            continue
        for name in _declared_losses(path):
            if name in BUILTIN or any(name == seen for _, _, seen in found):
                raise ValueError(f"{path}: loss name {name!r} is already registered")
            found.append((path, module, name))
    return tuple(found)


def _plugins() -> dict[str, LossInfo]:
    found: dict[str, LossInfo] = {}
    for package, directory in PLUGIN_PACKAGES:
        for path, module, name in _scan(package, Path(directory)):
            if name in found:  # declared in an earlier directory
                raise ValueError(f"{path}: loss name {name!r} is already registered")
            found[name] = LossInfo(name, f"{module}:{name}")
    return found


def _table() -> dict[str, LossInfo]:
    return {**BUILTIN, **_plugins(), **_RUNTIME}


def names() -> list[str]:
    """All registered loss names: built-ins (in the team's order), then plug-ins, then
    losses added with :func:`register`.

    >>> names()[:3]
    ['pirank_ndcg', 'pirank_arp', 'neuralndcg']
    >>> {"ranknet", "lambdaloss", "arf"} <= set(names())
    True
    """
    return list(_table())


def register(name: str, target: str | Callable[..., Any], **info: Any) -> None:
    """Register ``name`` at run time (``target`` a callable or ``"module:attribute"``)."""
    if name in BUILTIN:
        raise ValueError(f"loss name {name!r} is a built-in and cannot be re-registered")
    if callable(target):
        target = f"{target.__module__}:{target.__qualname__}"
    _RUNTIME[name] = LossInfo(name, target, **info)


def info(name: str) -> LossInfo:
    """The registry entry of ``name`` (``"module:attr"`` names get a plain entry)."""
    table = _table()
    if name in table:
        return table[name]
    if ":" in name:
        return LossInfo(name, name)
    known = ", ".join(table)
    raise ValueError(f"unknown loss {name!r}; known losses: {known}; or give 'package.module:function'")


@functools.cache
def _resolve(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"loss target {target!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"loss target {target!r}: cannot import module {module_name!r} ({exc})") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"loss target {target!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"loss target {target!r} is not callable")
    return obj


def _is_module_class(obj: Any) -> bool:
    # a class subclassing nn.Module was defined by a module that imported torch; looking torch up
    # instead of importing it keeps this module (which bench.config reads) free of torch
    torch = sys.modules.get("torch")
    return torch is not None and inspect.isclass(obj) and issubclass(obj, torch.nn.Module)


def signature(name: str) -> LossSignature:
    """The hyperparameters of loss ``name`` (:mod:`bench.losses.hyperparameters`: the one rule for them)."""
    return from_callable(_resolve(info(name).target))


def _check_hyper(name: str, obj: Any, hyper: Mapping[str, Any]) -> None:
    sig = from_callable(obj)
    unknown = sig.unknown(hyper)
    if unknown:
        raise ValueError(
            f"loss {name!r} has no hyperparameter(s) {', '.join(unknown)}; accepted: {', '.join(sig.accepted()) or 'none'}"
        )


def get(name: str, **hyper: Any) -> Callable[..., Any]:
    """The loss callable for ``name``, with ``hyper`` as overridable keyword defaults.

    Functions come back as-is (or as a ``functools.partial`` carrying ``hyper``); an
    ``nn.Module`` class is instantiated with ``hyper`` and a fresh instance is returned.

    >>> import torch
    >>> loss = get("ranknet", sigma=2.0)
    >>> round(loss(torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 0.0]]), torch.ones(1, 2, dtype=torch.bool)).item(), 4)
    0.6931
    >>> get("no_such_loss")
    Traceback (most recent call last):
    ...
    ValueError: unknown loss 'no_such_loss'; known losses: pirank_ndcg, ...
    """
    entry = info(name)
    obj = _resolve(entry.target)
    _check_hyper(name, obj, hyper)
    if _is_module_class(obj):
        return obj(**hyper)
    return functools.partial(obj, **hyper) if hyper else obj


def has_parameters(name: str) -> bool:
    """Whether the loss carries trainable parameters the optimiser must update.

    >>> has_parameters("ranknet")
    False
    """
    obj = _resolve(info(name).target)
    if not _is_module_class(obj):
        return False
    return any(p.requires_grad for p in obj().parameters())


def grade_outputs(name: str, **hyper: Any) -> int | None:
    """The number of logits per item a ``"grade_logits"`` loss takes (its ``grades``
    hyperparameter, from ``hyper`` or the loss's default); None for a loss on scores.

    >>> grade_outputs("ranknet"), grade_outputs("softmax_pointwise"), grade_outputs("softmax_pointwise", grades=3)
    (None, 5, 3)
    """
    entry = info(name)
    if entry.outputs == "scores":
        return None
    if entry.outputs != "grade_logits":
        raise ValueError(f"loss {name!r}: unknown outputs {entry.outputs!r} (known: scores, grade_logits)")
    obj = _resolve(entry.target)
    default = inspect.signature(obj.__init__ if _is_module_class(obj) else obj).parameters["grades"].default
    return int(hyper.get("grades", default))
