"""Fast soft rank / soft sort (bench/losses/permutahedron.py) and the losses built on them.

Oracles:

- torchsort 0.1.10 (a PyTorch port of the authors' fast-soft-sort): values and vector-Jacobian
  products (fixed cotangents) of 43 cases, L2 and KL, soft rank and soft sort, from the committed
  fixture that ``scripts/torchsort_oracle.py`` writes (torchsort compiles a C++ extension against
  the installed torch, so it is not a test dependency): n = 2..1000, eps = 0.01..10, tied scores,
  padded batches with rows of different lengths and padding scattered through them (torchsort,
  which has no masks, ran on each row's real items). Tolerance 1e-9 absolute in float64
  (measured: 2.0e-11, soft rank KL at n = 1000, whose gradient entries reach 6.4e3), 1e-5 in
  float32 (measured: 0). The soft sort's gradient at a tied score depends on which tied score
  sorts first; torchsort's ``torch.sort`` keeps no promise there, so on tied scores the test
  compares the multiset of the tie group's gradient entries (the same whichever order: the
  group holds a run of sorted positions and each position's gradient depends on the position
  only) and checks our order, the stable one, against ``torch.argsort(stable=True)``
  separately. Where torchsort's value or gradient is not finite (its KL soft-rank gradient at
  eps = 0.01: ``theta = (1, 0)`` in float32, scores ~ N(0, 100) in float64), ours must be finite
  and equal to the exact limit of that regime, checked to hold for the case's scores: every item
  its own block, where the soft rank is the hard rank with a gradient of exactly 0.
- scikit-learn's ``IsotonicRegression(increasing=False)`` for the L2 isotonic fit (1e-12).
- The limits: eps -> 0 gives the hard ranks and the sorted scores exactly; eps -> infinity
  gives (n + 1)/2 and the mean (L2, 1e-6 at eps = 1e7).
- torchsort's README example (ranks of [8, 0, 5, 3, 2, 1, 6, 7, 9] at eps = 1 are the hard ones).
- ``torch.autograd.gradcheck`` (float64, torch's default tolerances) through masked batches.
- ``bench.metrics`` NDCG and ``scipy.stats`` (Spearman's rho, average ranks) for the losses' limits.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.isotonic import IsotonicRegression

from bench import metrics
from bench.losses.permutahedron import isotonic_blocks, soft_rank, soft_sort
from bench.losses.softrank import fractional_ranks, softrank_ndcg, softrank_spearman
from helpers import ROOT

F64 = torch.float64
FIXTURE = ROOT / "tests" / "fixtures" / "torchsort" / "soft_ops.json"
OPS = {"rank": soft_rank, "sort": soft_sort}


def _cases():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]


CASES = _cases()


def _case_id(index):
    case = CASES[index]
    return (f"{index}-{case.get('group', 'base')}-n{case['n']}-eps{case['epsilon']}-{case['regularization']}"
            f"-{case.get('dtype', 'float64')}")


TOLERANCE = {"float64": 1e-9, "float32": 1e-5}
GROUPS = {"base": 24, "ties": 6, "masked": 6, "long": 2, "small-eps": 2, "nonfinite": 3}


def _inputs(case):
    dtype = getattr(torch, case.get("dtype", "float64"))
    theta = torch.tensor(case["theta"], dtype=dtype)
    mask = torch.tensor(case["mask"], dtype=torch.bool) if "mask" in case else torch.ones(theta.shape, dtype=torch.bool)
    return theta, mask, torch.tensor(case["cotangent"], dtype=dtype)


def _tie_groups(theta, mask):
    """``(row, columns)`` of each set of real entries of a row that share one score."""
    groups = []
    for row in range(theta.shape[0]):
        real = torch.nonzero(mask[row]).flatten()
        values, inverse, counts = torch.unique(theta[row, real], return_inverse=True, return_counts=True)
        groups += [(row, real[inverse == k]) for k in torch.nonzero(counts > 1).flatten().tolist()]
    return groups


def _hard_limit(op, theta, mask, cotangent):
    """Each real item its own block: hard ranks and a zero gradient; the sorted scores and the cotangent."""
    value, vjp = torch.zeros_like(theta), torch.zeros_like(theta)
    for row in range(theta.shape[0]):
        real = torch.nonzero(mask[row]).flatten()
        order = real[torch.argsort(theta[row, real], descending=True, stable=True)]
        if op == "rank":
            value[row, order] = torch.arange(1, len(real) + 1, dtype=theta.dtype)
        else:
            value[row, : len(real)] = theta[row, order]
            vjp[row, order] = cotangent[row, : len(real)]
    return value, vjp


def _singletons(op, theta, mask, epsilon, regularization):
    """Whether the PAV of every row keeps each real item alone (the condition of :func:`_hard_limit`).

    With the scores sorted, ``d_j`` the j-th gap between consecutive ones: the soft rank's
    ``s - w`` decreases strictly iff ``d_j / eps > rho_j - rho_{j+1} = 1`` (L2) or
    ``> log(rho_j / rho_{j+1})`` (KL); the soft sort's ``z - w`` iff ``d_j < 1 / eps``.
    """
    for row in range(theta.shape[0]):
        t = torch.sort(theta[row, mask[row]].double(), descending=True).values
        n, gaps = len(t), t[:-1] - t[1:]
        rho = torch.arange(n, 1, -1, dtype=torch.float64)
        if op == "sort" and not torch.all(gaps < 1 / epsilon):
            return False
        step = torch.log(rho / (rho - 1)) if regularization == "kl" else torch.ones_like(rho)
        if op == "rank" and not torch.all(gaps / epsilon > step):
            return False
    return True


def test_fixture_groups():
    assert {g: sum(c.get("group", "base") == g for c in CASES) for g in GROUPS} == GROUPS
    overflowed = [(i, op) for i, c in enumerate(CASES) for op in OPS
                  if not (np.isfinite(c[op]).all() and np.isfinite(c[f"{op}_vjp"]).all())]
    assert [(CASES[i]["group"], op) for i, op in overflowed] == [("nonfinite", "rank")] * 2


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("index", range(len(CASES)), ids=_case_id)
def test_values_and_gradients_match_torchsort(op, index):
    case = CASES[index]
    theta, mask, cotangent = _inputs(case)
    x = theta.clone().requires_grad_(True)
    out = OPS[op](x, mask, epsilon=case["epsilon"], regularization=case["regularization"])
    (out * cotangent).sum().backward()
    tol = TOLERANCE[case.get("dtype", "float64")]
    value, vjp = torch.tensor(case[op], dtype=F64), torch.tensor(case[f"{op}_vjp"], dtype=F64)
    if not (torch.isfinite(value).all() and torch.isfinite(vjp).all()):
        # torchsort overflowed; ours must be finite and the exact limit of the singleton regime
        assert _singletons(op, theta, mask, case["epsilon"], case["regularization"])
        assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
        value, vjp = _hard_limit(op, theta.double(), mask, cotangent.double())
    assert torch.allclose(out.double(), value, rtol=0, atol=tol)
    grad = x.grad.double()
    if op == "sort":  # at tied scores only the tie group's multiset of gradient entries is order-free
        for row, cols in _tie_groups(theta, mask):
            assert torch.allclose(grad[row, cols].sort().values, vjp[row, cols].sort().values, rtol=0, atol=tol)
            grad[row, cols] = vjp[row, cols]
    assert torch.allclose(grad, vjp, rtol=0, atol=tol)


def test_soft_sort_breaks_ties_in_input_order():
    """At eps -> 0 every item is its own block: the soft sort's gradient is the cotangent moved back
    through the sort, so it shows the order of tied scores: ``torch.argsort(..., stable=True)``'s."""
    theta = torch.tensor([[1.0, 3.0, 1.0, 2.0, 3.0, 1.0], [0.0, 0.0, 5.0, 0.0, -1.0, 9.0]], dtype=F64)
    mask = torch.tensor([[True] * 6, [True, True, True, True, False, True]])
    cotangent = torch.arange(1.0, 13.0, dtype=F64).reshape(2, 6)
    for reg in ("l2", "kl"):
        assert _singletons("sort", theta, mask, 1e-3, reg)
        x = theta.clone().requires_grad_(True)
        out = soft_sort(x, mask, epsilon=1e-3, regularization=reg)
        (out * cotangent).sum().backward()
        value, vjp = _hard_limit("sort", theta, mask, cotangent)
        assert torch.allclose(out, value, rtol=0, atol=1e-9) and torch.equal(x.grad, vjp), reg
        assert x.grad[0].tolist() == [4.0, 1.0, 5.0, 3.0, 2.0, 6.0]  # 3s: columns 1, 4 first; 1s: 0, 2, 5


