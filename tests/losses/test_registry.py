"""The loss registry: names, lazy resolution, user losses, plug-ins, hyperparameter checks."""

from __future__ import annotations

import textwrap

import pytest
import torch

from bench import losses
from bench.losses import registry

TEAM_NAMES = [
    "pirank_ndcg", "pirank_arp", "neuralndcg", "neuralndcg_transposed", "sinkprop", "arf", "arf_relax",
    "approxndcg", "lambdaloss", "lambda_recall", "lambda_opa", "ranknet", "listnet", "neuralsort_ce",
    "softmax", "listmle", "rmse", "softrank_ndcg", "softrank_spearman", "softsort_ndcg", "diffsort_ndcg", "softmax_pointwise",
    "plrank_ndcg", "gumbel_approxndcg", "gumbel_neuralsort_ce",
]  # fmt: skip

S = torch.tensor([[0.5, -0.2, 1.0]])
Y = torch.tensor([[2.0, 0.0, 1.0]])
M = torch.ones(1, 3, dtype=torch.bool)


def test_builtin_names_are_the_team_contract():
    assert list(registry.BUILTIN) == TEAM_NAMES
    assert losses.names()[: len(TEAM_NAMES)] == TEAM_NAMES


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        losses.get("rank_net")
    for name in TEAM_NAMES:
        assert name in str(err.value)


def test_get_returns_the_function_and_binds_overridable_defaults():
    from bench.losses.ranknet import ranknet

    assert losses.get("ranknet") is ranknet
    bound = losses.get("ranknet", sigma=3.0)
    assert bound(S, Y, M).item() == pytest.approx(ranknet(S, Y, M, sigma=3.0).item())
    assert bound(S, Y, M, sigma=1.0).item() == pytest.approx(ranknet(S, Y, M).item())


def test_unknown_hyperparameter_names_the_loss_and_the_accepted_keys():
    with pytest.raises(ValueError, match=r"'lambdaloss' has no hyperparameter\(s\) sigam; accepted: scheme, sigma, mu, k"):
        losses.get("lambdaloss", sigam=2.0)


def test_has_parameters_is_false_for_plain_functions():
    for name in ("ranknet", "lambdaloss", "approxndcg", "listnet", "listmle", "rmse"):
        assert losses.has_parameters(name) is False


def test_arf_is_a_fresh_module_with_trainable_parameters():
    a, b = losses.get("arf"), losses.get("arf")
    assert isinstance(a, torch.nn.Module) and a is not b
    assert losses.has_parameters("arf") is True
    assert all(p.requires_grad for p in a.parameters())


def _write(path, text):
    path.write_text(textwrap.dedent(text), encoding="utf-8")


USER_MODULE = """
    import torch

    def pair_hinge(scores, labels, mask, *, margin=1.0):
        diff = scores.unsqueeze(-1) - scores.unsqueeze(-2)
        pairs = (labels.unsqueeze(-1) > labels.unsqueeze(-2)) & mask.unsqueeze(-1) & mask.unsqueeze(-2)
        return torch.where(pairs, torch.relu(margin - diff), torch.zeros(())).sum()

    class Scaled(torch.nn.Module):
        def __init__(self, scale=2.0):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(scale))

        def forward(self, scores, labels, mask):
            return self.scale * (scores * mask).sum()

    not_callable = 3
"""


def test_user_loss_by_module_path(tmp_path, monkeypatch):
    _write(tmp_path / "my_ltr_losses.py", USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = losses.get("my_ltr_losses:pair_hinge", margin=0.5)
    # pairs (0,1): relu(0.5 - 0.7) = 0; (0,2): relu(0.5 + 0.5) = 1; (2,1): relu(0.5 - 1.2) = 0
    assert fn(S, Y, M).item() == pytest.approx(1.0)
    module = losses.get("my_ltr_losses:Scaled", scale=3.0)
    assert isinstance(module, torch.nn.Module)
    assert module(S, Y, M).item() == pytest.approx(3.0 * 1.3)
    assert losses.has_parameters("my_ltr_losses:Scaled") is True
    assert losses.has_parameters("my_ltr_losses:pair_hinge") is False


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
        ("my_ltr_losses2:missing", "has no attribute 'missing'"),
        ("my_ltr_losses2:not_callable", "is not callable"),
        ("my_ltr_losses2:", "must look like 'package.module:function'"),
    ],
)
def test_bad_user_targets_fail_clearly(tmp_path, monkeypatch, target, message):
    _write(tmp_path / "my_ltr_losses2.py", USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=message):
        losses.get(target)


