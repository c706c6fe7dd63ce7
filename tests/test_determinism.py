"""Pinned kernels (bench.training.determinism): the variables take effect in a fresh process and
in a job server child, a process that computed first is refused, and a tiny training of frozen
methods gives the same bits whatever instruction sets the CPU offers the libraries outside the
pinned kernels. Every training runs in a subprocess: the variables act once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from bench.training import determinism
from helpers import ROOT, make_prepared, toy_neural_config

NATIVE = str(torch.backends.cpu.get_cpu_capability())
#: what a CPU without AVX2 or FMA would make the libraries pick outside the pinned kernels:
#: MKL's instruction limit, glibc's maths functions (libm picks FMA variants by CPU), NumPy's loops
LESSER_CPU = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA",
              "NPY_DISABLE_CPU_FEATURES": "AVX2 FMA3 F16C AVX"}


def _env(extra: dict[str, str]) -> dict[str, str]:
    """This environment without any kernel variable or job server, one thread, plus ``extra``."""
    clean = {k: v for k, v in os.environ.items()
             if k not in (*determinism.PINNED_ENV, *LESSER_CPU, "LTR_BENCH_JOB_SERVER")}
    return {**clean, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def _python(code: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, capture_output=True,
                          text=True, env=_env(env), timeout=300)


def test_env_assignments_and_request():
    assert determinism.env_assignments() == "ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE"
    assert determinism.requests_pinned(dict(determinism.PINNED_ENV))
    assert not determinism.requests_pinned({"ATEN_CPU_CAPABILITY": "default"})  # MKL would still pick by CPU


def test_pinned_variables_take_effect_after_the_job_servers_imports():
    """The job server imports everything once and runs its warm-ups, then forks; its child
    sets the client's environment: the variables must still act then (no preloaded module
    and no warm-up computes with torch)."""
    done = _python("""
        import importlib, json, os
        from bench.jobserver import PRELOAD, WARM_UP
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        for spec in WARM_UP:
            module, function = spec.split(":")
            getattr(importlib.import_module(module), function)()
        pid = os.fork()
        if pid == 0:
            from bench import frozen
            from bench.training import determinism
            os.environ.update(determinism.PINNED_ENV)
            determinism.check_pinned()
            facts = determinism.kernel_facts()
            facts["frozen_says_pinned"] = frozen.kernels_pinned(frozen.current_platform(1))  # what freeze records
            print(json.dumps(facts), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
    """, {})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["aten"] == "DEFAULT" and facts["mkl_cbwr"] in ("COMPATIBLE", "n/a") and facts["pinned"]
    assert facts["frozen_says_pinned"]


def test_a_process_that_computed_before_the_variables_is_refused():
    done = _python("""
        import os, torch
        from bench.training import determinism
        a = torch.randn(64, 64)
        (a @ a).exp().sum()  # torch and MKL choose their kernels here
        os.environ.update(determinism.PINNED_ENV)
        determinism.check_pinned()
    """, {})
    if NATIVE == "DEFAULT":
        pytest.skip("this CPU's own ATen kernels are the scalar ones")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"aten {NATIVE} (pinned: DEFAULT)" in last and "set it in the environment the process starts with" in last


TRAIN = """
    import hashlib, json, sys
    import numpy as np
    from bench.training.cli import run_job
    from bench.training.determinism import kernel_facts
    config, prepared, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    digests = {}
    for method in ("ranknet", "softmax"):
        run = run_job(config, prepared, f"{out}/{method}", method=method, seed=0, device="cpu", quiet=True, threads=1)
        digests[method] = hashlib.sha256(np.load(run / "scores.npy").tobytes()).hexdigest()
    print(json.dumps({"digests": digests, "kernels": kernel_facts()}))
"""


def _train(tmp_path, prepared, label: str, env: dict[str, str]) -> dict:
    config = toy_neural_config("softmax", epochs=1)
    done = _python(TRAIN, env, json.dumps(config), str(prepared), str(tmp_path / label))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_pinned_training_is_bit_identical_whatever_the_cpu_offers_outside_the_pinned_kernels(tmp_path):
    prepared = make_prepared(tmp_path / "prep" / "toy" / "fold1")
    pinned = _train(tmp_path, prepared, "pinned", dict(determinism.PINNED_ENV))
    lesser = _train(tmp_path, prepared, "lesser", {**determinism.PINNED_ENV, **LESSER_CPU})
    assert pinned["kernels"]["pinned"] and lesser["kernels"]["pinned"]
    assert lesser["digests"] == pinned["digests"]
    if NATIVE == "DEFAULT":
        return  # nothing else to compare with: this CPU's own ATen kernels are the scalar ones
    # the comparison can fail: the CPU's own kernels give other bits than the pinned ones
    native = _train(tmp_path, prepared, "native", {})
    assert not native["kernels"]["pinned"] and native["kernels"]["aten"] == NATIVE
    for method, digest in pinned["digests"].items():
        assert native["digests"][method] != digest, method


def test_the_workflow_pins_the_frozen_methods_runs_and_the_compare_runs_only():
    from bench.config import plan
    from bench.config import validate as cv

    cfg = cv.load_config()
    protocol, dataset = cfg["freeze"]["protocol"], plan.freeze_datasets(cfg)[0]
    frozen = plan.freeze_methods(cfg)[0]
    other = next(m for m in cfg["methods"] if m not in plan.freeze_methods(cfg))
    # a frozen method's every tuning configuration and its chosen one's runs: the choice is part of the baseline
    for name in (frozen, f"{frozen}+cfg2", f"{frozen}+tuned"):
        assert determinism.trains_pinned(cfg, protocol, dataset, name), name
    assert determinism.trains_pinned(cfg, plan.COMPARE_EXPERIMENT, dataset, "any_new_loss")
    assert not determinism.trains_pinned(cfg, protocol, dataset, other)
    assert not determinism.trains_pinned(cfg, next(p for p in cfg["protocols"] if p != protocol), dataset, frozen)
    assert not determinism.trains_pinned(cfg, protocol, "not-a-frozen-dataset", frozen)
