r"""Textbook transcriptions of the losses, used only as speed references by ``ltr-bench perf``.

Each reference computes the same quantity as the registered loss at its default
hyperparameters, the way the papers write it, for **full lists** (no padding):

* **dense NeuralSort** (:func:`neuralsort_full`): the whole ``n x n`` matrix
  :math:`\hat P = \operatorname{softmax}(((n + 1 - 2i) s - A_s \mathbf 1 \mathbf 1^T)/\tau)`
  with the row-sum term formed as the explicit product :math:`A_s (\mathbf 1 \mathbf 1^T)`
  (Grover et al., an ``O(n^3)`` matmul) for ``n <= 1000``; beyond that the cubic product
  would dominate for minutes, so the row sums come from a dense ``O(n^2)`` sum instead
  (the perf table says which was used);
* **dense autograd Sinkhorn** (:func:`sinkhorn_dense`): row then column normalisation
  of the full matrix for the full iteration count (no early stopping), every iterate
  kept by autograd;
* **Python index lists** (:func:`pair_index_lists`): the labelled pairs of every list are
  enumerated by a Python double loop, then the pair costs are gathered with those indices.

Losses of order ``O(n)`` (ListNet, Softmax, ListMLE, RMSE) have no reference.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from bench.losses._common import discounts, gain

NEURALSORT_CUBIC_MAX = 1000


def neuralsort_logits(s: Tensor, tau: float) -> Tensor:
    """``((n + 1 - 2i) s - A 1) / tau`` for every rank ``i``: ``[B, n, n]`` (rows = ranks)."""
    n = s.shape[-1]
    a = (s.unsqueeze(-1) - s.unsqueeze(-2)).abs()
    if n <= NEURALSORT_CUBIC_MAX:
        ones = torch.ones(n, 1, dtype=s.dtype, device=s.device)
        b = a @ (ones @ ones.T)  # B[j, i] = sum_l A[j, l]: the textbook A 1 1^T
        row_term = b.transpose(-1, -2)  # [i, j] = (A 1)_j
    else:
        row_term = a.sum(dim=-1).unsqueeze(-2)
    scaling = (n + 1 - 2 * torch.arange(1, n + 1, dtype=s.dtype, device=s.device)).unsqueeze(-1)
    return (scaling * s.unsqueeze(-2) - row_term) / tau


def neuralsort_full(s: Tensor, tau: float) -> Tensor:
    """Full NeuralSort matrix ``[B, n, n]`` (rows = ranks) of full lists ``s [B, n]``."""
    return torch.softmax(neuralsort_logits(s, tau), dim=-1)


def log_neuralsort_full(s: Tensor, tau: float) -> Tensor:
    """``log`` of :func:`neuralsort_full` as a log-softmax (``log`` of the float32 matrix
    underflows to ``-inf`` and turns ``0 * log 0`` into NaN)."""
    return torch.log_softmax(neuralsort_logits(s, tau), dim=-1)


def sinkhorn_dense(p: Tensor, n_iter: int) -> Tensor:
    """``n_iter`` rounds of row then column normalisation, all kept by autograd."""
    for _ in range(n_iter):
        p = p / p.sum(dim=-1, keepdim=True)
        p = p / p.sum(dim=-2, keepdim=True)
    return p


def _ideal_dcg(y: Tensor, k: int | None) -> Tensor:
    g = torch.sort(gain(y), dim=-1, descending=True).values
    n = g.shape[-1] if k is None else min(k, g.shape[-1])
    return (g[:, :n] * discounts(n, like=g)).sum(-1)


def _dvec(n: int, k: int | None, like: Tensor) -> Tensor:
    d = discounts(n, like=like)
    if k is not None:
        d = torch.where(torch.arange(n, device=like.device) < k, d, torch.zeros((), dtype=like.dtype, device=like.device))
    return d


def neuralndcg(s: Tensor, y: Tensor, *, tau: float = 1.0, k: int | None = None, max_iter: int = 30) -> Tensor:
    """``-sum_j [Sinkhorn(P) g]_j d_j / maxDCG``, mean over lists."""
    p = sinkhorn_dense(neuralsort_full(s, tau), max_iter)
    dcg = ((p @ gain(y).unsqueeze(-1)).squeeze(-1) * _dvec(s.shape[-1], k, s)).sum(-1)
    return (-dcg / _ideal_dcg(y, k)).mean()


def neuralndcg_transposed(s: Tensor, y: Tensor, *, tau: float = 1.0, k: int | None = None, max_iter: int = 30) -> Tensor:
    """``-sum_i g_i [Sinkhorn(P^T) dvec]_i / maxDCG``, mean over lists."""
    p = sinkhorn_dense(neuralsort_full(s, tau).transpose(-1, -2), max_iter)
    dcg = (gain(y) * (p @ _dvec(s.shape[-1], k, s).unsqueeze(-1)).squeeze(-1)).sum(-1)
    return (-dcg / _ideal_dcg(y, k)).mean()


def _hard_ndcg(s: Tensor, y: Tensor, k: int) -> Tensor:
    order = torch.argsort(s.detach(), dim=-1, descending=True, stable=True)
    g = torch.gather(gain(y), -1, order)[:, :k]
    return (g * discounts(g.shape[-1], like=g)).sum(-1) / _ideal_dcg(y, k)


def pirank_ndcg(s: Tensor, y: Tensor, *, k: int = 10, tau: float = 5.0) -> Tensor:
    """Depth-1 PiRank-NDCG@k from the FULL NeuralSort matrix (all ``n`` rows formed, top ``k`` used),
    straight-through: forward ``1 - NDCG@k``, gradient of the relaxed loss."""
    p = neuralsort_full(s, tau)[:, :k]
    relaxed = 1.0 - ((p @ gain(y).unsqueeze(-1)).squeeze(-1) * discounts(p.shape[1], like=s)).sum(-1) / _ideal_dcg(y, k)
    hard = 1.0 - _hard_ndcg(s, y, k)
    return (relaxed + (hard - relaxed).detach()).mean()


def pirank_arp(s: Tensor, y: Tensor, *, tau: float = 5.0) -> Tensor:
    """Depth-1 PiRank-ARP over the full list: ``sum_j [P y]_j j / sum_i y_i``, straight-through."""
    n = s.shape[-1]
    pos = torch.arange(1, n + 1, dtype=s.dtype, device=s.device)
    relaxed = ((neuralsort_full(s, tau) @ y.unsqueeze(-1)).squeeze(-1) * pos).sum(-1) / y.sum(-1)
    order = torch.argsort(s.detach(), dim=-1, descending=True, stable=True)
    hard = (torch.gather(y, -1, order) * pos).sum(-1) / y.sum(-1)
    return (relaxed + (hard - relaxed).detach()).mean()


def neuralsort_ce(s: Tensor, y: Tensor, *, tau: float = 1.0) -> Tensor:
    """Row-averaged cross entropy between the tie-uniform true permutation and ``P_hat``."""
    ranked = torch.sort(y, dim=-1, descending=True).values
    hit = (y.unsqueeze(-2) == ranked.unsqueeze(-1)).to(s.dtype)
    target = hit / hit.sum(-1, keepdim=True)
    log_p = log_neuralsort_full(s, tau)
    return (-(target * log_p).sum((-1, -2)) / s.shape[-1]).mean()


def _arf_parts(s: Tensor, y: Tensor, m: int, k: int, tau: float, tau_label: float) -> tuple[Tensor, Tensor]:
    log_p_s = log_neuralsort_full(s, tau)
    p_v = neuralsort_full(y, tau_label)
    m, k = min(m, s.shape[-1]), min(k, s.shape[-1])
    log_top_m = torch.logsumexp(log_p_s[:, :m], dim=1) - math.log(m)  # log(colsum(P_s[:m]) / m)
    relax = -(p_v[:, :k].sum(1) * log_top_m).sum(-1)
    glob = -(p_v * log_p_s).sum((-1, -2))
    return relax, glob


def arf(s: Tensor, y: Tensor, *, m: int = 30, k: int = 15, tau: float = 1.0, tau_label: float = 1e-3) -> Tensor:
    """ARF eq. 13 at alpha = 1: ``L_relax + L_global / 2``."""
    relax, glob = _arf_parts(s, y, m, k, tau, tau_label)
    return relax.mean() + glob.mean() / 2.0


def arf_relax(s: Tensor, y: Tensor, *, m: int = 30, k: int = 15, tau: float = 1.0, tau_label: float = 1e-3) -> Tensor:
    """ARF eq. 11."""
    return _arf_parts(s, y, m, k, tau, tau_label)[0].mean()


def sinkprop(s: Tensor, y: Tensor, *, sigma: float = 1.0, n_iter: int = 5, eps: float = 1e-3) -> Tensor:
    """SinkProp with the sorted scores formed by an explicit permutation-matrix product and a
    dense autograd Sinkhorn."""
    n = s.shape[-1]
    order = torch.argsort(s.detach(), dim=-1, descending=True)
    perm = F.one_hot(order, n).to(s.dtype)  # [b, j, i] = 1(pi(j) = i)
    s_sorted = (perm @ s.unsqueeze(-1)).squeeze(-1)
    mat = torch.exp(-((s.unsqueeze(-1) - s_sorted.unsqueeze(-2)) ** 2) / sigma) + eps
    d = sinkhorn_dense(mat, n_iter)
    dcg = (gain(y).unsqueeze(-1) * d * discounts(n, like=s)).sum((-1, -2))
    return (-dcg / _ideal_dcg(y, None)).mean()


# --------------------------------------------------------------------------- index lists


def pair_index_lists(y: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Per list, the labelled pairs ``(i, j)`` with ``y_i > y_j`` from a Python double loop."""
    out = []
    for row in y.tolist():
        first, second = [], []
        for i, yi in enumerate(row):
            for j, yj in enumerate(row):
                if yi > yj:
                    first.append(i)
                    second.append(j)
        out.append((torch.tensor(first, device=y.device), torch.tensor(second, device=y.device)))
    return out


