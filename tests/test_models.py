"""Scorers: shapes, padding invariance (incl. batch-norm statistics), config validation."""

from __future__ import annotations

import pytest
import torch

from bench.config.run import resolve_model
from bench.errors import ConfigError
from bench.models import SCORERS, ContextAwareRanker, MLPScorer, build_model


def _model(cfg: dict, n_features: int) -> torch.nn.Module:
    """The scorer of a partial model config, its defaults filled from the schema."""
    return build_model(resolve_model(cfg), n_features)


def _pad(x: torch.Tensor, n_pad: int, fill: float) -> torch.Tensor:
    """Append ``n_pad`` slots filled with ``fill`` along the list axis."""
    extra = torch.full((x.shape[0], n_pad, *x.shape[2:]), fill, dtype=x.dtype)
    return torch.cat([x, extra], dim=1)


@pytest.mark.parametrize("kind", ["mlp", "context_aware"])
def test_scores_shape_and_padding_zero(kind):
    torch.manual_seed(0)
    model = _model({"type": kind} if kind == "mlp" else {"type": kind, "input_proj": 8, "hidden": 16}, 6)
    x = torch.randn(3, 5, 6)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    s = model.eval()(x, mask)
    assert s.shape == (3, 5)
    assert torch.all(s[~mask] == 0)
    assert torch.isfinite(s).all()


def test_mlp_batchnorm_statistics_ignore_padding():
    """Train-mode BN: real-item scores and running stats identical with 0 or 7 padded slots
    holding huge values; the running mean equals the mean over real items only (oracle:
    the first layer's pre-BN activations averaged by hand), tolerance 1e-6."""
    torch.manual_seed(1)
    model = MLPScorer(4, [5], batch_norm=True, dropout=0.0, output_activation=None)
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    model = model.double().train()
    ref_state = {k: v.clone() for k, v in model.state_dict().items()}
    s0 = model(x, mask)
    rm0 = model.net[1].running_mean.clone()
    model.load_state_dict(ref_state)
    xp = _pad(x, 7, 1e6)
    mp = torch.cat([mask, torch.zeros(2, 7, dtype=torch.bool)], dim=1)
    s1 = model(xp, mp)
    rm1 = model.net[1].running_mean.clone()
    torch.testing.assert_close(s1[:, :6][mask], s0[mask], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rm1, rm0, rtol=1e-12, atol=1e-12)
    pre = model.net[0](x[mask])  # [7 real items, 5]
    expected = 0.9 * torch.zeros(5, dtype=torch.float64) + 0.1 * pre.mean(dim=0)
    torch.testing.assert_close(rm0, expected, rtol=1e-6, atol=1e-6)


def test_mlp_scores_are_per_item_in_eval():
    torch.manual_seed(2)
    model = _model({"hidden": [7, 3]}, 4).eval()
    x = torch.randn(2, 5, 4)
    mask = torch.ones(2, 5, dtype=torch.bool)
    s = model(x, mask)
    flat = model(x.reshape(1, 10, 4), torch.ones(1, 10, dtype=torch.bool)).reshape(2, 5)
    torch.testing.assert_close(s, flat, rtol=0, atol=1e-6)


def test_context_aware_padding_invariance_and_zero_gradient():
    """Eval mode, float64: a list alone and the same list padded with garbage give the same
    scores (1e-12); gradients w.r.t. padded features are exactly zero."""
    torch.manual_seed(3)
    model = ContextAwareRanker(5, input_proj=8, hidden=16, blocks=2, heads=2, dropout=0.0, output_activation=None).double().eval()
    x = torch.randn(1, 4, 5, dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    s0 = model(x, mask)
    xp = _pad(x, 6, 123.0).requires_grad_(True)
    mp = torch.cat([mask, torch.zeros(1, 6, dtype=torch.bool)], dim=1)
    s1 = model(xp, mp)
    torch.testing.assert_close(s1[:, :4], s0, rtol=1e-12, atol=1e-12)
    s1[:, :4].sum().backward()
    assert torch.all(xp.grad[:, 4:] == 0)
    assert xp.grad[:, :4].abs().sum() > 0


def test_context_aware_is_permutation_equivariant_and_context_dependent():
    torch.manual_seed(4)
    model = ContextAwareRanker(3, input_proj=4, hidden=8, blocks=1, heads=1, dropout=0.0, output_activation=None).double().eval()
    x = torch.randn(1, 6, 3, dtype=torch.float64)
    mask = torch.ones(1, 6, dtype=torch.bool)
    perm = torch.randperm(6)
    s = model(x, mask)
    torch.testing.assert_close(model(x[:, perm], mask), s[:, perm], rtol=1e-12, atol=1e-12)
    # dropping one item changes the others' scores: the model uses the list context
    s_sub = model(x[:, :5], mask[:, :5])
    assert not torch.allclose(s_sub, s[:, :5])


def test_context_aware_empty_list_is_finite():
    model = ContextAwareRanker(3, input_proj=4, hidden=8, blocks=1, heads=1, dropout=0.1, output_activation=None).eval()
    s = model(torch.randn(2, 3, 3), torch.tensor([[False] * 3, [True, True, False]]))
    assert torch.isfinite(s).all() and torch.all(s[0] == 0)


def test_output_tanh_bounds_scores():
    model = _model({"hidden": [4], "output_activation": "tanh", "batch_norm": False}, 2).eval()
    s = model(1e3 * torch.randn(1, 8, 2), torch.ones(1, 8, dtype=torch.bool))
    assert s.abs().max() <= 1.0


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"type": "cnn"}, "model.type"),
        ({"hidden": [4, -1]}, "model.hidden"),
        ({"type": "context_aware", "input_proj": 10, "heads": 3}, "model.heads"),
        ({"dropout": 1.5}, "model.dropout"),
        ({"output_activation": "sigmoid"}, "model.output_activation"),
        ({"type": "context_aware", "batch_norm": True}, "model.batch_norm"),
    ],
)
def test_bad_config_names_the_key(cfg, match):
    with pytest.raises(ConfigError, match=match):
        resolve_model(cfg)


