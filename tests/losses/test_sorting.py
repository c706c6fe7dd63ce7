"""Oracles, limits and invariances of the sorting-based losses (docs/losses.md).

Covers NeuralSort, Sinkhorn, PiRank-NDCG/ARP, NeuralNDCG(-T), SinkProp, ARF and the
NeuralSort cross entropy. Hard metrics come from ``bench.metrics.evaluate`` (the suite's
only metric path) and, for NDCG, also from a tiny independent sort in this file.
Tolerances are stated at each assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.losses import chunks as chunks_module
from bench.losses.arf import ARFLoss, arf_relax
from bench.losses.neuralndcg import neuralndcg, neuralndcg_transposed
from bench.losses.neuralsort import abs_diff_row_sums, neuralsort, neuralsort_log
from bench.losses.neuralsort_ce import neuralsort_ce, sort_target
from bench.losses.pirank import pirank_arp, pirank_ndcg, pirank_topk
from bench.losses.sinkhorn import sinkhorn, sinkhorn_bilinear, sinkhorn_iterations
from bench.losses.sinkprop import sinkprop, sinkprop_matrix
from bench.metrics import evaluate

F64 = torch.float64

# Table 1 of the NeuralNDCG paper.
T1_Y = [4.0, 2, 1, 0, 4, 3]
T1_S = [0.5, 0.2, 0.1, 0.01, 0.65, 0.3]
T1_ROWS = {
    0.1: [3.9995, 3.8909, 2.8239, 1.9730, 0.9989, 0.3136],
    1.0: [3.3893, 2.9820, 2.4965, 2.0191, 1.6097, 1.2815],
}

# Every loss of this module with hyperparameters that make @k meaningful on short lists.
LOSSES = {
    "pirank_ndcg": lambda s, y, m: pirank_ndcg(s, y, m, k=3, tau=1.0, straight_through=False),
    "pirank_ndcg_d2": lambda s, y, m: pirank_ndcg(s, y, m, k=3, tau=(0.5, 1.0), branching=(4, 3),
                                                  straight_through=False),
    "pirank_arp": lambda s, y, m: pirank_arp(s, y, m, tau=1.0, straight_through=False),
    "pirank_arp_k3": lambda s, y, m: pirank_arp(s, y, m, k=3, tau=1.0, straight_through=False),
    "neuralndcg": lambda s, y, m: neuralndcg(s, y, m, k=4),
    "neuralndcg_transposed": lambda s, y, m: neuralndcg_transposed(s, y, m, k=4),
    "sinkprop": lambda s, y, m: sinkprop(s, y, m, k=4),
    "arf": lambda s, y, m: ARFLoss(m=3, k=2).to(s.dtype)(s, y, m),
    "arf_relax": lambda s, y, m: arf_relax(s, y, m, m=3, k=2),
    "neuralsort_ce": lambda s, y, m: neuralsort_ce(s, y, m),
}


def batch(lengths, width, seed, dtype=F64, pad_scale=1e3):
    """Distinct N(0,1) scores, graded labels with >= 2 grades, garbage in the padding."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(len(lengths), width)) * pad_scale
    y = rng.integers(0, 5, size=(len(lengths), width)).astype(float)
    m = np.zeros((len(lengths), width), dtype=bool)
    for row, n in enumerate(lengths):
        m[row, :n] = True
        s[row, :n] = rng.normal(size=n)
        y[row, :n] = rng.permutation(np.r_[[3.0, 0.0], rng.integers(0, 5, size=max(n - 2, 0))][:n])
    return torch.tensor(s, dtype=dtype), torch.tensor(y, dtype=dtype), torch.tensor(m)


def flat(s, y, m):
    """Padded batch -> flat numpy arrays + offsets for ``evaluate``."""
    n = m.sum(-1).numpy()
    offsets = np.r_[0, np.cumsum(n)]
    return s.detach()[m].numpy(), y[m].numpy(), offsets


