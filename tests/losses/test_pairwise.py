"""Loss-specific oracles for the pairwise and listwise losses (hand computations, brute-force
loops over pairs written from the papers' formulas, published reference values, limits).

Tolerances: float64 throughout, 1e-10 relative unless a limit is taken.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import ndcg_score

from bench.losses.approxndcg import approxndcg
from bench.losses.lambdaloss import lambda_opa, lambda_recall, lambdaloss
from bench.losses.listwise import listmle, listnet, rmse, softmax
from bench.losses.pairwise import predicted_ranks, true_topk_membership
from bench.losses.ranknet import ranknet

F64 = torch.float64


def t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=F64)


def full(n: int, b: int = 1) -> torch.Tensor:
    return torch.ones(b, n, dtype=torch.bool)


def softplus(x: float) -> float:
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


def d(r: float) -> float:
    """1 / log2(1 + r)."""
    return 1.0 / math.log2(1.0 + r)


def brute_ranks(s: list[float]) -> list[int]:
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    ranks = [0] * len(s)
    for pos, i in enumerate(order):
        ranks[i] = pos + 1
    return ranks


def brute_lambdaloss(s, y, scheme="ndcg_loss2", sigma=1.0, mu=10.0, k=None) -> float:
    """LambdaLoss of one list, by loops over pairs, from Wang et al. (2018) / Jagerman et al. (2022)."""
    n = len(s)
    r = brute_ranks(s)
    gains = [2.0**v - 1.0 for v in y]
    ideal = sorted(gains, reverse=True)[: (n if k is None else k)]
    max_dcg = sum(g * d(i + 1) for i, g in enumerate(ideal))
    G = [g / max_dcg for g in gains]
    total = 0.0
    for i, j in itertools.permutations(range(n), 2):
        if not y[i] > y[j]:
            continue
        dist = abs(r[i] - r[j])
        nl2 = abs(d(dist) - d(dist + 1))
        if k is not None and min(r[i], r[j]) > k:
            nl2 = 0.0  # docs/losses.md, "LambdaLoss": pairs wholly below rank k are dropped
        elif k is not None and max(r[i], r[j]) > k:
            nl2 /= 1.0 - d(max(r[i], r[j]))  # Jagerman et al. 2022: straddling pairs
        inv = [d(x) if (k is None or x <= k) else 0.0 for x in (r[i], r[j])]
        lr = abs(inv[0] - inv[1])
        w = {
            "ndcg_loss2": nl2 * abs(G[i] - G[j]),
            "lambdarank": lr * abs(G[i] - G[j]),
            "ndcg_loss2pp": (mu * nl2 + lr) * abs(G[i] - G[j]),
            "ranknet": 1.0 if (k is None or min(r[i], r[j]) <= k) else 0.0,
        }[scheme]
        total += w * softplus(-sigma * (s[i] - s[j])) / math.log(2.0)
    return total


RNG = np.random.default_rng(7)
LISTS = [
    (RNG.normal(size=9).tolist(), RNG.integers(0, 5, size=9).astype(float).tolist()),
    (RNG.normal(size=6).tolist(), [3.0, 0.0, 1.0, 1.0, 0.0, 2.0]),
]


# --------------------------------------------------------------------------- helpers


def test_predicted_ranks_are_stable_and_put_padding_last():
    s = t([[0.5, 2.0, 0.5, -1.0, 99.0]])
    m = torch.tensor([[True, True, True, True, False]])
    assert predicted_ranks(s, m).tolist() == [[2, 1, 3, 4, 5]]


def test_true_topk_membership_splits_boundary_ties_in_expectation():
    y = t([[4.0, 2.0, 2.0, 2.0, 0.0, 7.0]])
    m = torch.tensor([[True, True, True, True, True, False]])
    got = true_topk_membership(y, m, 3).tolist()[0]
    assert got == pytest.approx([1.0, 2 / 3, 2 / 3, 2 / 3, 0.0, 0.0], abs=1e-15)
    # Monte-Carlo over random tie orders agrees with the expectation.
    hits = np.zeros(5)
    order_rng = np.random.default_rng(0)
    for _ in range(3000):
        key = np.array([4.0, 2.0, 2.0, 2.0, 0.0]) + order_rng.uniform(0, 1e-3, 5)
        hits[np.argsort(-key)[:3]] += 1
    assert hits / 3000 == pytest.approx(got[:5], abs=0.03)


# --------------------------------------------------------------------------- RankNet


@pytest.mark.parametrize("s, y", LISTS)
@pytest.mark.parametrize("k", [None, 1, 3])
def test_ranknet_equals_brute_force_mean_over_kept_pairs(s, y, k):
    r = brute_ranks(s)
    costs = [
        softplus(-(s[i] - s[j]))
        for i, j in itertools.permutations(range(len(s)), 2)
        if y[i] > y[j] and (k is None or min(r[i], r[j]) <= k)
    ]
    got = ranknet(t([s]), t([y]), full(len(s)), k=k).item()
    assert got == pytest.approx(sum(costs) / len(costs), rel=1e-12)


def test_ranknet_at_k_drops_exactly_the_pairs_below_k():
    # ranks 1..4 in tensor order; labelled pairs (2,0) (2,1) (3,0) (3,1) (2,3).
    s, y = [4.0, 3.0, 2.0, 1.0], [0.0, 0.0, 2.0, 1.0]
    kept = [(2, 0), (2, 1), (3, 0), (3, 1)]  # (2,3) has ranks 3 and 4, both beyond k = 2
    want = sum(softplus(-(s[i] - s[j])) for i, j in kept) / len(kept)
    assert ranknet(t([s]), t([y]), full(4), k=2).item() == pytest.approx(want, rel=1e-12)
    # Moving the pair below k changes nothing as long as both stay below k.
    s2 = [4.0, 3.0, 1.0, 2.0]
    want2 = sum(softplus(-(s2[i] - s2[j])) for i, j in kept) / len(kept)
    assert ranknet(t([s2]), t([y]), full(4), k=2).item() == pytest.approx(want2, rel=1e-12)


# --------------------------------------------------------------------------- LambdaLoss


@pytest.mark.parametrize("s, y", LISTS)
@pytest.mark.parametrize("scheme", ["ndcg_loss2", "ndcg_loss2pp", "lambdarank", "ranknet"])
@pytest.mark.parametrize("k", [None, 2, 4])
def test_lambdaloss_equals_brute_force(s, y, scheme, k):
    got = lambdaloss(t([s]), t([y]), full(len(s)), scheme=scheme, k=k, sigma=1.5, mu=3.0).item()
    assert got == pytest.approx(brute_lambdaloss(s, y, scheme, 1.5, 3.0, k), rel=1e-10)


def test_lambdaloss_ranknet_scheme_is_the_log2_pair_sum_of_ranknet():
    """Per list: lambdaloss(scheme="ranknet") = ranknet * n_pairs / ln 2."""
    for s, y in LISTS:
        n_pairs = sum(1 for a, b in itertools.permutations(y, 2) if a > b)
        ll = lambdaloss(t([s]), t([y]), full(len(s)), scheme="ranknet").item()
        rn = ranknet(t([s]), t([y]), full(len(s))).item()
        assert ll == pytest.approx(rn * n_pairs / math.log(2.0), rel=1e-12)


def test_lambdaloss_at_k_matches_rax_topn_reference_weights():
    """rax's published dcg2_lambdaweight(topn=1) weights for scores (0, 1, 2), labels
    (0, 1, 0.3), scaled by 1 / (1 - d(max rank)); we sum those weights (divided by rax's
    list-size factor, gains normalised by maxDCG@1) times log2 costs for the pairs that
    straddle k = 1. Item 2 has rank 1, item 1 rank 2, item 0 rank 3, so the pair (1, 0)
    sits wholly below k: rax keeps it, docs/losses.md ("LambdaLoss") drops it, and the spec decides."""
    s, y = [0.0, 1.0, 2.0], [0.0, 1.0, 0.3]
    g = [2.0**v - 1.0 for v in y]
    max_dcg_at_1 = 1.0
    rax = {  # (i, j) with y_i > y_j -> rax weight / list size, from rax's lambdaweights_test
        (1, 2): (1.0 / (1.0 - d(2))) * abs(d(1) - d(2)) * abs(g[1] - g[2]),
        (2, 0): (1.0 / (1.0 - d(3))) * abs(d(2) - d(3)) * abs(g[2] - g[0]),
    }
    want = sum(w / max_dcg_at_1 * softplus(-(s[i] - s[j])) / math.log(2.0) for (i, j), w in rax.items())
    assert lambdaloss(t([s]), t([y]), full(3), k=1).item() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("scheme", ["lambdarank", "ranknet", "ndcg_loss2", "ndcg_loss2pp"])
def test_lambdaloss_at_k_drops_pairs_below_k_and_reweights_straddling_pairs(scheme):
    """Ranks 1..4 in tensor order, k = 2, one relevant item at rank 3: labelled pairs
    (2, 0), (2, 1) straddle k, (2, 3) lies wholly below k. Every scheme drops (2, 3), so
    item 3 gets exactly zero gradient; ndcg_loss2 scales the straddling pairs by
    1 / (1 - d(3)) (Jagerman et al. 2022), checked on item 0's gradient by hand."""
    s, y = [4.0, 3.0, 2.0, 1.0], [0.0, 0.0, 1.0, 0.0]
    sc = t([s]).requires_grad_(True)
    value = lambdaloss(sc, t([y]), full(4), scheme=scheme, k=2)
    value.backward()
    assert value.item() == pytest.approx(brute_lambdaloss(s, y, scheme, k=2), rel=1e-12)
    assert sc.grad[0, 3].item() == 0.0
    assert sc.grad[0, 2].item() < 0  # the relevant item is pushed up in every scheme
    if scheme == "ndcg_loss2":
        w20 = abs(d(2) - d(3)) / (1.0 - d(3))  # pair (2, 0): |r_i - r_j| = 2, max rank 3; G_2 = 1
        cost_grad = 1.0 / (1.0 + math.exp(s[2] - s[0])) / math.log(2.0)  # d/ds_0 of log2(1 + e^-(s2-s0))
        assert sc.grad[0, 0].item() == pytest.approx(w20 * cost_grad, rel=1e-12)


