"""Every loss resolved when the config is validated: torch-free, one line naming the key.

Oracle for the static reading: :func:`inspect.signature` of the imported loss
(:func:`bench.losses.hyperparameters.from_callable`) for every registered loss and for user modules
with functions, classes, re-exports and losses only an import can show.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from bench import losses
from bench.config.losses import check_losses
from bench.config.validate import load_config, validate_config
from bench.errors import ConfigError
from bench.losses import hyperparameters as sig
from helpers import ROOT

USER = {
    "mylosses.py": """
        from mylosses_impl import reexported as hinge_alias

        def hinge(scores, labels, mask, *, margin=1.0):
            return (scores * mask).sum()

        def needs_k(s, y, m, k, *, tau=1.0, generator=None):
            return (s * m).sum()

        class Scaled:
            def __init__(self, *, scale=2.0):
                self.scale = scale

        built = hinge  # bound by an assignment: only an import shows it
    """,
    "mylosses_impl.py": """
        def reexported(scores, labels, mask, *, width):
            return scores.sum()
    """,
}


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    for name, text in USER.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)  # the working directory: where a training job finds the module
    return tmp_path


def _methods(**entries) -> dict:
    return {"methods": {name: {"loss": loss, "params": params} for name, (loss, params) in entries.items()}}


def test_every_registered_loss_reads_the_same_from_source_as_from_the_import():
    for name in losses.names():
        target = losses.info(name).target
        static = sig.from_source(target)
        assert static is not None, name
        imported = losses.signature(name)
        assert (static.params, static.open) == (imported.params, imported.open), name


def test_user_losses_read_from_source_follow_reexports_and_fall_back_to_an_import(user_dir):
    path = sig.search_path(user_dir)
    assert sig.from_source("mylosses:hinge", path).accepted() == ["margin"]
    k = sig.from_source("mylosses:needs_k", path)
    assert k.accepted() == ["k", "tau", "generator"] and k.required() == ["k"]
    assert sig.from_source("mylosses:Scaled", path).accepted() == ["scale"]
    alias = sig.from_source("mylosses:hinge_alias", path)  # `from mylosses_impl import reexported as ...`
    assert alias.required() == ["width"]
    assert sig.from_source("mylosses:built", path) is None  # an assignment: the source cannot tell
    by_import = sig.from_imports(["mylosses:built", "mylosses:nothing"], cwd=user_dir)
    assert by_import["mylosses:built"].accepted() == ["margin"]
    assert isinstance(by_import["mylosses:nothing"], sig.LossNotFound)


@pytest.mark.parametrize(("loss", "params", "key", "message"), [
    ("nomodule:fn", {}, "methods.mine.loss", "module 'nomodule' not found"),
    ("mylosses:no_such_fn", {}, "methods.mine.loss", "has no function or class 'no_such_fn'"),
    ("mylosses:hinge", {"margn": 1.0}, "methods.mine.params.margn", "has no hyperparameter 'margn' (accepted: margin)"),
    ("mylosses:needs_k", {}, "methods.mine.params.k", "requires hyperparameter 'k' (it has no default)"),
    ("mylosses:hinge_alias", {}, "methods.mine.params.width", "requires hyperparameter 'width'"),
    ("no_such_registered_name", {}, "methods.mine.loss", "unknown loss 'no_such_registered_name'"),
])
def test_each_bad_loss_is_one_line_naming_its_key(user_dir, loss, params, key, message):
    with pytest.raises(ConfigError) as info:
        check_losses(_methods(mine=(loss, params)))
    text = str(info.value)
    assert text.startswith(f"config key '{key}'") and message in text and "\n" not in text


def test_the_trainer_supplies_generator_and_a_scheduled_tau(user_dir):
    check_losses(_methods(mine=("mylosses:needs_k", {"k": 3})))  # generator: the trainer's
    entry = {"loss": "mylosses:needs_k", "params": {"k": 3}, "train": {"tau_schedule": {"kind": "constant", "value": 1}}}
    check_losses({"methods": {"mine": entry}})
    # the user module found by the import fallback is still checked
    with pytest.raises(ConfigError, match=r"'methods.mine.params.margn'.*accepted: margin"):
        check_losses(_methods(mine=("mylosses:built", {"margn": 1})))


def test_a_compared_loss_is_named_where_it_is_written(user_dir):
    config = {"methods": {}, "compare": {"losses": [{"name": "oops", "loss": "mylosses:no_such_fn"}]}}
    with pytest.raises(ConfigError, match=r"^config key 'compare.losses.0.loss' \(method 'oops'\): "):
        check_losses(config)
    config["compare"]["losses"] = ["mylosses:hinge", {"name": "two", "loss": "mylosses:hinge", "params": {"x": 1}}]
    with pytest.raises(ConfigError, match=r"^config key 'compare.losses.1.params.x' \(method 'two'\)"):
        check_losses(config)


BROKEN = {
    "raises_at_import.py": "print('noise on stdout')\nraise RuntimeError('no GPU\\nhere')\n\n"
                           "def hinge(scores, labels, mask, *, margin=1.0):\n    return 0\n",
    "needs_missing_package.py": "import no_such_package_xyz\n\n"
                                "def hinge(scores, labels, mask, *, margin=1.0):\n    return 0\n",
    "ends_the_process.py": "import os\nos._exit(3)\n\ndef hinge(scores, labels, mask):\n    return 0\n",
}


@pytest.mark.parametrize(("module", "message"), [
    ("raises_at_import", "importing module 'raises_at_import' failed: RuntimeError: no GPU here (raises_at_import.py:2)"),
    ("needs_missing_package", "importing module 'needs_missing_package' failed: ModuleNotFoundError: "
                              "No module named 'no_such_package_xyz' (needs_missing_package.py:1)"),
    ("ends_the_process", "importing module 'ends_the_process' ended the process (exit status 3)"),
])
def test_a_user_module_that_fails_to_load_is_refused_naming_the_compare_key(user_dir, module, message):
    """The source shows a good signature; only the import shows the module does not load."""
    (user_dir / f"{module}.py").write_text(BROKEN[f"{module}.py"])
    assert sig.from_source(f"{module}:hinge", sig.search_path(user_dir)) is not None
    config = {"methods": {}, "compare": {"losses": ["mylosses:hinge", {"name": "bad4", "loss": f"{module}:hinge"}]}}
    with pytest.raises(ConfigError) as info:
        check_losses(config)
    text = str(info.value)
    assert text.startswith("config key 'compare.losses.1.loss' (method 'bad4'): ") and "\n" not in text
    assert message in text.replace(str(user_dir) + os.sep, ""), text


def test_validation_resolves_losses_without_importing_torch():
    code = ("import sys\nfrom bench.config.validate import load_config\n"
            "load_config(overrides={'compare': {'losses': ['examples.my_loss:pairwise_squared_hinge']}})\n"
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr
    raw = load_config()
    raw["methods"]["ranknet"]["params"] = {"sigam": 1.0}
    with pytest.raises(ConfigError, match="'methods.ranknet.params.sigam'"):
        validate_config(raw)


# one dry run in the default suite (each starts Snakemake: seconds), the other three are `slow`
@pytest.mark.parametrize(("entry", "key"), [
    ('loss: "tests_required_loss:needs_margin"', "compare.losses.0.params.margin"),
    ('loss: "tests_required_loss_broken:hinge"', "compare.losses.0.loss"),  # fails on import
    pytest.param('loss: "nomodule:fn"', "compare.losses.0.loss", marks=pytest.mark.slow),
    pytest.param('loss: "examples.my_loss:no_such_fn"', "compare.losses.0.loss", marks=pytest.mark.slow),
    pytest.param('loss: "examples.my_loss:pairwise_squared_hinge"\n      params: {margn: 1.0}',
                 "compare.losses.0.params.margn", marks=pytest.mark.slow),
])
def test_a_dry_run_refuses_each_bad_loss_before_any_job(tmp_path, entry, key):
    (tmp_path / "tests_required_loss.py").write_text("def needs_margin(scores, labels, mask, *, margin):\n    return 0\n")
    (tmp_path / "tests_required_loss_broken.py").write_text(BROKEN["raises_at_import.py"])
    config = tmp_path / "bad.yaml"
    config.write_text(f"compare:\n  losses:\n    - name: oops\n      {entry}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # where a job would find the user's module too
    proc = subprocess.run(["snakemake", "-n", "--nolock", "compare", f"--configfile={config}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "config key" in line]
    assert len(errors) == 1 and errors[0].startswith(f"invalid configuration: config key '{key}' (method 'oops')"), text
    assert "WorkflowError" not in text and 'File "' not in text  # the one line, no file/line noise around it
    assert "Job stats" not in text and "rule train" not in text  # no DAG, no job


def test_builtin_losses_resolve_beside_a_namespace_folder_of_the_same_name(tmp_path, monkeypatch):
    """A workflow copy holds bench/report/paper_numbers.yaml but no package: the folder is a
    namespace portion of `bench` ahead of the installed package, whose finder still serves its
    modules to the jobs; the static reading must find them the same way."""
    (tmp_path / "bench" / "report").mkdir(parents=True)
    (tmp_path / "bench" / "report" / "paper_numbers.yaml").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    check_losses(_methods(mine=("ranknet", {"sigma": 2.0})))
    with pytest.raises(ConfigError, match="'methods.mine.params.sigam'"):
        check_losses(_methods(mine=("ranknet", {"sigam": 2.0})))