def _ranks(s: Tensor) -> Tensor:
    order = torch.argsort(s.detach(), descending=True, stable=True)
    return torch.empty_like(order).scatter_(0, order, torch.arange(1, s.shape[0] + 1, device=s.device)).to(s.dtype)


def ranknet(s: Tensor, y: Tensor, *, sigma: float = 1.0) -> Tensor:
    per_list = [F.softplus(-sigma * (s[b, i] - s[b, j])).mean() for b, (i, j) in enumerate(pair_index_lists(y))]
    return torch.stack(per_list).mean()


def lambdaloss(s: Tensor, y: Tensor, *, sigma: float = 1.0) -> Tensor:
    """ndcg_loss2 weights evaluated per listed pair."""
    per_list = []
    ideal = _ideal_dcg(y, None)
    for b, (i, j) in enumerate(pair_index_lists(y)):
        r = _ranks(s[b])
        g = gain(y[b]) / ideal[b]
        dist = (r[i] - r[j]).abs().double()  # float64: the difference cancels in float32
        delta = (1.0 / torch.log2(1.0 + dist) - 1.0 / torch.log2(2.0 + dist)).abs().to(s.dtype)
        w = delta * (g[i] - g[j]).abs()
        per_list.append((w * F.softplus(-sigma * (s[b, i] - s[b, j]))).sum() / math.log(2.0))
    return torch.stack(per_list).mean()