def test_lambda_opa_is_ranknet_scheme_over_unordered_pairs():
    for s, y in LISTS:
        n = len(s)
        got = lambda_opa(t([s]), t([y]), full(n)).item()
        want = lambdaloss(t([s]), t([y]), full(n), scheme="ranknet").item() / (n * (n - 1) / 2)
        assert got == pytest.approx(want, rel=1e-12)


def test_lambda_recall_equals_brute_force_with_tie_expectation():
    s = [0.3, 2.0, -1.0, 0.7, 1.1, -0.2]
    y = [3.0, 1.0, 1.0, 0.0, 1.0, 2.0]
    k, m = 3, 2  # true top-3: items 0, 5 and one of the three label-1 items (1/3 each)
    G = [1.0, 1 / 3, 1 / 3, 0.0, 1 / 3, 1.0]
    r = brute_ranks(s)
    inv_d = [1.0 if x <= m else 0.0 for x in r]
    total = sum(
        abs(G[i] - G[j]) * abs(inv_d[i] - inv_d[j]) * softplus(-(s[i] - s[j])) / math.log(2.0)
        for i, j in itertools.permutations(range(6), 2)
        if y[i] > y[j]
    )
    got = lambda_recall(t([s]), t([y]), full(6), k=k, m=m).item()
    assert got == pytest.approx(total / 15.0, rel=1e-12)