def test_kl_gradient_is_stable_where_torchsort_overflows():
    """torchsort 0.1.10: NaN/inf gradient at theta = (1, 0), eps = 0.01, float32. Two singleton
    blocks: the ranks are (1, 2) and the gradient exactly 0, in float32 and float64."""
    for dtype in (torch.float32, F64):
        x = torch.tensor([[1.0, 0.0]], dtype=dtype, requires_grad=True)
        ranks = soft_rank(x, torch.ones(1, 2, dtype=torch.bool), epsilon=0.01, regularization="kl")
        (ranks * torch.tensor([[1.0, 2.0]], dtype=dtype)).sum().backward()
        assert ranks.tolist() == [[1.0, 2.0]] and x.grad.tolist() == [[0.0, 0.0]]


def test_float32_and_half_precision_inputs_compute_in_float64():
    """The kernels work in float64 whatever the dtype: float32 results are the float64 ones rounded."""
    rng = np.random.default_rng(7)
    theta = torch.tensor(rng.normal(size=(3, 2000)), dtype=torch.float32)  # radix sort, 12-bit digits
    mask = torch.tensor(rng.random((3, 2000)) < 0.9)
    cotangent = torch.tensor(rng.normal(size=(3, 2000)), dtype=torch.float32)
    for op in OPS.values():
        for reg in ("l2", "kl"):
            results = []
            for dtype in (torch.float32, F64, torch.bfloat16):
                x = theta.to(dtype).detach().clone().requires_grad_(True)
                out = op(x, mask, epsilon=0.3, regularization=reg)
                (out * cotangent.to(dtype)).sum().backward()
                assert out.dtype == dtype and x.grad.dtype == dtype
                results.append((out, x.grad))
            (o32, g32), (o64, g64), (o16, g16) = results
            assert torch.equal(o32, o64.float()) and torch.equal(g32, g64.float())
            bf = theta.to(torch.bfloat16).double()  # bfloat16 rounds the scores first
            x = bf.clone().requires_grad_(True)
            ref = op(x, mask, epsilon=0.3, regularization=reg)
            (ref * cotangent.to(torch.bfloat16).double()).sum().backward()
            assert torch.equal(o16, ref.to(torch.bfloat16)) and torch.equal(g16, x.grad.to(torch.bfloat16))


