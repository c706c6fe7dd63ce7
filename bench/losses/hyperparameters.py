"""A loss's hyperparameters, from its signature: one rule, read with or without importing it.

A loss is called ``loss(scores, labels, mask, **hyper)`` (an ``nn.Module`` loss is built as
``Loss(**hyper)`` and called with the three inputs). Its **hyperparameters** are every
parameter that can be passed by keyword, except the three inputs of a function (its first
three positional parameters) and ``self`` of a class's ``__init__``. A hyperparameter
**accepts** a config value; it is **required** when it has no default and nothing else
supplies it: the trainer passes ``generator`` (a seeded ``torch.Generator``) per call to a
loss that takes one, and ``tau`` when the method has a ``train.tau_schedule``
(:func:`supplied_by_trainer`). A ``**kwargs`` parameter accepts any name.

The same rule serves two readers:

- the registry (:func:`from_callable`, on the imported loss: ``bench.losses.registry``);
- the workflow's DAG build (:func:`from_source`), which must not import torch: the module's
  source file is found on the search path the training jobs get (the working directory, then
  ``PYTHONPATH``, then the interpreter's path) without importing it or its packages, parsed
  with :mod:`ast`, and the ``def`` (or the ``class`` and its ``__init__``) read off the tree,
  following ``from module import name`` re-exports. Only what the tree cannot show (a loss
  bound by an assignment, a decorator, a compiled module, a class without its own
  ``__init__``) is read by importing it in a child process (:func:`from_imports`), so the
  Snakefile's process still never imports torch. That child also tells whether a module
  loads at all (its top level raises, or imports a missing package): the source cannot.

>>> sig = from_text("def hinge(s, y, m, *, margin=1.0, k): ...", "hinge")
>>> sig.accepted(), sig.required()
(['margin', 'k'], ['k'])
>>> sig.unknown({"margn": 1}), sig.missing({}, supplied_by_trainer(tau_schedule=False))
(['margn'], ['k'])
>>> from_text("class L:\\n    def __init__(self, *, tau=1.0): ...", "L").accepted()
['tau']
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the three inputs every loss function takes first, positionally
N_INPUTS = 3
#: what the trainer passes a loss per call when its signature has it (bench.training.loss)
GENERATOR = "generator"
TAU = "tau"


def supplied_by_trainer(*, tau_schedule: bool) -> tuple[str, ...]:
    """The hyperparameters the trainer fills in itself: the generator, and ``tau`` under a schedule."""
    return (GENERATOR, TAU) if tau_schedule else (GENERATOR,)


#: a default that is not a literal (an expression, a constant's name): its value is not read from source
NOT_LITERAL = "<not a literal>"


@dataclass(frozen=True)
class Param:
    name: str
    has_default: bool
    default: Any = NOT_LITERAL  # the default's value where a literal (or JSON) shows it: what tables print


@dataclass(frozen=True)
class LossSignature:
    """The hyperparameters of one loss (in signature order) and whether ``**kwargs`` takes any name."""

    params: tuple[Param, ...]
    open: bool = False
    where: str = ""  # file:line of the definition, for messages

    def accepted(self) -> list[str]:
        return [p.name for p in self.params]

    def defaults(self) -> dict[str, Any]:
        """Each hyperparameter's default value where the signature shows it as a literal.

        >>> from_text("def f(s, y, m, *, tau=5.0, k=None, g=GLOBAL, n): ...", "f").defaults()
        {'tau': 5.0, 'k': None}
        """
        return {p.name: p.default for p in self.params if p.has_default and p.default is not NOT_LITERAL}

    def required(self) -> list[str]:
        return [p.name for p in self.params if not p.has_default]

    def unknown(self, hyper: Iterable[str]) -> list[str]:
        """Given names the loss does not take (none when it has ``**kwargs``), sorted."""
        return [] if self.open else sorted(set(hyper) - set(self.accepted()))

    def missing(self, hyper: Iterable[str], supplied: Iterable[str] = ()) -> list[str]:
        """Required hyperparameters neither given nor supplied by the trainer, in signature order."""
        given = set(hyper) | set(supplied)
        return [name for name in self.required() if name not in given]

    def problems(self, loss: str, hyper: Iterable[str], supplied: Iterable[str] = ()) -> list[tuple[str, str]]:
        """``(hyperparameter, message)`` for each given name the loss does not take, then each
        required one that is missing: what a config key ``...params.<hyperparameter>`` is told."""
        hyper = list(hyper)
        accepted = ", ".join(self.accepted()) or "none"
        out = [(key, f"loss '{loss}' has no hyperparameter '{key}' (accepted: {accepted})")
               for key in self.unknown(hyper)]
        out += [(key, f"loss '{loss}' requires hyperparameter '{key}' (it has no default) and it is not given")
                for key in self.missing(hyper, supplied)]
        return out


def _from_parts(parts: Sequence[tuple[str, str, bool, Any]], skip: int, *, where: str = "") -> LossSignature:
    """``(name, kind, has_default, default)`` per parameter (kinds as :class:`inspect.Parameter`
    names them) -> the signature; the first ``skip`` positional parameters are not hyperparameters."""
    params, positional, is_open = [], 0, False
    for name, kind, has_default, default in parts:
        if kind == "VAR_KEYWORD":
            is_open = True
        elif kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD") and positional < skip:
            positional += 1
        elif kind in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"):
            params.append(Param(name, has_default, default if has_default else NOT_LITERAL))
    return LossSignature(tuple(params), is_open, where)


def _plain(value: Any) -> Any:
    """A default as JSON carries it (numbers, strings, booleans, None), else :data:`NOT_LITERAL`."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else NOT_LITERAL