def test_lambda_recall_is_zero_when_everything_is_recalled():
    s, y = t([[0.1, 0.5, 0.2]]), t([[2.0, 0.0, 1.0]])
    assert lambda_recall(s, y, full(3), k=1, m=30).item() == 0.0


@pytest.mark.parametrize("bad", [dict(scheme="ndcg"), dict(k=0), dict(k=2.5), dict(sigma=0.0)])
def test_lambdaloss_rejects_bad_hyperparameters(bad):
    with pytest.raises(ValueError):
        lambdaloss(t([[0.0, 1.0]]), t([[1.0, 0.0]]), full(2), **bad)


# --------------------------------------------------------------------------- ApproxNDCG


def test_approxndcg_tends_to_minus_ndcg_as_alpha_grows():
    rng = np.random.default_rng(3)
    scores = rng.permutation(12).astype(float)[None] * 0.1  # separated by >= 0.1
    labels = rng.integers(0, 5, size=(1, 12)).astype(float)
    ndcg = ndcg_score(2.0**labels - 1.0, scores)  # sklearn: gains given directly, log2 discount
    got = [approxndcg(t(scores), t(labels), full(12), alpha=a).item() for a in (10.0, 100.0, 1e4)]
    assert abs(got[2] + ndcg) < 1e-12
    assert abs(got[1] + ndcg) < abs(got[0] + ndcg)


def test_approxndcg_hand_computation():
    s, y = [0.0, 1.0], [1.0, 0.0]
    rank0 = 1.0 + 1.0 / (1.0 + math.exp(-2.0))  # alpha = 2: sigma(2 (s_1 - s_0))
    want = -(1.0 / math.log2(1.0 + rank0)) / 1.0
    assert approxndcg(t([s]), t([y]), full(2), alpha=2.0).item() == pytest.approx(want, rel=1e-12)


# --------------------------------------------------------------------------- listwise


def test_listnet_hand_computation():
    s, y = np.array([1.0, 0.0, -1.0]), np.array([2.0, 1.0, 0.0])
    p_y = np.exp(y) / np.exp(y).sum()
    log_p_s = s - np.log(np.exp(s).sum())
    want = -(p_y * log_p_s).sum()
    assert listnet(t([s.tolist()]), t([y.tolist()]), full(3)).item() == pytest.approx(want, rel=1e-12)