def hard_ndcg(s, y, m, k=None):
    """Independent oracle: NDCG@k by sorting each list in Python (ties by position)."""
    out = []
    for row in range(s.shape[0]):
        sc = s[row][m[row]].tolist()
        lab = y[row][m[row]].tolist()
        order = sorted(range(len(sc)), key=lambda i: (-sc[i], i))
        kk = len(sc) if k is None else min(k, len(sc))
        dcg = sum((2 ** lab[i] - 1) / math.log2(j + 2) for j, i in enumerate(order[:kk]))
        ideal = sum((2 ** v - 1) / math.log2(j + 2) for j, v in enumerate(sorted(lab, reverse=True)[:kk]))
        out.append(dcg / ideal)
    return np.array(out)


def metric(s, y, m, name):
    return evaluate(*flat(s, y, m), [name])[name].to_numpy()


# ---------------------------------------------------------------- NeuralSort building block


@pytest.mark.parametrize("tau", [0.1, 1.0])
def test_neuralsort_table1_rows(tau):
    s = torch.tensor([T1_S], dtype=F64)
    p = neuralsort(s, torch.ones_like(s, dtype=torch.bool), tau)
    got = (p[0] @ torch.tensor(T1_Y, dtype=F64)).tolist()
    assert got == pytest.approx(T1_ROWS[tau], abs=1e-4)  # paper prints 4 decimals


def test_neuralsort_table1_small_tau_is_nearly_sorted():
    s = torch.tensor([T1_S], dtype=F64)
    got = (neuralsort(s, torch.ones_like(s, dtype=torch.bool), 0.01)[0] @ torch.tensor(T1_Y, dtype=F64)).tolist()
    assert got == pytest.approx(sorted(T1_Y, reverse=True), abs=1e-3)


def test_neuralsort_rows_are_distributions_over_real_items_only():
    s, _, m = batch([6, 3, 1], 8, seed=1)
    p = neuralsort(s, m, 0.5)
    n = m.sum(-1)
    for row in range(3):
        assert torch.allclose(p[row, : n[row]].sum(-1), torch.ones(n[row], dtype=F64), atol=1e-12)
        assert torch.all(p[row, n[row] :] == 0) and torch.all(p[row][:, ~m[row]] == 0)


def test_abs_diff_row_sums_match_dense_with_ties_and_gradcheck():
    s = torch.tensor([[1.0, 1.0, 2.0, -0.5, 1.0, 7.0], [0.3, -2.0, 0.3, 5.0, 1.0, 2.0]], dtype=F64)
    m = torch.tensor([[True] * 5 + [False], [True] * 6])
    dense = torch.where(m[:, :, None] & m[:, None, :], (s[:, :, None] - s[:, None, :]).abs(), 0).sum(-1) * m
    assert torch.allclose(abs_diff_row_sums(s, m), dense, atol=1e-12)
    # gradient on tied inputs equals autograd of the dense |s_i - s_j| sum (sign(0) = 0)
    w = torch.randn(2, 6, dtype=F64, generator=torch.Generator().manual_seed(0))
    a = s.clone().requires_grad_(True)
    (abs_diff_row_sums(a, m) * w).sum().backward()
    b = s.clone().requires_grad_(True)
    (torch.where(m[:, :, None] & m[:, None, :], (b[:, :, None] - b[:, None, :]).abs(), 0).sum(-1) * m * w).sum().backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-12)
    distinct, _, md = batch([7, 4], 7, seed=2)
    assert torch.autograd.gradcheck(lambda x: abs_diff_row_sums(x, md), (distinct.clone().requires_grad_(True),))


def test_neuralsort_topk_rows_equal_full_rows_and_log_is_exact():
    s, _, m = batch([9, 5], 9, seed=3)
    full = neuralsort(s, m, 0.7)
    assert torch.allclose(neuralsort(s, m, 0.7, k=4), full[:, :4], atol=1e-14)
    logp = neuralsort_log(s, m, 0.7)
    ok = full > 0
    assert torch.allclose(logp[ok].exp(), full[ok], rtol=1e-12)


# ---------------------------------------------------------------- Sinkhorn


