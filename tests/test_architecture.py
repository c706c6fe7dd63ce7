"""The package's shape (docs/architecture.md), checked on the source with ``ast``.

Every module under ``bench/`` is parsed (nothing is imported) and every ``import`` in it,
module-level or inside a function, becomes an edge. The rules:

- a module imports only from lower layers (:data:`LAYERS`, with every ``<package>.cli`` at
  :data:`CLI_LAYER`), from its own package, or ``bench.errors`` (which imports nothing of the
  package: every module may raise its errors, the atomic writers a full disk); the layer table
  of docs/architecture.md numbers them the same (checked);
- only ``cli`` modules may import ``bench.cli`` (none needs to: errors live in bench.errors);
- losses, metrics and models import nothing but the bottom layer;
- report never imports training, losses or perf (figures read computed tables);
- nothing reachable from ``bench.config`` imports torch (the Snakefile imports it), and
  projecting a job's cost (``bench.costs``, which sizes the workflow's cluster requests) does
  not import it either;
- no import cycle inside ``bench``;
- no function in ``bench/training/`` is longer than 60 lines or takes more than 5
  positional parameters.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache

import pytest

from helpers import ROOT

PACKAGE = ROOT / "bench"

# top-level unit of bench -> layer; a module may import only units of a lower layer
LAYERS: dict[str, int] = {
    "bench": 0, "bench.errors": 0, "bench.atomic": 0, "bench.seeds": 0,
    "bench.provenance": 0,
    "bench.choices": 0, "bench.jobserver": 0, "bench.jit": 0, "bench.search_space": 0,
    "bench.resume": 1, "bench.cluster": 1, "bench.cluster_faults": 1,
    "bench.overhead": 1, "bench.data": 1, "bench.losses": 1, "bench.metrics": 1, "bench.models": 1,
    "bench.config": 2, "bench.results": 2,
    "bench.training": 3, "bench.evaluate": 3, "bench.stats": 3, "bench.frozen": 3, "bench.curves": 3,
    "bench.selection": 3, "bench.ranking": 3,
    "bench.report": 4,
    "bench.perf": 5,
    "bench.costs": 6,
    "bench.cli": 8,
}
ERRORS = "bench.errors"  # may be imported by every module (it imports nothing of the package: checked)
CLI_LAYER = 7  # every `<package>.cli` module: above the packages, below bench.cli
BOTTOM_ONLY = ("bench.losses", "bench.metrics", "bench.models")
# beyond the layers: what a unit (its `cli` module included) must not know of. Data knows no training
# (the progress reporter every job shares is bench.atomic.progress, layer 0), the result frames no data
# layer (their digests are bench.atomic.integrity's, layer 0), the report no training, losses or timing
FORBIDDEN = {"bench.report": ("bench.training", "bench.losses", "bench.perf"), "bench.data": ("bench.training",),
             "bench.results": ("bench.data",)}
TRAINING_MAX_LINES = 60
TRAINING_MAX_POSITIONAL = 5


def _module_name(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
            for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return (ROOT / name.replace(".", "/") / "__init__.py").exists()


def _imports(name: str, tree: ast.Module) -> list[tuple[str, int]]:
    """``(imported name, line)`` for every import in the module (absolute names)."""
    known = modules()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import: resolve against this module's package
                pkg = name.split(".") if _is_package(name) else name.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((sub if sub in known else base, node.lineno))
    return out


def unit(name: str) -> str:
    """The layered unit a module belongs to (``bench.training.loop`` -> ``bench.training``)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else name


def layer(name: str) -> int:
    if name.endswith(".cli") and name != "bench.cli":
        return CLI_LAYER
    return LAYERS[unit(name)]


def bench_edges() -> dict[str, set[str]]:
    return {m: {i for i, _ in _imports(m, t) if i == "bench" or i.startswith("bench.")} for m, t in modules().items()}


def test_every_module_has_a_layer():
    assert [m for m in modules() if unit(m) not in LAYERS] == []


def test_no_upward_or_sideways_import():
    bad = []
    for m, tree in modules().items():
        for imported, line in _imports(m, tree):
            if not imported.startswith("bench"):
                continue
            if unit(imported) == unit(m) and not imported.endswith(".cli"):
                continue  # inside one package
            if imported == "bench.cli" and m.endswith(".cli"):
                continue  # checked by the next test
            if imported == ERRORS:
                continue  # every error class, importing nothing of the package: any module raises them
            if layer(imported) >= layer(m):
                bad.append(f"{m}:{line} imports {imported} (layer {layer(imported)} >= {layer(m)})")
    assert bad == []


