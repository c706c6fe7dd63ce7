"""ARF's point-wise Softmax (``softmax_pointwise``): the loss on one logit per label grade.

Its contract differs from every other loss's (``[B, L, C]`` logits, a mean over items), so it is
checked here against its oracles rather than in ``test_contract.py``:

- the value equals ``torch.nn.functional.cross_entropy`` (mean reduction) on the flattened real
  items, float64, 1e-12 relative; the gradient equals torch's on the same items;
- the gradient equals finite differences (``torch.autograd.gradcheck``, eps 1e-6, its default
  tolerances atol 1e-5, rtol 1e-3, float64);
- padding invariance: garbage padded slots (logits 1e3, labels out of range) change neither the
  value nor the real items' gradient (1e-12 relative) and get gradient exactly 0;
- refused inputs: labels off the grades, logits without the grade axis or with another count.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bench.losses import _common, get, grade_outputs, info
from bench.losses import grades as grades_module

F64 = torch.float64
C = 5


def _batch(lengths, width, seed, grades=C):
    rng = np.random.default_rng(seed)
    mask = torch.tensor([[j < n for j in range(width)] for n in lengths])
    logits = torch.tensor(rng.normal(size=(len(lengths), width, grades)) * 2, dtype=F64)
    labels = torch.tensor(rng.integers(0, grades, size=(len(lengths), width)), dtype=F64)
    logits = torch.where(mask.unsqueeze(-1), logits, torch.full((), 1e3, dtype=F64))  # garbage padding
    labels = torch.where(mask, labels, torch.full((), 99.0, dtype=F64))
    return logits, labels, mask


def test_registered_as_a_loss_on_one_logit_per_grade():
    assert info("softmax_pointwise").outputs == "grade_logits"
    assert grade_outputs("softmax_pointwise") == C and grade_outputs("softmax_pointwise", grades=3) == 3
    assert grade_outputs("softmax") is None


def test_value_and_gradient_equal_torch_cross_entropy_on_the_real_items():
    z, y, m = _batch([6, 2, 4], 6, seed=0)
    ours_in = z.clone().requires_grad_(True)
    ours = get("softmax_pointwise")(ours_in, y, m)
    ours.backward()
    flat = z[m].clone().requires_grad_(True)
    oracle = F.cross_entropy(flat, y[m].long(), reduction="mean")
    oracle.backward()
    assert ours.item() == pytest.approx(oracle.item(), rel=1e-12)
    assert torch.allclose(ours_in.grad[m], flat.grad, rtol=1e-12, atol=0)


def test_gradient_matches_finite_differences():
    z, y, m = _batch([5, 3], 5, seed=1)
    z = torch.where(m.unsqueeze(-1), z, torch.zeros((), dtype=F64)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: get("softmax_pointwise")(x, y, m), (z,), eps=1e-6)


def test_padding_changes_nothing_and_gets_zero_gradient():
    z, y, m = _batch([4, 3], 4, seed=2)
    pz = torch.cat([z, torch.full((2, 3, C), -7e2, dtype=F64)], dim=1)
    py = torch.cat([y, torch.full((2, 3), -5.0, dtype=F64)], dim=1)
    pm = torch.cat([m, torch.zeros(2, 3, dtype=torch.bool)], dim=1)
    a, b = z.clone().requires_grad_(True), pz.clone().requires_grad_(True)
    va, vb = get("softmax_pointwise")(a, y, m), get("softmax_pointwise")(b, py, pm)
    va.backward()
    vb.backward()
    assert vb.item() == pytest.approx(va.item(), rel=1e-12)
    assert torch.allclose(b.grad[:, :4][m], a.grad[m], rtol=1e-12, atol=0)
    assert torch.all(b.grad[~pm] == 0) and torch.all(a.grad[~m] == 0)


def test_a_batch_is_the_mean_over_items_not_over_lists():
    z, y, m = _batch([6, 2], 6, seed=3)
    loss = get("softmax_pointwise")
    singles = [loss(z[i : i + 1], y[i : i + 1], m[i : i + 1]).item() for i in range(2)]
    assert loss(z, y, m).item() == pytest.approx((6 * singles[0] + 2 * singles[1]) / 8, rel=1e-12)


def test_no_real_item_gives_zero_and_a_zero_gradient():
    z = torch.randn(2, 3, C, dtype=F64, requires_grad=True)
    value = get("softmax_pointwise")(z, torch.zeros(2, 3, dtype=F64), torch.zeros(2, 3, dtype=torch.bool))
    value.backward()
    assert value.item() == 0.0 and torch.all(z.grad == 0)


@pytest.mark.parametrize("labels, match", [(2.5, "integers 0..4"), (5.0, "integers 0..4"), (-1.0, "integers 0..4")])
def test_labels_off_the_grades_are_refused(labels, match):
    z, y, m = _batch([3], 3, seed=4)
    y[0, 1] = labels
    with pytest.raises(ValueError, match=match):
        get("softmax_pointwise")(z, y, m)


def test_logits_without_the_grade_axis_or_with_another_count_are_refused():
    z, y, m = _batch([3], 3, seed=5)
    with pytest.raises(ValueError, match=r"\[B, L, 5\] logits, got \(1, 3\)"):
        get("softmax_pointwise")(z[..., 0], y, m)
    with pytest.raises(ValueError, match=r"\[B, L, 3\] logits, got \(1, 3, 5\)"):
        get("softmax_pointwise", grades=3)(z, y, m)
    with pytest.raises(ValueError, match="grades must be an integer >= 2"):
        get("softmax_pointwise", grades=1)(z, y, m)


def test_inputs_go_through_the_one_validator(monkeypatch):
    seen = []

    def spy(scores, labels, mask):
        seen.append(tuple(scores.shape))
        return _common.check_inputs(scores, labels, mask)

    monkeypatch.setattr(grades_module, "check_inputs", spy)
    z, y, m = _batch([3, 2], 3, seed=6)
    get("softmax_pointwise")(z, y, m)
    assert seen == [(2, 3)]
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        get("softmax_pointwise")(z, y, m.to(F64))
