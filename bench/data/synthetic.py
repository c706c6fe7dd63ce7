"""Synthetic LTR data (PiRank, Swezey et al. 2021, Appendix E), seeded and vectorised.

For each query ``i`` with ``L_i`` documents:

1. draw document features ``x_{i,j} in R^{m_d}`` from ``phi`` (``normal`` or ``uniform``);
2. pick ``m_q <= m_d`` columns ``c`` without replacement;
3. draw query features ``gamma_i in R^{m_q}`` from ``psi`` (shifted by ``psi_loc``);
4. label ``y_{i,j} = clip(sum_k gamma_{i,k} x_{i,j,c_k}, low, high)``, rounded to the nearest
   integer grade (``np.rint``) unless ``real_labels=True``;
5. append ``gamma_i`` to every document's features, so ``n_features = m_d + m_q``.

Choices the paper leaves open (documented defaults):

* ``columns="shared"`` draws ``c`` once per *task* (``task_seed``) for all queries and splits,
  so labels are a learnable function of the visible features (a model sees ``x`` and
  ``gamma`` but never ``c``); ``columns="per_query"`` is the literal per-query draw of the
  paper, whose labels a scorer can barely learn.
* ``list_length`` is an int (fixed), ``(lo, hi)`` (uniform integers) or a dict
  ``{"dist": "lognormal", "mean": 120, "sigma": 0.65, "min": 1, "max": 1251}``.
* ``empty_fraction`` of queries get all-zero labels (MSLR has ~3% such queries).
* ``psi_loc`` shifts the query features (default 0, the paper's zero-mean ``psi``). With 0
  the sign of each label weight ``gamma_{i,k}`` changes from query to query, so labels depend
  on the product ``gamma * x``: an MLP or a tree learns it, a *linear* scorer cannot. A shift
  such as 2 makes most weights positive, so labels are monotone in the label columns and a
  linear scorer (SinkProp's LETOR setup) can learn them.
* ``label_probs`` (preset ``mslr-like``) replaces round-and-clip by grade thresholds on the
  standardised score ``s / ||gamma||`` (which is N(0, 1) under ``phi = normal``) placed at the
  normal quantiles of the target grade distribution, corrected for the empty queries.

Preset ``mslr-like`` reproduces MSLR-WEB30K Fold1's shape: 136 features (128 document +
8 query), train 18,919 queries / 2,270,296 docs, vali 6,306 / 747,218, test 6,306 / 753,611
(list lengths lognormal with mean ~120, clipped to [1, 1251], then adjusted to the exact
totals), 3.2% empty queries, grades ~51/32/13.5/2.5/1 %. Explicit arguments override the
preset; ``split`` picks the size of the split to imitate.

>>> X, y, qid = generate_synthetic(3, 4, 6, seed=0)
>>> X.shape, X.dtype, y.dtype, qid.tolist()
((12, 6), dtype('float32'), dtype('float32'), [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
>>> bool(np.all(y == np.rint(y))) and float(y.min()) >= 0.0 and float(y.max()) <= 4.0
True
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from bench.data.registry import REGISTRY
from bench.errors import ConfigError

__all__ = ["PRESETS", "generate_synthetic", "query_lengths", "split_lengths"]

PRESETS: dict[str, dict] = {
    "mslr-like": {
        "n_features": 136,
        "n_query_features": 8,
        "list_length": {"dist": "lognormal", "mean": 120.0, "sigma": 0.65, "min": 1, "max": 1251},
        "split_sizes": REGISTRY["mslr-web30k"].split_sizes["Fold1"],
        "empty_fraction": 602 / 18_919,
        "label_probs": (0.51, 0.32, 0.135, 0.025, 0.01),
    },
}


def query_lengths(n_queries: int, list_length, rng: np.random.Generator,
                  total_docs: int | None = None) -> np.ndarray:
    """Per-query list lengths (int64); with ``total_docs`` the lengths are nudged (+-1 on
    randomly chosen queries, bounds respected) so they sum to it exactly."""
    if isinstance(list_length, (int, np.integer)):
        lengths = np.full(n_queries, int(list_length), dtype=np.int64)
        lo, hi = int(list_length), int(list_length)
    elif isinstance(list_length, (tuple, list)) and len(list_length) == 2:
        lo, hi = int(list_length[0]), int(list_length[1])
        lengths = rng.integers(lo, hi + 1, size=n_queries, dtype=np.int64)
    elif isinstance(list_length, dict) and list_length.get("dist") == "lognormal":
        mean, sigma = float(list_length["mean"]), float(list_length.get("sigma", 0.65))
        lo, hi = int(list_length.get("min", 1)), int(list_length.get("max", 10 * mean))
        mu = np.log(mean) - sigma**2 / 2  # so that E[L] = mean before clipping
        lengths = np.clip(np.rint(rng.lognormal(mu, sigma, n_queries)), lo, hi).astype(np.int64)
    elif isinstance(list_length, dict) and list_length.get("dist") == "uniform":
        lo, hi = int(list_length["min"]), int(list_length["max"])
        lengths = rng.integers(lo, hi + 1, size=n_queries, dtype=np.int64)
    else:
        raise ConfigError(f"list_length must be an int, (lo, hi) or a dict with dist lognormal|"
                         f"uniform, got {list_length!r}")
    if lo < 1:
        raise ConfigError(f"list lengths must be >= 1, got minimum {lo}")
    if total_docs is not None:
        if not lo * n_queries <= total_docs <= hi * n_queries:
            raise ConfigError(f"total_docs={total_docs} impossible for {n_queries} queries with "
                             f"lengths in [{lo}, {hi}]")
        lengths = np.clip(np.rint(lengths * (total_docs / lengths.sum())), lo, hi).astype(np.int64)
        while (diff := int(total_docs - lengths.sum())) != 0:
            room = np.flatnonzero(lengths < hi) if diff > 0 else np.flatnonzero(lengths > lo)
            pick = rng.choice(room, size=min(abs(diff), room.size), replace=False)
            lengths[pick] += 1 if diff > 0 else -1
    return lengths


def _draw(rng: np.random.Generator, dist: str, shape) -> np.ndarray:
    if dist == "normal":
        return rng.standard_normal(shape, dtype=np.float32)
    if dist == "uniform":
        return rng.random(shape, dtype=np.float32) * 2.0 - 1.0
    raise ConfigError(f"distribution must be 'normal' or 'uniform', got {dist!r}")


def _sizes(n_queries, list_length, preset, total_docs, split):
    """``(preset parameters, n_queries, list_length, total_docs)`` as the generator resolves them."""
    if preset is not None and preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
    p = dict(PRESETS[preset]) if preset is not None else {}
    if preset is not None:
        q_default, d_default = p["split_sizes"][split]
        n_queries = q_default if n_queries is None else n_queries
        total_docs = (d_default if n_queries == q_default else None) if total_docs is None else total_docs
    list_length = p.get("list_length") if list_length is None else list_length
    if n_queries is None or list_length is None:
        raise ConfigError("n_queries, list_length and n_features are required without a preset")
    return p, n_queries, list_length, total_docs


def split_lengths(n_queries: int | None = None, list_length=None, seed: int = 0, preset: str | None = None, *,
                  total_docs: int | None = None, split: str = "train", **_ignored) -> np.ndarray:
    """The per-query list lengths :func:`generate_synthetic` draws with the same arguments, without
    drawing anything else (they are its generator's first draw): the shape of a synthetic split
    before it is generated. Keyword arguments that only shape features or labels are ignored.

    >>> X, y, qid = generate_synthetic(5, (2, 9), 6, seed=3)
    >>> split_lengths(5, (2, 9), seed=3).tolist() == np.bincount(qid)[1:].tolist()
    True
    """
    _, n_queries, list_length, total_docs = _sizes(n_queries, list_length, preset, total_docs, split)
    return query_lengths(int(n_queries), list_length, np.random.default_rng(seed), total_docs)


def generate_synthetic(n_queries: int | None = None, list_length=None, n_features: int | None = None,
                       seed: int = 0, preset: str | None = None, *,
                       n_query_features: int | None = None, task_seed: int | None = None,
                       phi: str = "normal", psi: str = "normal", psi_loc: float = 0.0, low: float = 0.0,
                       high: float = 4.0, real_labels: bool = False, columns: str = "shared",
                       empty_fraction: float | None = None, label_probs=None,
                       total_docs: int | None = None, split: str = "train"
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate ``(X float32 [N, n_features], y float32 [N], qid int64 [N])``, qids 1..Q.

    ``seed`` drives the documents of this draw; ``task_seed`` (default ``seed``) drives what
    must be shared by train/vali/test of one dataset: the label columns ``c`` when
    ``columns="shared"``. See the module docstring for the generator and the preset.
    """
    p, n_queries, list_length, total_docs = _sizes(n_queries, list_length, preset, total_docs, split)
    n_features = p.get("n_features") if n_features is None else n_features
    n_query_features = p.get("n_query_features") if n_query_features is None else n_query_features
    empty_fraction = p.get("empty_fraction", 0.0) if empty_fraction is None else empty_fraction
    label_probs = p.get("label_probs") if label_probs is None else label_probs
    if n_features is None:
        raise ConfigError("n_queries, list_length and n_features are required without a preset")
    if n_query_features is None:
        n_query_features = max(1, min(5, n_features // 2))
    m_q = int(n_query_features)
    m_d = int(n_features) - m_q
    if m_q < 1 or m_d < m_q:
        raise ConfigError(f"need 1 <= n_query_features <= n_features - n_query_features, got "
                         f"n_query_features={m_q}, n_features={n_features}")
    if columns not in ("shared", "per_query"):
        raise ConfigError(f"columns must be 'shared' or 'per_query', got {columns!r}")
    rng = np.random.default_rng(seed)
    task_rng = np.random.default_rng(seed if task_seed is None else task_seed)

    lengths = query_lengths(int(n_queries), list_length, rng, total_docs)
    n_docs = int(lengths.sum())
    qidx = np.repeat(np.arange(n_queries), lengths)
    X = np.empty((n_docs, m_d + m_q), dtype=np.float32)
    X[:, :m_d] = _draw(rng, phi, (n_docs, m_d))
    gamma = _draw(rng, psi, (int(n_queries), m_q))
    if psi_loc:
        gamma += np.float32(psi_loc)
    X[:, m_d:] = gamma[qidx]
    if columns == "shared":
        c = task_rng.permutation(m_d)[:m_q]
        score = np.einsum("nk,nk->n", X[:, c], X[:, m_d:], dtype=np.float64)
    else:
        c = np.argsort(rng.random((int(n_queries), m_d)), axis=1)[:, :m_q]
        picked = np.take_along_axis(X[:, :m_d], c[qidx], axis=1)
        score = np.einsum("nk,nk->n", picked, X[:, m_d:], dtype=np.float64)
    if label_probs is not None:
        probs = np.asarray(label_probs, dtype=np.float64)
        probs = probs / probs.sum()
        e = float(empty_fraction)
        adj = probs / (1.0 - e)
        adj[0] = (probs[0] - e) / (1.0 - e)  # empty queries supply part of the zeros
        z = score / np.maximum(np.linalg.norm(gamma, axis=1)[qidx], 1e-12)
        y = np.searchsorted(ndtri(np.cumsum(adj)[:-1]), z).astype(np.float32)
    else:
        y = np.clip(score, low, high)
        y = (y if real_labels else np.rint(y)).astype(np.float32)
    if empty_fraction > 0:
        empty = rng.choice(int(n_queries), size=int(round(empty_fraction * n_queries)), replace=False)
        mask = np.zeros(int(n_queries), dtype=bool)
        mask[empty] = True
        y[mask[qidx]] = 0.0
    qid = (qidx + 1).astype(np.int64)
    return X, y, qid