def from_callable(obj: Any) -> LossSignature:
    """The signature of an imported loss: a function, or a class (its ``__init__`` without ``self``)."""
    import inspect

    is_class = inspect.isclass(obj)
    target = obj.__init__ if is_class else obj
    parts = [(p.name, p.kind.name, p.default is not p.empty, _plain(p.default))
             for p in inspect.signature(target).parameters.values()]
    return _from_parts(parts, 1 if is_class else N_INPUTS)


# ----------------------------------------------------------------------------- without importing


class LossNotFound(ValueError):
    """The module or the function a loss reference names does not exist; ``part`` says which."""

    def __init__(self, part: str, message: str):
        super().__init__(message)
        self.part = part  # "module" or "function"


class _NeedsImport(Exception):
    """The source does not show the loss's signature; import it to read it."""


def search_path(cwd: str | Path | None = None) -> list[str]:
    """Where a training job finds a user's module: its working directory first (the workflow puts
    it on ``PYTHONPATH``), then ``PYTHONPATH``, then this interpreter's path."""
    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return list(dict.fromkeys([str(cwd or os.getcwd()), *pythonpath, *sys.path]))


def find_module_file(module: str, path: Sequence[str]) -> Path:
    """The source file of ``module`` on ``path``, found without importing it or its packages."""
    parts = module.split(".")
    where: Sequence[str] | None = path
    spec = None
    for i in range(len(parts)):
        name, parent = ".".join(parts[: i + 1]), ".".join(parts[:i])
        spec = importlib.machinery.PathFinder.find_spec(name, list(where or []))
        if spec is None and (i == 0 or parent in sys.modules):
            # what the import system finds beyond plain folders (an editable install's finder, which
            # also serves the submodules of a namespace folder of the same name in the working
            # directory); this imports nothing new: nothing for a top-level name, else the parent,
            # which is imported already
            spec = importlib.util.find_spec(name)
        if spec is None:
            raise LossNotFound("module", f"module '{module}' not found (no '{name}' on the search path: the "
                                         "working directory, PYTHONPATH, then the installed packages)")
        where = spec.submodule_search_locations
    assert spec is not None
    if spec.submodule_search_locations is not None:  # a package: its __init__
        init = spec.origin
        if not init or not init.endswith(".py"):
            raise _NeedsImport(module)
        return Path(init)
    if not spec.origin or not spec.origin.endswith(".py"):
        raise _NeedsImport(module)  # compiled or zipped: only an import shows it
    return Path(spec.origin)


