"""Start-up cost of a workflow job: every Snakemake job is a fresh ``ltr-bench`` process, so
an import that a job does not need is paid ~100 times per default study. And of a user's first
command, ``ltr-bench --help``: names and lines only, no stage module imported."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

import torch

from bench import cli
from bench.training.device import deterministic

#: what a stage module imports and a list of the commands must not (seconds of CPU together)
HEAVY = ("torch", "pandas", "scipy", "snakemake", "matplotlib", "lightgbm", "xgboost", "numpy", "numba")


def test_deterministic_sets_and_restores_the_kernel_flag():
    before = torch.are_deterministic_algorithms_enabled()
    with deterministic(torch.device("cpu")):
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()
    assert torch.are_deterministic_algorithms_enabled() == before


def test_a_training_process_does_not_import_the_compiler_stack():
    # torch.use_deterministic_algorithms imports torch._dynamo (1.3-1.8 s per job here);
    # the trainer sets the kernel flag alone unless inductor is already loaded
    code = (
        "import sys, torch\n"
        "from bench.training.device import deterministic\n"
        "with deterministic(torch.device('cpu')):\n"
        "    assert torch.are_deterministic_algorithms_enabled()\n"
        "print('torch._dynamo' in sys.modules, 'torch._inductor.config' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_with_inductor_loaded_both_flags_follow():
    code = (
        "import torch, torch._inductor.config as ic\n"
        "from bench.training.device import deterministic\n"
        "with deterministic(torch.device('cpu')):\n"
        "    print(torch.are_deterministic_algorithms_enabled(), ic.deterministic)\n"
        "print(torch.are_deterministic_algorithms_enabled(), ic.deterministic)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "False", "False"]


def _imported_by(argv: list[str]) -> tuple[str, list[str]]:
    """``ltr-bench ARGV``'s output in a fresh process (here, not in a job server), and the heavy
    packages it imported."""
    code = (
        "import json, sys\n"
        "from bench.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LTR_BENCH_JOB_SERVER"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    *printed, imported = out.stdout.splitlines()
    return "\n".join(printed), json.loads(imported)


def test_help_imports_no_heavy_module():
    printed, imported = _imported_by(["--help"])
    assert imported == []
    commands = [line.split()[0] for line in printed.splitlines() if line.startswith("    ") and line[4] != " "]
    assert commands == [*cli.COMMANDS, cli.JOB_SERVER]


def test_every_command_and_its_line_are_its_modules():
    """The listing (:data:`bench.cli.COMMANDS`) names each command its module registers, with the
    module's own help line, in the order the modules register them."""
    listed: list[tuple[str, str]] = []
    for module in dict.fromkeys(module for module, _ in cli.COMMANDS.values()):
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register_cli(sub)
        listed += [(action.dest, action.help) for action in sub._choices_actions]
    assert listed == [(name, line) for name, (_, line) in cli.COMMANDS.items()]


def test_a_command_imports_its_own_module_only():
    """A command's parser holds its module's commands (its arguments, its --help); no command, an
    unknown one or an option first get the listing."""
    assert cli._command(["datasets", "--help"]) == "datasets" and cli._command(["-h", "train"]) is None
    assert cli._command(["no-such-command"]) is None and cli._command([]) is None
    parser = cli._build_parser("stats")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == ["stats", "tuning-summary"]
    assert "--inputs" in sub.choices["stats"].format_help()