def test_sort_keys_match_a_stable_argsort():
    """The radix / comparison sort of the forward kernel against ``np.argsort(kind="stable")``."""
    from bench.losses.permutahedron import _sort_columns

    rng = np.random.default_rng(8)
    cases = [rng.normal(size=n).astype(np.float32).astype(np.float64) for n in (3, 100, 600, 3000)]
    cases += [np.round(rng.normal(size=5000), 1), np.array([0.0, -0.0, 1.0, -0.0, 0.0]), np.full(7, 2.5),
              rng.normal(size=700) * 10.0 ** rng.integers(-200, 200, size=700),  # too wide: merge sort
              np.round(rng.normal(size=3000) * 1e6) * 2.0**-20]
    for vals in cases:
        n = len(vals)
        cols = np.arange(n, dtype=np.int64) * 3  # columns, as in a padded row
        perm = np.empty(n, dtype=np.int64)
        buffers = np.empty(n, np.uint64), np.empty(n, np.uint64), np.empty(4097, np.int64)
        for descending in (False, True):
            _sort_columns(vals + 0.0, cols, n, 3 * n, descending, *buffers, perm)  # + 0.0: as the kernel, -0 -> +0
            key = -vals if descending else vals
            np.testing.assert_array_equal(perm, cols[np.argsort(key + 0.0, kind="stable")])


def test_l2_isotonic_fit_matches_scikit_learn():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 50, 300):
        y = rng.normal(size=n) + np.linspace(0, 3, n)  # rising trend: long pooled blocks
        blocks = isotonic_blocks(torch.tensor(y[None, :]), None, torch.tensor([n]))[0].numpy()
        ours = np.array([y[blocks == b].mean() for b in blocks])
        expected = IsotonicRegression(increasing=False).fit_transform(np.arange(n), y)
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)


def test_hard_limit_is_exact_and_large_epsilon_tends_to_the_centre():
    rng = np.random.default_rng(1)
    theta = torch.tensor(rng.normal(size=(3, 9)), dtype=F64)
    mask = torch.ones_like(theta, dtype=torch.bool)
    hard_ranks = torch.tensor(stats.rankdata(-theta.numpy(), axis=1), dtype=F64)
    assert torch.equal(soft_rank(theta, mask, epsilon=1e-4), hard_ranks)  # L2: exactly
    # KL: exp(s - v) with |s| ~ 1e4, exact up to that subtraction's rounding
    assert torch.allclose(soft_rank(theta, mask, epsilon=1e-4, regularization="kl"), hard_ranks, rtol=0, atol=1e-9)
    sorted_desc = torch.sort(theta, descending=True).values
    for reg in ("l2", "kl"):
        assert torch.allclose(soft_sort(theta, mask, epsilon=1e-4, regularization=reg), sorted_desc, atol=1e-12)
    centre = soft_rank(theta, mask, epsilon=1e7)
    assert torch.allclose(centre, torch.full_like(theta, 5.0), atol=1e-6)
    assert torch.allclose(soft_sort(theta, mask, epsilon=1e7), theta.mean(-1, keepdim=True).expand_as(theta), atol=1e-6)