def test_sinkhorn_doubly_stochastic_within_tol_and_stops_early():
    s, _, m = batch([12, 7], 12, seed=4)
    p_hat = neuralsort(s, m, 1.0)
    rows = torch.arange(12)[None, :] < m.sum(-1, keepdim=True)
    tol = 1e-6
    p = sinkhorn(p_hat, rows, m, max_iter=500, tol=tol)
    iters = sinkhorn_iterations(p_hat, rows, m, max_iter=500, tol=tol)
    assert torch.all(iters < 500)  # converged, did not hit the cap
    assert ((p.sum(-1) - 1).abs()[rows]).max() <= tol  # stated tolerance
    assert ((p.sum(-2) - 1).abs()[m]).max() <= 1e-12  # exact after the column step
    assert torch.all(p[~rows] == 0) and torch.all(p.transpose(1, 2)[~m] == 0)


def test_sinkhorn_per_list_freeze_makes_lists_independent():
    s, _, m = batch([12, 7, 3], 12, seed=5)
    rows = torch.arange(12)[None, :] < m.sum(-1, keepdim=True)
    p_hat = neuralsort(s, m, 1.0)
    left = torch.rand(3, 12, dtype=F64, generator=torch.Generator().manual_seed(1))
    joint = sinkhorn_bilinear(p_hat, left, left, rows, m)
    for i in range(3):
        alone = sinkhorn_bilinear(p_hat[i : i + 1], left[i : i + 1], left[i : i + 1], rows[i : i + 1], m[i : i + 1])
        assert alone.item() == pytest.approx(joint[i].item(), rel=1e-12)


@pytest.mark.parametrize("max_iter,tol", [(6, -1.0), (30, 1e-6)])
def test_sinkhorn_vector_backward_matches_autograd_and_finite_differences(max_iter, tol):
    g = torch.Generator().manual_seed(2)
    k = torch.rand(3, 6, 6, dtype=F64, generator=g) + 0.05
    rows = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 5 + [False]])
    cols = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [False] + [True] * 5])
    a, b = torch.rand(3, 6, dtype=F64, generator=g), torch.rand(3, 6, dtype=F64, generator=g)
    k1 = k.clone().requires_grad_(True)
    v1 = sinkhorn_bilinear(k1, a, b, rows, cols, max_iter=max_iter, tol=tol)
    v1.sum().backward()
    k2 = k.clone().requires_grad_(True)
    v2 = torch.einsum("bi,bij,bj->b", a * rows, sinkhorn(k2, rows, cols, max_iter=max_iter, tol=tol), b * cols)
    v2.sum().backward()
    assert torch.allclose(v1, v2, rtol=1e-12) and torch.allclose(k1.grad, k2.grad, atol=1e-12)
    f = lambda x, left, right: sinkhorn_bilinear(x, left, right, rows, cols, max_iter=max_iter, tol=tol)  # noqa: E731
    assert torch.autograd.gradcheck(f, (k.requires_grad_(True), a.requires_grad_(True), b.requires_grad_(True)))


def _value_and_grads(fn, *inputs):
    leaves = [x.clone().requires_grad_(True) for x in inputs]
    value = fn(*leaves)
    value.sum().backward()
    return [value.detach()] + [leaf.grad for leaf in leaves]


CHUNKED = {
    "neuralndcg": lambda s, y, m: neuralndcg(s, y, m),
    "neuralndcg@5": lambda s, y, m: neuralndcg(s, y, m, k=5),
    "neuralndcg_transposed": lambda s, y, m: neuralndcg_transposed(s, y, m),
    "neuralndcg_transposed@5": lambda s, y, m: neuralndcg_transposed(s, y, m, k=5, tau=0.5),
}