@functools.cache
def _parse(path: Path, mtime_ns: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _tree(path: Path) -> ast.Module:
    try:
        return _parse(path, path.stat().st_mtime_ns)
    except SyntaxError as exc:
        raise LossNotFound("module", f"{path}:{exc.lineno}: cannot parse: {exc.msg}") from None


def _literal(node: ast.expr | None) -> Any:
    """A default's value where the source writes a literal, else :data:`NOT_LITERAL`."""
    if node is None:
        return NOT_LITERAL
    try:
        return _plain(ast.literal_eval(node))
    except ValueError:
        return NOT_LITERAL


def _ast_parts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, str, bool, Any]]:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    n_default = len(a.defaults)
    first_default = len(positional) - n_default
    parts = [(arg.arg, "POSITIONAL_ONLY" if i < len(a.posonlyargs) else "POSITIONAL_OR_KEYWORD",
              i >= first_default, _literal(a.defaults[i - first_default]) if i >= first_default else NOT_LITERAL)
             for i, arg in enumerate(positional)]
    if a.vararg is not None:
        parts.append((a.vararg.arg, "VAR_POSITIONAL", False, NOT_LITERAL))
    parts += [(arg.arg, "KEYWORD_ONLY", default is not None, _literal(default))
              for arg, default in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg is not None:
        parts.append((a.kwarg.arg, "VAR_KEYWORD", False, NOT_LITERAL))
    return parts


def _bound_names(node: ast.AST) -> set[str]:
    """Names a top-level statement binds other than by a plain ``def``/``class``/``from`` import."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            names.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in sub.names)
    return names


def _signature_in(tree: ast.Module, attr: str, path: Path, module: str, search: Sequence[str],
                  depth: int) -> LossSignature:
    """The signature of top-level ``attr`` in a parsed module (see the module docstring)."""
    where = f"{path}"
    found: ast.AST | None = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == attr:
            found = node  # the last binding wins, as at import
        elif isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == attr for a in node.names):
            found = node
        elif isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            raise _NeedsImport(module)
        elif isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            raise _NeedsImport(module)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ImportFrom)) \
                and attr in _bound_names(node):
            raise _NeedsImport(module)  # bound by an assignment, a loop, a conditional ...
    if found is None:
        raise LossNotFound("function", f"module '{module}' ({path}) has no function or class '{attr}'")
    if isinstance(found, ast.ImportFrom):
        alias = next(a for a in found.names if (a.asname or a.name) == attr)
        source = _absolute(found, module, path)
        if depth > 10:
            raise _NeedsImport(module)
        return _signature_of(source, alias.name, search, depth + 1)
    if getattr(found, "decorator_list", None):
        raise _NeedsImport(module)  # a decorator may change the signature
    if isinstance(found, ast.ClassDef):
        init = next((n for n in found.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None or init.decorator_list:
            raise _NeedsImport(module)  # inherited __init__: only an import shows it
        return _from_parts(_ast_parts(init), 1, where=f"{where}:{init.lineno}")
    assert isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef))
    return _from_parts(_ast_parts(found), N_INPUTS, where=f"{where}:{found.lineno}")


def _absolute(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The absolute module name of a (possibly relative) ``from ... import``."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _signature_of(module: str, attr: str, search: Sequence[str], depth: int = 0) -> LossSignature:
    path = find_module_file(module, search)
    return _signature_in(_tree(path), attr, path, module, search, depth)


def split_target(target: str) -> tuple[str, str]:
    """``'package.module:function'`` -> ``('package.module', 'function')``; refuses other forms."""
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise LossNotFound("module", f"loss target '{target}' must look like 'package.module:function'")
    return module, attr


def from_source(target: str, search: Sequence[str] | None = None) -> LossSignature | None:
    """The signature of ``'module:function'`` read from its source without importing anything;
    ``None`` when only an import can show it (then :func:`from_imports`). Raises
    :class:`LossNotFound` when the module or the function does not exist."""
    module, attr = split_target(target)
    try:
        return _signature_of(module, attr, search_path() if search is None else search)
    except _NeedsImport:
        return None


def from_text(text: str, attr: str, module: str = "<text>") -> LossSignature:
    """The signature of ``attr`` in a module's source text (:func:`from_source`'s reading)."""
    path = Path(f"{module}.py")
    return _signature_in(ast.parse(text), attr, path, module, [], 0)


# ----------------------------------------------------------------------------- by importing, in a child process


def from_imports(targets: Sequence[str], cwd: str | Path | None = None) -> dict[str, LossSignature | LossNotFound]:
    """Each target's signature, or why it cannot be used, read by importing it in one child process
    (what the training job would import: the working directory first on ``PYTHONPATH``); torch
    stays out of this one.

    The child reports one line per target as it goes, so a module that ends the process while it
    is imported (``os._exit``, a crash in a compiled extension) is the first target without a line;
    it and those after it (not reached) are answered from the child's exit status and last line."""
    if not targets:
        return {}
    cwd = str(cwd or os.getcwd())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (cwd, os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, "-m", "bench.losses.hyperparameters", *targets], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    out: dict[str, LossSignature | LossNotFound] = {}
    for line in proc.stdout.splitlines():
        try:
            target, rec = json.loads(line)
        except ValueError:
            continue  # written to file descriptor 1 by compiled code while importing: not ours
        if "error" in rec:
            out[target] = LossNotFound(rec["part"], rec["error"])
        else:
            out[target] = LossSignature(tuple(Param(n, d, v) for n, d, v in rec["params"]), rec["open"], rec["where"])
    missing = [t for t in targets if t not in out]
    if missing:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        module = split_target(missing[0])[0]
        out[missing[0]] = LossNotFound("module", f"importing module '{module}' ended the process "
                                                 f"(exit status {proc.returncode}): {tail}")
        for target in missing[1:]:
            out[target] = LossNotFound("module", f"not read: importing module '{module}' ({missing[0]}) "
                                                 "ended the process first")
    return out