def test_errors_import_nothing_of_the_package():
    assert [i for i, _ in _imports(ERRORS, modules()[ERRORS]) if i.startswith("bench")] == []


def test_only_cli_modules_import_bench_cli():
    bad = [f"{m}:{line}" for m, t in modules().items() for i, line in _imports(m, t)
           if i == "bench.cli" and not m.endswith(".cli")]
    assert bad == []


def test_losses_metrics_and_models_import_only_the_bottom_layer():
    bad = [f"{m}:{line} imports {i}" for m, t in modules().items() if unit(m) in BOTTOM_ONLY
           for i, line in _imports(m, t)
           if i.startswith("bench") and unit(i) != unit(m) and LAYERS[unit(i)] != 0]
    assert bad == []


def test_no_unit_imports_what_it_must_not_know_of():
    bad = [f"{m}:{line} imports {i}" for m, t in modules().items() for banned_from, banned in FORBIDDEN.items()
           if unit(m) == banned_from for i, line in _imports(m, t) if unit(i) in banned]
    assert bad == []


def test_no_import_cycle():
    edges = bench_edges()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                cycles.append(" -> ".join(path[path.index(n):] + [n]))
            elif n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_nothing_reachable_from_config_imports_torch():
    edges = bench_edges()
    seen, todo = set(), [m for m in modules() if unit(m) == "bench.config"]
    while todo:
        m = todo.pop()
        if m in seen or m not in edges:
            continue
        seen.add(m)
        todo += edges[m]
    torch_users = sorted(m for m in seen for i, _ in _imports(m, modules()[m]) if i.split(".")[0] == "torch")
    assert torch_users == []
    code = "import sys, bench.config.plan, bench.config.validate, bench.config.run; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_projecting_costs_imports_no_torch():
    """The Snakefile sizes cluster requests with bench.costs: projecting a job must not import torch."""
    code = ("import sys\n"
            "from bench.config.validate import load_config\n"
            "from bench.config.jobs import target_jobs\n"
            "from bench.costs.calibration import Calibration, Device\n"
            "from bench.costs.model import Context, project\n"
            "config = load_config()\n"
            "ctx = Context(config, Calibration(Device('cpu', 'x', 1)))\n"
            "for job in target_jobs(config, ['all']):\n"
            "    project(ctx, job)\n"
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def _documented_layers() -> dict[str, int]:
    """The layer table of docs/architecture.md as ``{unit: layer}`` (``"<package>.cli"``: the cli layer)."""
    import re

    out = {}
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        row = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if not row:
            continue
        for name in re.findall(r"`([^`]+)`", row.group(2)):
            unit = {"__init__.py": "bench", "<package>/cli.py": "<package>.cli"}.get(name)
            out[unit or "bench." + name.removesuffix(".py").removesuffix("/")] = int(row.group(1))
    return out


def test_the_documented_layers_are_the_enforced_ones():
    assert _documented_layers() == {**LAYERS, "<package>.cli": CLI_LAYER}


def test_the_flat_modules_are_gone():
    assert sorted(p.name for p in PACKAGE.glob("perf_*.py")) == []
    assert not (PACKAGE / "runs.py").exists() and not (PACKAGE / "train.py").exists()


def _functions():
    for m, tree in modules().items():
        if unit(m) != "bench.training":
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield m, node


def _positional(fn: ast.FunctionDef) -> int:
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    return len([n for n in names if n not in ("self", "cls")])


@pytest.mark.parametrize("limit", [TRAINING_MAX_LINES])
def test_training_functions_are_short(limit):
    long = [f"{m}.{fn.name}: {fn.end_lineno - fn.lineno + 1} lines" for m, fn in _functions()
            if fn.end_lineno - fn.lineno + 1 > limit]
    assert long == []


@pytest.mark.parametrize("limit", [TRAINING_MAX_POSITIONAL])
def test_training_functions_take_few_positional_parameters(limit):
    wide = [f"{m}.{fn.name}: {_positional(fn)}" for m, fn in _functions() if _positional(fn) > limit]
    assert wide == []