@pytest.mark.parametrize("name", sorted(CHUNKED))
@pytest.mark.parametrize("lists_per_chunk", [1, 2, 3])
def test_chunking_the_lists_changes_no_bit(monkeypatch, name, lists_per_chunk):
    """Oracle: the same loss with the whole batch as one chunk; equality is bitwise (float32)."""
    # Short lists converge in a few iterations, long ones run to max_iter: chunks stop at
    # different iterations, so the padding of the shorter histories is exercised.
    s, y, m = batch([40, 3, 0, 1, 25, 40, 6], 40, seed=11, dtype=torch.float32)
    fn = CHUNKED[name]
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: None)
    whole = _value_and_grads(lambda x: fn(x, y, m), s)
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: lists_per_chunk * 40 * 40 * 4)
    assert len(chunks_module.list_chunks(7, 40 * 40 * 4, s.device)) == -(-7 // lists_per_chunk)
    chunked = _value_and_grads(lambda x: fn(x, y, m), s)
    assert all(torch.equal(a, b) for a, b in zip(whole, chunked))


def test_chunking_changes_no_bit_of_sinkhorn_bilinear(monkeypatch):
    """Value and the gradients of K, left and right, chunked by 2 lists against one chunk (bitwise)."""
    s, _, m = batch([30, 4, 30, 2, 17], 30, seed=3, dtype=torch.float32)
    rows = torch.arange(30)[None, :] < m.sum(-1, keepdim=True)
    k = neuralsort(s, m, 1.0).detach() + 0.01
    g = torch.Generator().manual_seed(4)
    left, right = torch.rand(5, 30, generator=g), torch.rand(5, 30, generator=g)
    iters = sinkhorn_iterations(k, rows, m)
    assert len(set(iters.tolist())) > 1  # the chunks stop at different iterations

    def fn(k, left, right):
        return sinkhorn_bilinear(k, left, right, rows, m)

    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: None)
    whole = _value_and_grads(fn, k, left, right)
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: 2 * 30 * 30 * 4)
    chunked = _value_and_grads(fn, k, left, right)
    assert all(torch.equal(a, b) for a, b in zip(whole, chunked))


# ---------------------------------------------------------------- PiRank


def test_pirank_figure4_root_values():
    s = torch.tensor([[0.2, 0.5, 0.3, 0.4, 0.1, 0.7]], dtype=F64)
    m = torch.ones_like(s, dtype=torch.bool)
    p = pirank_topk(s, m, k=2, tau=(1e-4, 1e-3), branching=(3, 2))
    assert (p[0] @ s[0]).tolist() == pytest.approx([0.7, 0.5], abs=1e-9)  # tau -> 0
    assert p[0].argmax(-1).tolist() == [5, 1]
    # at a moderate temperature the root values are convex combinations (below the max)
    soft = pirank_topk(s, m, k=2, tau=0.1, branching=(3, 2))[0] @ s[0]
    assert 0.1 < soft[1] < soft[0] < 0.7


def test_pirank_depth1_equals_neuralsort_topk_rows():
    s, _, m = batch([11, 6, 9], 11, seed=6)
    got = pirank_topk(s, m, k=5, tau=0.8)
    assert torch.allclose(got, neuralsort(s, m, 0.8, k=5), atol=1e-14)


def test_pirank_tree_gives_no_mass_to_filler_or_padding():
    s, _, m = batch([7, 2, 5], 9, seed=7)
    s[0, 3] = 50.0  # a dominant real item must not make filler look "low"
    p = pirank_topk(s, m, k=4, tau=3.0, branching=(3, 3))  # 9 leaves, lists of 7, 2, 5
    n = m.sum(-1)
    for row in range(3):
        kk = min(4, int(n[row]))
        assert torch.allclose(p[row, :kk].sum(-1), torch.ones(kk, dtype=F64), atol=1e-12)
        assert torch.all(p[row, kk:] == 0) and torch.all(p[row][:, ~m[row]] == 0)


@pytest.mark.parametrize("branching", [(27,), (9, 3), (3, 3, 3)])
def test_pirank_zero_temperature_limit_is_hard_ndcg(branching):
    s, y, m = batch([27, 20, 13], 27, seed=8)
    for k in (1, 5, None):
        relaxed = [pirank_ndcg(s[i : i + 1], y[i : i + 1], m[i : i + 1], k=k, tau=1e-4, branching=branching,
                               straight_through=False).item() for i in range(3)]
        name = "ndcg@max" if k is None else f"ndcg@{k}"
        assert relaxed == pytest.approx(1 - metric(s, y, m, name), abs=1e-9)
        assert relaxed == pytest.approx(1 - hard_ndcg(s, y, m, k), abs=1e-9)