def _where_raised(exc: BaseException) -> str:
    """``file:line`` of the innermost frame that raised (import machinery frames aside)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen")]
    return f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _describe_by_import(target: str) -> dict[str, Any]:
    import importlib

    module, attr = split_target(target)
    try:
        obj: Any = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(f"{exc.name}.")):
            return {"part": "module", "error": f"module '{module}' not found ({exc})"}
        # the module is there; something it imports is not
        return {"part": "module", "error": f"importing module '{module}' failed: ModuleNotFoundError: {exc}"
                                           f"{_where_raised(exc)}"}
    except (Exception, SystemExit) as exc:  # the user's module fails while importing: say how and where
        message = " ".join(str(exc).split())  # one line
        return {"part": "module", "error": f"importing module '{module}' failed: {type(exc).__name__}: {message}"
                                           f"{_where_raised(exc)}"}
    for part in attr.split("."):
        if not hasattr(obj, part):
            return {"part": "function", "error": f"module '{module}' has no function or class '{attr}'"}
        obj = getattr(obj, part)
    if not callable(obj):
        return {"part": "function", "error": f"'{target}' is not callable"}
    sig = from_callable(obj)
    return {"params": [[p.name, p.has_default, p.default] for p in sig.params], "open": sig.open, "where": target}


def _main(targets: Sequence[str]) -> None:
    """The child of :func:`from_imports`: one JSON line per target, flushed before the next import;
    what the imported modules print goes to stderr, so stdout carries only these lines."""
    results = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        for target in targets:
            record = _describe_by_import(target)
            results.write(json.dumps([target, record]) + "\n")
            results.flush()


if __name__ == "__main__":
    _main(sys.argv[1:])