def test_torchsort_readme_example():
    x = torch.tensor([[8.0, 0, 5, 3, 2, 1, 6, 7, 9]])
    mask = torch.ones_like(x, dtype=torch.bool)
    # the README's ascending ranks of x are our descending ranks of -x
    assert soft_rank(-x, mask, epsilon=1.0).tolist() == [[8.0, 1, 5, 4, 3, 2, 6, 7, 9]]
    # the README's ascending soft sort at 0.1, [0, 1, 2, 3, 5, 6, 7, 8, 9], is minus our descending sort of -x
    assert (-soft_sort(-x, mask, epsilon=0.1)).tolist() == [[0.0, 1, 2, 3, 5, 6, 7, 8, 9]]


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("reg", ["l2", "kl"])
def test_operators_are_masked_padding_invariant_and_pass_gradcheck(op, reg):
    rng = np.random.default_rng(2)
    lengths = [6, 3, 1, 0, 5]
    width = 8
    theta = torch.tensor(rng.normal(size=(len(lengths), width)) * 3, dtype=F64)
    mask = torch.tensor([[i < n for i in range(width)] for n in lengths])
    fn = OPS[op]
    out = fn(theta, mask, epsilon=0.7, regularization=reg)
    for row, n in enumerate(lengths):
        alone = fn(theta[row : row + 1, :n], mask[row : row + 1, :n], epsilon=0.7, regularization=reg)
        assert torch.allclose(out[row : row + 1, :n], alone, rtol=1e-12, atol=1e-12)
        assert torch.all(out[row, n:] == 0)
    x = theta.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: fn(t, mask, epsilon=0.7, regularization=reg), (x,), eps=1e-6)
    fn(x, mask, epsilon=0.7, regularization=reg).sum().backward()
    assert torch.all(x.grad[~mask] == 0)


def test_soft_ranks_lie_in_the_permutahedron():
    rng = np.random.default_rng(3)
    theta = torch.tensor(rng.normal(size=(4, 12)), dtype=F64)
    mask = torch.ones_like(theta, dtype=torch.bool)
    for reg in ("l2", "kl"):
        r = soft_rank(theta, mask, epsilon=0.5, regularization=reg)
        assert torch.allclose(r.sum(-1), torch.full((4,), 78.0, dtype=F64), atol=1e-9)  # sum of 1..12
        top = torch.sort(r, dim=-1).values.cumsum(-1)  # the j smallest sum to at least 1 + ... + j
        assert torch.all(top >= torch.arange(1, 13, dtype=F64).cumsum(0) - 1e-9)


def test_fractional_ranks_match_scipy_average_ranks():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 4, size=(5, 11)).astype(float)
    ranks = fractional_ranks(torch.tensor(y), torch.ones(5, 11, dtype=torch.bool)).numpy()
    np.testing.assert_array_equal(ranks, stats.rankdata(-y, method="average", axis=1))


def test_softrank_ndcg_hard_limit_is_minus_ndcg():
    rng = np.random.default_rng(5)
    s = rng.normal(size=(4, 10))
    y = rng.integers(0, 5, size=(4, 10)).astype(float)
    y[:, 0] = 4  # every list has a relevant item
    frame = metrics.evaluate(s.ravel(), y.ravel(), np.arange(0, 41, 10), ["ndcg@max"])
    mask = torch.ones(4, 10, dtype=torch.bool)
    for reg in ("l2", "kl"):
        value = softrank_ndcg(torch.tensor(s), torch.tensor(y), mask, epsilon=1e-6, regularization=reg).item()
        assert value == pytest.approx(-frame["ndcg@max"].mean(), rel=1e-10)  # KL: exp(log rank) rounding


def test_softrank_spearman_hard_limit_is_one_minus_rho():
    rng = np.random.default_rng(6)
    s = rng.normal(size=(3, 15))
    y = np.stack([rng.permutation(15) for _ in range(3)]).astype(float)  # no ties
    rho = [stats.spearmanr(s[i], y[i]).statistic for i in range(3)]
    value = softrank_spearman(torch.tensor(s), torch.tensor(y), torch.ones(3, 15, dtype=torch.bool), epsilon=1e-6)
    assert value.item() == pytest.approx(1 - float(np.mean(rho)), rel=1e-12)