def test_pirank_straight_through_value_is_hard_metric_and_gradient_is_relaxed():
    s, y, m = batch([10, 8, 5], 10, seed=9)
    for k in (3, 10):
        st = pirank_ndcg(s, y, m, k=k, tau=5.0)
        assert st.item() == pytest.approx(float(np.mean(1 - metric(s, y, m, f"ndcg@{k}"))), rel=1e-13, abs=1e-15)
        a, b = s.clone().requires_grad_(True), s.clone().requires_grad_(True)
        pirank_ndcg(a, y, m, k=k, tau=5.0).backward()
        pirank_ndcg(b, y, m, k=k, tau=5.0, straight_through=False).backward()
        assert torch.equal(a.grad, b.grad)
    single = pirank_ndcg(s[:1], y[:1], m[:1], k=3)  # one list: no batch mean in between
    assert single.item() == pytest.approx(1 - hard_ndcg(s[:1], y[:1], m[:1], 3)[0], abs=1e-15)
    arp = pirank_arp(s, y, m, tau=5.0)
    assert arp.item() == pytest.approx(float(np.mean(metric(s, y, m, "arp"))), rel=1e-13)


def test_pirank_arp_zero_temperature_and_truncation_rule():
    s, y, m = batch([12, 9], 12, seed=10)
    relaxed = pirank_arp(s, y, m, tau=1e-4, straight_through=False)
    assert relaxed.item() == pytest.approx(float(np.mean(metric(s, y, m, "arp"))), abs=1e-9)
    # k < n: positions beyond k count as k + 1 (independent transcription of the rule)
    vals = []
    for row in range(2):
        sc, lab = s[row][m[row]].tolist(), y[row][m[row]].tolist()
        order = sorted(range(len(sc)), key=lambda i: -sc[i])
        vals.append(sum(lab[i] * min(j + 1, 4) for j, i in enumerate(order)) / sum(lab))
    assert pirank_arp(s, y, m, k=3).item() == pytest.approx(float(np.mean(vals)), rel=1e-13)


# ---------------------------------------------------------------- NeuralNDCG, SinkProp


@pytest.mark.parametrize("loss", [neuralndcg, neuralndcg_transposed])
def test_neuralndcg_zero_temperature_limit_is_hard_ndcg(loss):
    s, y, m = batch([15, 11, 6], 15, seed=11)
    for k in (1, 4, None):
        got = [loss(s[i : i + 1], y[i : i + 1], m[i : i + 1], tau=1e-4, k=k).item() for i in range(3)]
        name = "ndcg@max" if k is None else f"ndcg@{k}"
        assert got == pytest.approx(-metric(s, y, m, name), abs=1e-9)
        assert got == pytest.approx(-hard_ndcg(s, y, m, k), abs=1e-9)


def test_neuralndcg_sinkhorn_changes_value_and_matches_dense_transcription():
    s = torch.tensor([T1_S], dtype=F64)
    y = torch.tensor([T1_Y], dtype=F64)
    m = torch.ones_like(s, dtype=torch.bool)
    p = neuralsort(s, m, 1.0)[0]
    q = p.clone()
    qt = p.t().clone()
    for _ in range(200):  # dense textbook Sinkhorn to convergence, rows first
        q = q / q.sum(1, keepdim=True)
        q = q / q.sum(0, keepdim=True)
        qt = qt / qt.sum(1, keepdim=True)
        qt = qt / qt.sum(0, keepdim=True)
    g = 2**y[0] - 1
    d = 1 / torch.log2(torch.arange(2, 8, dtype=F64))
    ideal = (torch.sort(g, descending=True).values * d).sum()
    expect = -((q @ g) * d).sum() / ideal
    expect_t = -(g * (qt @ d)).sum() / ideal
    assert neuralndcg(s, y, m, max_iter=200, tol=1e-13).item() == pytest.approx(expect.item(), abs=1e-10)
    assert neuralndcg_transposed(s, y, m, max_iter=200, tol=1e-13).item() == pytest.approx(expect_t.item(), abs=1e-10)