def test_plugin_file_with_declared_losses_is_picked_up_by_name(tmp_path, monkeypatch):
    pkg = tmp_path / "ltr_plugins"
    pkg.mkdir()
    _write(pkg / "__init__.py", "")
    _write(pkg / "hinge.py", '__losses__ = ("pair_hinge",)\n' + textwrap.dedent(USER_MODULE))
    _write(pkg / "helpers.py", "def pair_hinge2(scores, labels, mask):\n    return scores.sum()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "PLUGIN_PACKAGES", [*registry.PLUGIN_PACKAGES, ("ltr_plugins", pkg)])
    assert "pair_hinge" in losses.names() and "pair_hinge2" not in losses.names()
    assert losses.info("pair_hinge").target == "ltr_plugins.hinge:pair_hinge"
    # margin 1: pairs (0,1): relu(1 - 0.7) = 0.3; (0,2): relu(1 + 0.5) = 1.5; (2,1): relu(1 - 1.2) = 0
    assert losses.get("pair_hinge")(S, Y, M).item() == pytest.approx(1.8)


def test_plugin_sources_are_read_once_per_process(tmp_path, monkeypatch):
    pkg = tmp_path / "ltr_plugins_once"
    pkg.mkdir()
    _write(pkg / "__init__.py", "")
    _write(pkg / "hinge.py", '__losses__ = ("pair_hinge_once",)\n' + textwrap.dedent(USER_MODULE).replace(
        "def pair_hinge(", "def pair_hinge_once("))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "PLUGIN_PACKAGES", [*registry.PLUGIN_PACKAGES, ("ltr_plugins_once", pkg)])
    read = []
    declared = registry._declared_losses
    monkeypatch.setattr(registry, "_declared_losses", lambda path: read.append(path.name) or declared(path))
    losses.names()
    losses.info("pair_hinge_once")
    assert losses.get("pair_hinge_once")(S, Y, M).item() == pytest.approx(1.8)
    losses.names()
    assert sorted(read) == sorted(set(read)) and "hinge.py" in read  # every file read at most once
    _write(pkg / "late.py", '__losses__ = ("late_loss",)\n')
    assert "late_loss" not in losses.names()  # a file added after the scan: the next process sees it


def test_plugin_name_clash_and_malformed_declaration_are_reported_with_the_file(tmp_path, monkeypatch):
    pkg = tmp_path / "ltr_plugins_bad"
    pkg.mkdir()
    _write(pkg / "clash.py", '__losses__ = ("ranknet",)\n')
    monkeypatch.setattr(registry, "PLUGIN_PACKAGES", [("ltr_plugins_bad", pkg)])
    with pytest.raises(ValueError, match=r"clash\.py: loss name 'ranknet' is already registered"):
        losses.names()
    (pkg / "clash.py").unlink()
    _write(pkg / "bad.py", "x = 1\n__losses__ = [name for name in 'ab']\n")
    with pytest.raises(ValueError, match=r"bad\.py:2: __losses__ must be a literal"):
        losses.names()


def test_runtime_registration(monkeypatch):
    monkeypatch.setattr(registry, "_RUNTIME", {})
    from bench.losses.listwise import listnet

    losses.register("listnet_alias", listnet)
    assert losses.get("listnet_alias") is listnet
    with pytest.raises(ValueError, match="built-in"):
        losses.register("ranknet", listnet)


def test_every_registered_loss_states_a_cost_the_scaling_figure_reads():
    """bench.losses.complexity has one entry per registered loss, each a form the figure's rule reads."""
    from bench.losses.complexity import STATED_COMPLEXITY
    from bench.report.figures import COMPLEXITY_FORMS

    assert set(STATED_COMPLEXITY) == set(registry.BUILTIN)  # (losses.names() also has what tests register)
    assert set(STATED_COMPLEXITY.values()) <= set(COMPLEXITY_FORMS)