@pytest.mark.parametrize("kind", sorted(SCORERS))
def test_each_scorer_takes_exactly_its_schema_definition(kind):
    """The scorers have no defaults of their own: ``build_model`` passes every key of the
    resolved model (the schema's ``<type>_model``) as a keyword, so a key the schema has and the
    scorer lacks, or the reverse, fails here."""
    model = build_model(resolve_model({"type": kind}), 3).eval()
    assert isinstance(model, SCORERS[kind])
    assert model(torch.randn(1, 2, 3), torch.ones(1, 2, dtype=torch.bool)).shape == (1, 2)


def test_context_aware_inference_path_matches_training_path():
    """Under no_grad in eval mode torch may take its fused encoder kernel: scores of real
    items still ignore padding and agree with the autograd path within float32 rounding."""
    torch.manual_seed(5)
    model = ContextAwareRanker(5, input_proj=8, hidden=16, blocks=2, heads=2, dropout=0.0, output_activation=None).eval()
    x = torch.randn(2, 4, 5)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    xp = _pad(x, 6, 123.0)
    mp = torch.cat([mask, torch.zeros(2, 6, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        fast = model(xp, mp)
    slow = model(x, mask).detach()
    torch.testing.assert_close(fast[:, :4][mask], slow[mask], rtol=0, atol=1e-6)
    assert torch.all(fast[~mp] == 0)


@pytest.mark.parametrize("kind", ["mlp", "context_aware"])
def test_one_logit_per_grade_and_the_expected_grade(kind):
    """``grades=C``: logits ``[B, L, C]`` (0 on padding, real items unchanged by 4 extra padded
    slots of garbage, float64 1e-12), and the score is sum_c c softmax(z)_c (oracle by hand)."""
    from bench.models import ExpectedGrade

    torch.manual_seed(2)
    cfg = {"type": kind} if kind == "mlp" else {"type": kind, "input_proj": 8, "hidden": 16}
    model = build_model(resolve_model(cfg), 6, grades=5).double().eval()
    assert isinstance(model, ExpectedGrade)
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    z = model.logits(x, mask)
    assert z.shape == (2, 4, 5) and torch.all(z[~mask] == 0)
    zp = model.logits(_pad(x, 4, 1e6), torch.cat([mask, torch.zeros(2, 4, dtype=torch.bool)], dim=1))
    torch.testing.assert_close(zp[:, :4][mask], z[mask], rtol=1e-12, atol=1e-12)
    expected = (torch.softmax(z, -1) * torch.arange(5, dtype=torch.float64)).sum(-1)
    s = model(x, mask)
    torch.testing.assert_close(s[mask], expected[mask], rtol=1e-12, atol=1e-12)
    assert torch.all(s[~mask] == 0) and bool(((s[mask] >= 0) & (s[mask] <= 4)).all())


def test_uniform_dropout_keeps_each_unit_with_probability_one_minus_p_and_scales_it():
    """The MLP's dropout (:class:`bench.models.UniformDropout`): every output is 0 or
    ``x / (1 - p)``; over 10^6 units the kept fraction is ``1 - p`` within 5 standard errors
    (binomial), and ``E[y] = x``; eval mode and ``p = 0`` are the identity; the mask comes
    from the global generator, so a seed repeats it."""
    from bench.models import UniformDropout

    p = 0.3
    x = torch.full((1000, 1000), 2.0)
    drop = UniformDropout(p).train()
    torch.manual_seed(0)
    y = drop(x)
    kept = y != 0
    assert torch.equal(y[kept], torch.full_like(y[kept], 2.0 / (1 - p)))
    n = x.numel()
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * ((p * (1 - p)) / n) ** 0.5
    assert abs(y.mean().item() - 2.0) < 5 * 2.0 / (1 - p) * ((p * (1 - p)) / n) ** 0.5
    torch.manual_seed(0)
    assert torch.equal(drop(x), y)
    assert drop.eval()(x) is x
    assert UniformDropout(0.0).train()(x) is x
    xg = torch.randn(50, 4, requires_grad=True)
    torch.manual_seed(1)
    out = UniformDropout(0.5).train()(xg)
    out.sum().backward()
    assert torch.equal(xg.grad, (out.detach() != 0).float() * 2.0)  # the gradient is the mask / (1 - p)
    with pytest.raises(ValueError, match="dropout probability"):
        UniformDropout(1.0)


def test_real_rows_are_boolean_indexing_exactly():
    """The scorer's row gather (index_select on flat positions) is ``x[mask]``: the same rows in
    the same order, bit for bit, for ragged masks, an empty list and a batch with no real item;
    and it back-propagates to exactly the selected rows."""
    from bench.models import real_rows

    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 7, 5, generator=g)
    mask = torch.rand(4, 7, generator=g) > 0.4
    mask[1] = False
    for m in (mask, torch.zeros_like(mask), torch.ones_like(mask)):
        assert torch.equal(real_rows(x, m), x[m])
    xg = x.clone().requires_grad_(True)
    real_rows(xg, mask).sum().backward()
    assert torch.equal(xg.grad, mask[..., None].expand_as(x).to(x.dtype))