def test_sinkprop_small_sigma_limit_is_hard_ndcg():
    s, y, m = batch([14, 9, 5], 14, seed=12)
    for k in (3, None):
        got = [sinkprop(s[i : i + 1], y[i : i + 1], m[i : i + 1], sigma=1e-5, eps=1e-15, k=k).item()
               for i in range(3)]
        name = "ndcg@max" if k is None else f"ndcg@{k}"
        assert got == pytest.approx(-metric(s, y, m, name), abs=1e-9)


def test_sinkprop_matches_dense_incomplete_sinkhorn():
    s, y, m = batch([7], 7, seed=13)
    sig, eps = 0.5, 1e-3
    mat = torch.exp(-((s[0][:, None] - torch.sort(s[0], descending=True).values[None, :]) ** 2) / sig) + eps
    for _ in range(5):
        mat = mat / mat.sum(1, keepdim=True)
        mat = mat / mat.sum(0, keepdim=True)
    g = 2 ** y[0] - 1
    d = 1 / torch.log2(torch.arange(2, 9, dtype=F64))
    ideal = (torch.sort(g, descending=True).values * d).sum()
    expect = -(g[:, None] * mat * d[None, :]).sum() / ideal
    assert sinkprop(s, y, m, sigma=sig, eps=eps).item() == pytest.approx(expect.item(), rel=1e-12)
    # many iterations: the SinkProp matrix becomes doubly stochastic (within the 1e-9 tol)
    d = sinkhorn(sinkprop_matrix(s, m, sig, eps), m, m, max_iter=2000, tol=1e-9)
    assert torch.allclose(d.sum(1), torch.ones(1, 7, dtype=F64), atol=1e-9)
    assert torch.allclose(d.sum(2), torch.ones(1, 7, dtype=F64), atol=1e-9)


# ---------------------------------------------------------------- ARF, NeuralSort CE


def test_arf_alpha_gets_gradient_and_moves():
    s, y, m = batch([10, 8], 10, seed=14)
    loss = ARFLoss(m=4, k=2)
    opt = torch.optim.SGD(loss.parameters(), lr=0.1)
    before = loss.alpha.item()
    value = loss(s.float(), y.float(), m)
    value.backward()
    assert loss.alpha.grad is not None and loss.alpha.grad.item() != 0
    opt.step()
    assert loss.alpha.item() != before
    # d/d alpha of L_total = -L_global / alpha^3 + 1 / alpha at alpha = 1 (eq. 13)
    fresh = ARFLoss(m=4, k=2).double()
    total = fresh(s, y, m)
    relax = arf_relax(s, y, m, m=4, k=2)
    glob = 2.0 * (total - relax)  # alpha = 1: L_total = L_relax + L_global / 2
    total.backward()
    assert fresh.alpha.grad.item() == pytest.approx(1.0 - glob.item(), rel=1e-10)


def test_arf_terms_against_dense_transcription():
    s, y, m = batch([6], 6, seed=15)
    tau, tl, mm, kk = 0.7, 1e-3, 3, 2
    ps = neuralsort(s, m, tau)[0]
    pv = neuralsort(y, m, tl)[0]
    relax = -(pv[:kk].sum(0) * torch.log(ps[:mm].sum(0) / mm)).sum()
    glob = -(pv * torch.log(ps)).sum()
    assert arf_relax(s, y, m, m=mm, k=kk, tau=tau).item() == pytest.approx(relax.item(), rel=1e-12)
    total = ARFLoss(m=mm, k=kk, tau=tau, alpha=2.0).double()(s, y, m)
    assert total.item() == pytest.approx((relax + glob / 8 + math.log(2.0)).item(), rel=1e-12)


