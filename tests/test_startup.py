"""Start-up cost of a workflow job: every Snakemake job is a fresh ``ltr-bench`` process, so
an import that a job does not need is paid ~100 times per default study."""

from __future__ import annotations

import subprocess
import sys

import torch

from bench.training.device import deterministic


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