def lambda_opa(s: Tensor, y: Tensor, *, sigma: float = 1.0) -> Tensor:
    n = s.shape[-1]
    per_list = [F.softplus(-sigma * (s[b, i] - s[b, j])).sum() for b, (i, j) in enumerate(pair_index_lists(y))]
    return (torch.stack(per_list) / math.log(2.0) / (n * (n - 1) / 2)).mean()


def lambda_recall(s: Tensor, y: Tensor, *, k: int = 15, m: int = 30, sigma: float = 1.0) -> Tensor:
    n = s.shape[-1]
    per_list = []
    for b, (i, j) in enumerate(pair_index_lists(y)):
        row = y[b].tolist()
        above = [sum(1 for v in row if v > u) for u in row]
        tied = [sum(1 for v in row if v == u) for u in row]
        g = torch.tensor([min(max((k - a) / t_, 0.0), 1.0) for a, t_ in zip(above, tied)], dtype=s.dtype)
        top_m = (_ranks(s[b]) <= m).to(s.dtype)
        w = (g[i] - g[j]).abs() * (top_m[i] - top_m[j]).abs()
        per_list.append((w * F.softplus(-sigma * (s[b, i] - s[b, j]))).sum() / math.log(2.0) / (n * (n - 1) / 2))
    return torch.stack(per_list).mean()


def approxndcg(s: Tensor, y: Tensor, *, alpha: float = 10.0) -> Tensor:
    """Smooth ranks accumulated over the listed ordered pairs ``j != i``."""
    n = s.shape[-1]
    first = [i for i in range(n) for j in range(n) if i != j]
    second = [j for i in range(n) for j in range(n) if i != j]
    i, j = torch.tensor(first, device=s.device), torch.tensor(second, device=s.device)
    ideal = _ideal_dcg(y, None)
    per_list = []
    for b in range(s.shape[0]):
        ranks = torch.ones(n, dtype=s.dtype, device=s.device).index_add(0, i, torch.sigmoid(alpha * (s[b, j] - s[b, i])))
        per_list.append(-(gain(y[b]) / torch.log2(1.0 + ranks)).sum() / ideal[b])
    return torch.stack(per_list).mean()


# loss name -> (reference function, subset rule "dense" or "index", what it builds)
_NS = "full NeuralSort matrix"
REFERENCES = {
    "pirank_ndcg": (pirank_ndcg, "dense", f"{_NS} (all n rows), depth 1"),
    "pirank_arp": (pirank_arp, "dense", f"{_NS} (all n rows), depth 1"),
    "neuralndcg": (neuralndcg, "dense", f"{_NS} + dense autograd Sinkhorn, 30 it."),
    "neuralndcg_transposed": (neuralndcg_transposed, "dense", f"{_NS}^T + dense autograd Sinkhorn, 30 it."),
    "sinkprop": (sinkprop, "dense", "dense M via permutation-matrix product + dense autograd Sinkhorn, 5 it."),
    "arf": (arf, "dense", f"{_NS} of scores and of labels"),
    "arf_relax": (arf_relax, "dense", f"{_NS} of scores and of labels"),
    "neuralsort_ce": (neuralsort_ce, "dense", f"{_NS} + dense target"),
    "approxndcg": (approxndcg, "index", "Python index lists of (i, j != i)"),
    "lambdaloss": (lambdaloss, "index", "Python index lists of labelled pairs"),
    "lambda_recall": (lambda_recall, "index", "Python index lists of labelled pairs"),
    "lambda_opa": (lambda_opa, "index", "Python index lists of labelled pairs"),
    "ranknet": (ranknet, "index", "Python index lists of labelled pairs"),
}