def test_neuralsort_ce_target_and_value():
    y = torch.tensor([[1.0, 3.0, 1.0, 0.0, 0.0]], dtype=F64)
    m = torch.tensor([[True, True, True, True, False]])
    t = sort_target(y, m)[0]
    assert t.tolist()[:4] == [[0, 1, 0, 0, 0], [0.5, 0, 0.5, 0, 0], [0.5, 0, 0.5, 0, 0], [0, 0, 0, 1, 0]]
    assert torch.all(t[4] == 0)
    s = torch.tensor([[0.2, 1.0, -0.3, 0.5, 9.0]], dtype=F64)
    p = neuralsort(s, m, 1.0)[0, :4, :4]
    expect = -(t[:4, :4] * torch.log(p)).sum() / 4
    assert neuralsort_ce(s, y, m).item() == pytest.approx(expect.item(), rel=1e-12)


# ---------------------------------------------------------------- invariances, for every loss


@pytest.mark.parametrize("name", LOSSES)
def test_gradcheck_float64(name):
    s, y, m = batch([6, 4], 6, seed=16)
    assert torch.autograd.gradcheck(lambda x: LOSSES[name](x, y, m), (s.clone().requires_grad_(True),))


@pytest.mark.parametrize("name", LOSSES)
def test_padding_invariance(name):
    s, y, m = batch([9, 6, 3], 9, seed=17)
    es, ey, _ = batch([0, 0, 0], 7, seed=18)
    sp, yp = torch.cat([s, es], 1), torch.cat([y, ey], 1)
    mp = torch.cat([m, torch.zeros(3, 7, dtype=torch.bool)], 1)
    a, b = s.clone().requires_grad_(True), sp.clone().requires_grad_(True)
    va, vb = LOSSES[name](a, y, m), LOSSES[name](b, yp, mp)
    va.backward()
    vb.backward()
    assert vb.item() == pytest.approx(va.item(), rel=1e-9)  # docs/losses.md, "Common contract": 1e-9 relative
    assert torch.allclose(b.grad[:, :9][m], a.grad[m], rtol=1e-9, atol=1e-13)
    assert torch.all(b.grad[~mp] == 0) and torch.all(a.grad[~m] == 0)  # exactly 0


@pytest.mark.parametrize("name", LOSSES)
def test_batch_equals_mean_of_single_lists(name):
    lengths = [9, 6, 4, 1, 0]
    s, y, m = batch(lengths, 9, seed=19)
    singles = [LOSSES[name](s[i : i + 1, :n], y[i : i + 1, :n], m[i : i + 1, :n]).item()
               for i, n in enumerate(lengths[:3])]  # the 1- and 0-item lists contribute nothing
    assert LOSSES[name](s, y, m).item() == pytest.approx(float(np.mean(singles)), rel=1e-9)
    x = s[3:].clone().requires_grad_(True)
    v = LOSSES[name](x, y[3:], m[3:])
    v.backward()
    assert v.item() == 0.0 and torch.all(x.grad == 0)


@pytest.mark.parametrize("name", LOSSES)
def test_ideal_ordering_beats_reversed(name):
    _, y, m = batch([12, 9], 12, seed=20)
    ideal = torch.where(m, y - 0.01 * torch.arange(12, dtype=F64), 0)
    assert LOSSES[name](ideal, y, m).item() < LOSSES[name](-ideal, y, m).item()


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_finite_on_degenerate_inputs(name, dtype):
    rng = np.random.default_rng(21)
    base = rng.normal(size=(1, 7))
    lab = np.array([[3.0, 0, 1, 2, 0, 4, 1]])
    cases = [(np.zeros((1, 7)), lab), (base, np.full((1, 7), 2.0)), (base, np.zeros((1, 7))),
             (base * 1e4, lab), (rng.choice([-1e4, 1e4], size=(1, 7)) + base, lab), (base[:, :1], lab[:, :1])]
    for sc, lb in cases:
        s = torch.tensor(sc, dtype=dtype, requires_grad=True)
        v = LOSSES[name](s, torch.tensor(lb, dtype=dtype), torch.ones(s.shape, dtype=torch.bool))
        v.backward()
        assert torch.isfinite(v) and torch.all(torch.isfinite(s.grad)), (sc, lb)