def test_softmax_hand_computation_and_zero_label_lists_skipped():
    s = t([[1.0, 0.0, -1.0], [5.0, 1.0, 0.0]])
    y = t([[3.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    lse = math.log(math.e + 1.0 + math.exp(-1.0))
    want = -(0.75 * (1.0 - lse) + 0.25 * (0.0 - lse))
    assert softmax(s, y, full(3, 2)).item() == pytest.approx(want, rel=1e-12)


def _pl_nll(s, order) -> float:
    return sum(math.log(sum(math.exp(s[u]) for u in order[t_:])) - s[order[t_]] for t_ in range(len(order)))


def test_listmle_equals_plackett_luce_nll_without_ties():
    s, y = [0.2, -0.4, 1.3, 0.0], [0.5, 3.0, 1.0, 2.0]
    order = sorted(range(4), key=lambda i: -y[i])
    assert listmle(t([s]), t([y]), full(4)).item() == pytest.approx(_pl_nll(s, order), rel=1e-12)


def test_listmle_ties_average_to_the_expectation_over_tie_orders():
    s, y = [0.2, -0.4, 1.3, 0.0, 0.9], [1.0, 2.0, 1.0, 0.0, 1.0]
    tied = [0, 2, 4]
    exact = np.mean([_pl_nll(s, [1, *perm, 3]) for perm in itertools.permutations(tied)])
    gen = torch.Generator().manual_seed(0)
    draws = [listmle(t([s]), t([y]), full(5), generator=gen).item() for _ in range(3000)]
    assert np.mean(draws) == pytest.approx(exact, abs=0.02)
    assert len(set(np.round(draws, 12))) == 6  # all 3! tie orders occur


def test_listmle_same_generator_state_same_value_even_when_padded():
    s, y = t([[0.2, -0.4, 1.3, 0.0]]), t([[1.0, 1.0, 1.0, 0.0]])
    sp = torch.cat([s, t([[7.0, -3.0]])], dim=1)
    yp = torch.cat([y, t([[4.0, 4.0]])], dim=1)
    mp = torch.tensor([[True, True, True, True, False, False]])
    for seed in range(5):
        a = listmle(s, y, full(4), generator=torch.Generator().manual_seed(seed))
        b = listmle(sp, yp, mp, generator=torch.Generator().manual_seed(seed))
        assert a.item() == pytest.approx(b.item(), rel=1e-12)


def test_rmse_hand_computation_and_zero_error_gradient():
    s, y = t([[0.0, 2.0]]), t([[1.0, 4.0]])
    p = [4.0 * 0.5, 4.0 / (1.0 + math.exp(-2.0))]
    want = math.sqrt(((p[0] - 1.0) ** 2 + (p[1] - 4.0) ** 2) / 2)
    assert rmse(s, y, full(2)).item() == pytest.approx(want, rel=1e-12)
    exact = torch.zeros(1, 2, dtype=F64, requires_grad=True)
    value = rmse(exact, t([[2.0, 2.0]]), full(2))
    value.backward()
    assert value.item() == 0.0 and torch.equal(exact.grad, torch.zeros(1, 2, dtype=F64))


@pytest.mark.parametrize("fn", [ranknet, lambdaloss, lambda_recall, lambda_opa, approxndcg, listnet, softmax, listmle, rmse])
def test_inputs_are_validated(fn):
    s, y, m = t([[0.0, 1.0, 2.0]]), t([[1.0, 0.0, 2.0]]), full(3)
    with pytest.raises(ValueError, match="same \\[B, L\\] shape"):
        fn(s, y[:, :2], m)
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        fn(s, y, m.to(F64))
    with pytest.raises(ValueError, match="scores must be floating point"):
        fn(s.long(), y, m)
    # integer labels are accepted and cast to the scores' dtype
    assert fn(s, y.long(), m).dtype == F64


@pytest.mark.parametrize("fn", [ranknet, lambdaloss, lambda_recall, lambda_opa, approxndcg])
def test_float32_long_lists_match_float64(fn):
    """Sums over ~L^2/2 pairs must be accumulated accurately in float32 (pairwise
    reduction), and rank weights must not cancel: 1e-5 relative at L = 1000."""
    gen = torch.Generator().manual_seed(11)
    s = torch.randn(1, 1000, generator=gen, dtype=F64)
    y = torch.randint(0, 5, (1, 1000), generator=gen).to(F64)
    m = full(1000)
    v64 = fn(s, y, m).item()
    v32 = fn(s.float(), y.float(), m).item()
    assert v32 == pytest.approx(v64, rel=1e-5)
