"""The common contract (docs/losses.md, "Tests every loss must pass"), for EVERY registered loss.

Besides the numerical contract: every hyperparameter is keyword-only, every loss validates
its inputs through the one validator :func:`bench.losses._common.check_inputs`, and so
every loss rejects the same bad call with the same exception and message.

Parametrized over ``bench.losses.names()``: a registered loss whose module is missing or
broken fails here (``get`` raises), it is never skipped. The losses on one logit per label
grade (``info(name).outputs == "grade_logits"``: ARF's point-wise Softmax) take ``[B, L, C]``
logits instead of ``[B, L]`` scores: their contract is tested in their own module
(``tests/losses/test_grades.py``), and :func:`test_the_grade_losses_are_the_ones_tested_apart`
fails when a new one appears untested. Loss-specific oracles and limits
live next to each loss's own tests. Sizes are small on purpose (17 losses x 6 families).

Tolerances: padding and batch identities 1e-9 relative in float64 (docs/losses.md); gradcheck
uses torch's defaults (atol 1e-5, rtol 1e-3) at eps 1e-6 in float64.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest
import torch

from bench.losses import _common, get, info, names

F64 = torch.float64

# Hyperparameters that make ``@k``/``@m`` losses meaningful on the short lists used here.
SMALL_LIST_HYPER: dict[str, dict] = {
    "lambda_recall": {"k": 2, "m": 3},
    "arf": {"k": 2, "m": 3},
    "arf_relax": {"k": 2, "m": 3},
    "pirank_ndcg": {"k": 3},
    "pirank_arp": {"k": 3},
}


def make(name: str, dtype: torch.dtype = F64, **extra):
    loss = get(name, **{**SMALL_LIST_HYPER.get(name, {}), **extra})
    if isinstance(loss, torch.nn.Module):
        loss = loss.to(dtype)
    return loss


def call(name: str, loss, scores, labels, mask, seed: int = 0):
    """Call with a fresh generator in a fixed state for stochastic losses (ListMLE)."""
    if info(name).stochastic:
        return loss(scores, labels, mask, generator=torch.Generator().manual_seed(seed))
    return loss(scores, labels, mask)


def lists(lengths, width, seed, *, dtype=F64, distinct_labels=False, grades=4):
    """Scores ~ N(0, 1), graded labels with >= 2 grades per list, padding with garbage."""
    rng = np.random.default_rng(seed)
    b = len(lengths)
    scores = rng.normal(size=(b, width)) * 50.0  # padded slots hold large garbage
    labels = rng.integers(0, grades + 1, size=(b, width)).astype(float)
    mask = np.zeros((b, width), dtype=bool)
    for row, n in enumerate(lengths):
        mask[row, :n] = True
        scores[row, :n] = rng.normal(size=n)
        if distinct_labels:
            labels[row, :n] = rng.permutation(n) * (grades / max(n - 1, 1))
        else:
            labels[row, :n] = rng.integers(0, grades, size=n)
            if n >= 2:
                labels[row, :2] = [grades - 1, 0]  # at least two grades
                labels[row, :n] = rng.permutation(labels[row, :n])
    return (torch.tensor(scores, dtype=dtype), torch.tensor(labels, dtype=dtype), torch.tensor(mask))


def value_and_grad(name, loss, scores, labels, mask):
    s = scores.clone().requires_grad_(True)
    value = call(name, loss, s, labels, mask)
    value.backward()
    return value.detach(), s.grad


ALL = [n for n in names() if info(n).outputs == "scores"]
GRADE_LOSSES_TESTED_APART = {"softmax_pointwise"}  # tests/losses/test_grades.py


def test_the_grade_losses_are_the_ones_tested_apart():
    assert {n for n in names() if info(n).outputs != "scores"} == GRADE_LOSSES_TESTED_APART


@pytest.mark.parametrize("name", ALL)
def test_padding_invariance_and_zero_gradient_on_padding(name):
    loss = make(name)
    stochastic = info(name).stochastic
    s, y, m = lists([6, 4, 5], 6, seed=1, distinct_labels=stochastic)
    extra_s, extra_y, _ = lists([0, 0, 0], 5, seed=2)
    sp = torch.cat([s, extra_s], dim=1)
    yp = torch.cat([y, extra_y], dim=1)
    mp = torch.cat([m, torch.zeros(3, 5, dtype=torch.bool)], dim=1)
    v, g = value_and_grad(name, loss, s, y, m)
    vp, gp = value_and_grad(name, make(name), sp, yp, mp)
    assert torch.isfinite(v) and v.abs() > 0
    assert abs(vp.item() - v.item()) <= 1e-9 * abs(v.item())
    assert torch.allclose(gp[:, :6][m], g[m], rtol=1e-9, atol=1e-12 * g.abs().max().item())
    assert torch.all(gp[~mp] == 0) and torch.all(g[~m] == 0)


@pytest.mark.parametrize("name", ALL)
def test_gradient_matches_finite_differences(name):
    loss = make(name, **info(name).relaxed)
    s, y, m = lists([5, 4], 5, seed=3)
    if info(name).estimated_gradient:
        return _check_estimated_gradient(name, loss, s[:1], y[:1])
    s = s.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: call(name, loss, x, y, m), (s,), eps=1e-6)


def _check_estimated_gradient(name, loss, s, y, groups=8, copies=250, h=0.02):
    """A loss whose gradient estimates that of its value's expectation (PL-Rank): per group of
    ``copies`` copies of one list in one batch (each copy its own draws; each group its own
    seed), the directional derivative of the mean value by central differences at +-h (the same
    draws on both sides, so most cancel) against the mean gradient, along a fixed random
    direction and along the first group's gradient. Over the groups, the mean of (difference -
    gradient) must be within 5 of its standard errors (from the groups' spread; t with 7 degrees
    of freedom) plus h^2, which covers the central difference's truncation error h^2 |f'''| / 6
    wherever |f'''| <= 6 (a metric in [0, 1] of scores of unit scale stays far below)."""
    batch, yb = s.repeat(copies, 1), y.repeat(copies, 1)
    mb = torch.ones_like(batch, dtype=torch.bool)
    directions = [torch.tensor(np.random.default_rng(11).normal(size=s.shape[1]), dtype=s.dtype)]
    gaps = []
    for g in range(groups):
        x = batch.clone().requires_grad_(True)
        call(name, loss, x, yb, mb, seed=g).backward()
        grad = x.grad.sum(0)  # the batch value is the mean over copies
        if g == 0:
            directions.append(grad)
        row = []
        for v in directions:
            v = v / v.norm()
            up, down = (call(name, loss, batch + sign * h * v, yb, mb, seed=g).item() for sign in (1, -1))
            row.append((up - down) / (2 * h) - float(grad @ v))
        gaps.append(row)
    gaps = np.array(gaps)
    mean, se = gaps.mean(0), gaps.std(0, ddof=1) / np.sqrt(groups)
    assert np.all(np.abs(mean) <= 5 * se + h * h), (mean, se)


@pytest.mark.parametrize("name", ALL)
def test_batch_equals_mean_of_single_lists_and_degenerate_lists_contribute_nothing(name):
    loss = make(name)
    lengths = [7, 5, 3]
    s, y, m = lists(lengths, 7, seed=4, distinct_labels=info(name).stochastic)
    sd, yd, md = lists([1, 0], 7, seed=5)  # one real item, and no real item at all
    if info(name).stochastic:
        # a sampled loss draws per position of the batch: each list alone is the same batch with
        # the other lists masked out (the same draws), and the degenerate lists are in every call
        s, y, m = torch.cat([s, sd]), torch.cat([y, yd]), torch.cat([m, md])
        alone = [m & (torch.arange(len(m)) == i)[:, None] for i in range(len(lengths))]
        singles = [call(name, loss, s, y, mi).item() for mi in alone]
    else:
        singles = [call(name, loss, s[i : i + 1, :n], y[i : i + 1, :n], m[i : i + 1, :n]).item() for i, n in enumerate(lengths)]
    batch = call(name, loss, s, y, m).item()
    assert batch == pytest.approx(float(np.mean(singles)), rel=1e-9)
    # the degenerate lists add nothing to the batch value (a sampled loss's batch holds them
    # already), and each alone gives 0
    if not info(name).stochastic:
        both = call(name, loss, torch.cat([s, sd]), torch.cat([y, yd]), torch.cat([m, md])).item()
        assert both == pytest.approx(batch, rel=1e-9)
    alone = make(name)
    sd = sd.clone().requires_grad_(True)
    value = call(name, alone, sd, yd, md)
    value.backward()
    assert value.item() == 0.0 and torch.all(sd.grad == 0)


def _degenerate_inputs(dtype):
    rng = np.random.default_rng(6)
    n = 6
    base = rng.normal(size=(1, n))
    labels = rng.integers(0, 5, size=(1, n)).astype(float)
    cases = {
        "tied scores": (np.zeros((1, n)), labels),
        "tied labels": (base, np.full((1, n), 2.0)),
        "all-zero labels": (base, np.zeros((1, n))),
        "scores 1e4": (rng.choice([-1e4, 1e4], size=(1, n)) + base, labels),
        "single item": (base[:, :1], labels[:, :1]),
    }
    return {k: (torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)) for k, (a, b) in cases.items()}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_finite_on_ties_zero_labels_single_item_and_huge_scores(name, dtype):
    loss = make(name, dtype)
    for case, (s, y) in _degenerate_inputs(dtype).items():
        value, grad = value_and_grad(name, loss, s, y, torch.ones_like(s, dtype=torch.bool))
        assert torch.isfinite(value), case
        assert torch.all(torch.isfinite(grad)), case


@pytest.mark.parametrize("name", ALL)
def test_finite_for_list_lengths_1_to_2000(name):
    loss = make(name, torch.float32)
    for n in (1, 2, 3, 31, 2000):
        s, y, m = lists([n], n, seed=n, dtype=torch.float32)
        value, grad = value_and_grad(name, loss, s, y, m)
        assert torch.isfinite(value), n
        assert torch.all(torch.isfinite(grad)), n


@pytest.mark.parametrize("name", ALL)
def test_ideal_ordering_beats_reversed_ordering(name):
    loss = make(name)
    _, y, m = lists([8, 6], 8, seed=8)
    # scores follow the labels (ties split by a small, order-preserving offset)
    offset = -0.01 * torch.arange(8, dtype=F64)
    ideal = 2.0 * (y - 2.0) + offset
    ideal = torch.where(m, ideal, torch.zeros((), dtype=F64))
    good = call(name, loss, ideal, y, m).item()
    bad = call(name, loss, -ideal, y, m).item()
    assert good < bad


# ----------------------------------------------------------------------------- signature and validation

LOSS_ARGS = ["scores", "labels", "mask"]


def _target(name: str):
    module_name, _, attr = info(name).target.partition(":")
    module = importlib.import_module(module_name)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return module, obj


@pytest.mark.parametrize("name", ALL)
def test_hyperparameters_are_keyword_only(name):
    _, obj = _target(name)
    if inspect.isclass(obj):  # an nn.Module loss: hyperparameters in __init__, tensors in forward
        hyper = list(inspect.signature(obj.__init__).parameters.values())[1:]
        call_params = list(inspect.signature(obj.forward).parameters.values())[1:]
    else:
        params = list(inspect.signature(obj).parameters.values())
        call_params, hyper = params[:3], params[3:]
    assert [p.name for p in call_params][:3] == LOSS_ARGS
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in call_params[:3])
    positional = [p.name for p in [*hyper, *call_params[3:]] if p.kind is not p.KEYWORD_ONLY]
    assert positional == [], f"{name}: hyperparameters {positional} can be passed positionally"


@pytest.mark.parametrize("name", ALL)
def test_inputs_go_through_the_one_validator(name, monkeypatch):
    module, _ = _target(name)
    assert module.check_inputs is _common.check_inputs  # no loss module has a validator of its own
    seen = []

    def spy(scores, labels, mask):
        seen.append((scores.shape, mask.dtype))
        return _common.check_inputs(scores, labels, mask)

    monkeypatch.setattr(module, "check_inputs", spy)
    s, y, m = lists([4, 3], 4, seed=9, distinct_labels=info(name).stochastic)
    call(name, make(name), s, y, m)
    assert seen and seen[0] == (s.shape, torch.bool)


def _bad_calls():
    s, y, m = lists([3, 3], 3, seed=10)
    return {
        "shape": (s, y[:, :2], m),
        "one dimension": (s[0], y[0], m[0]),
        "mask dtype": (s, y, m.to(F64)),
        "integer scores": (s.long(), y, m),
    }


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("case", list(_bad_calls()))
def test_every_loss_rejects_a_bad_call_with_the_same_error(name, case):
    args = _bad_calls()[case]
    with pytest.raises(ValueError) as expected:
        _common.check_inputs(*args)
    with pytest.raises(type(expected.value)) as got:
        call(name, make(name), *args)
    assert str(got.value) == str(expected.value)