def test_default_hyperparameters_finite_for_lengths_1_to_2000():
    s, y, m = batch([1, 2, 3, 40, 2000], 2000, seed=22, dtype=torch.float32)
    s = s * 3
    for loss in (pirank_ndcg, pirank_arp, neuralndcg, neuralndcg_transposed, sinkprop, arf_relax, ARFLoss(),
                 neuralsort_ce, lambda a, b, c: pirank_ndcg(a, b, c, depth=3)):
        x = s.clone().requires_grad_(True)
        v = loss(x, y, m)
        v.backward()
        assert torch.isfinite(v) and torch.all(torch.isfinite(x.grad)) and torch.all(x.grad[~m] == 0)


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("loss", ["ndcg", "arp"])
def test_pirank_deep_tree_of_a_list_does_not_depend_on_its_batch(depth, loss):
    """Default branching (depth > 1) is chosen per list: a list of 12 items gets the same
    loss and gradient alone and next to a list of 300 (whose own tree is much wider).
    Tolerance: 1e-12 relative (value) and 1e-12 * max|grad| (gradient) in float64."""
    fn = {"ndcg": lambda s, y, m: pirank_ndcg(s, y, m, k=5, tau=1.0, depth=depth, straight_through=False),
          "arp": lambda s, y, m: pirank_arp(s, y, m, tau=1.0, depth=depth, straight_through=False)}[loss]
    s, y, m = batch([12, 300], 300, seed=31)
    alone = s[:1, :12].clone().requires_grad_(True)
    v_alone = fn(alone, y[:1, :12], m[:1, :12])
    v_alone.backward()
    both = s.clone().requires_grad_(True)
    long = s[1:].clone().requires_grad_(True)
    v_long = fn(long, y[1:], m[1:])
    v_both = fn(both, y, m)  # the mean of the two lists' losses
    v_both.backward()
    assert v_both.item() == pytest.approx((v_alone.item() + v_long.item()) / 2, rel=1e-12)
    g = both.grad[0, :12] * 2  # the batch mean halves each list's gradient
    assert torch.allclose(g, alone.grad[0], rtol=1e-12, atol=1e-12 * alone.grad.abs().max().item())
    # and padding the short list alone to the long list's width changes nothing either
    padded = s[:1].clone().requires_grad_(True)
    mp = m[:1].clone()
    fn(padded, y[:1], mp).backward()
    assert torch.allclose(padded.grad[0, :12], alone.grad[0], rtol=1e-12, atol=1e-12 * alone.grad.abs().max().item())


def test_pirank_explicit_branching_is_the_same_for_every_list():
    """An explicit ``branching`` gives every list of the batch one tree (here 25 leaves): the
    batch value is the mean of the lists' values alone (1e-12 relative, float64), and the
    product of the factors must hold the longest list."""
    s, y, m = batch([5, 20], 20, seed=32)
    explicit = pirank_ndcg(s[:1], y[:1], m[:1], k=3, tau=1.0, branching=(5, 5), straight_through=False)
    in_batch = pirank_ndcg(s, y, m, k=3, tau=1.0, branching=(5, 5), straight_through=False)
    long = pirank_ndcg(s[1:], y[1:], m[1:], k=3, tau=1.0, branching=(5, 5), straight_through=False)
    assert in_batch.item() == pytest.approx((explicit.item() + long.item()) / 2, rel=1e-12)
    with pytest.raises(ValueError, match="fewer than the longest list"):
        pirank_ndcg(s, y, m, k=3, branching=(3, 3))


def test_pirank_per_list_branching_is_the_smallest_integer_root():
    from bench.losses.pirank import _per_list_branching

    n = torch.arange(0, 5001)
    for depth in (1, 2, 3, 4):
        got = _per_list_branching(n, depth).tolist()
        brute = [next(b for b in range(1, 5002) if b**depth >= max(int(x), 1)) for x in n]
        assert got == brute, depth
    assert _per_list_branching(torch.tensor([3375, 3376]), 3).tolist() == [15, 16]
