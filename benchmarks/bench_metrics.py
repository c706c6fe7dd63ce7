"""Benchmark: every metric on an MSLR-WEB30K-sized test fold, vectorised vs a per-query loop.

Fold: 753,611 documents in 6,306 queries (list lengths: mean ~120, long tail to ~1,250),
labels 0..4 with MSLR-like frequencies, float32 scores = label + noise. Prints wall times of
``bench.metrics.evaluate`` (best of ``--repeat``) and of a straightforward per-query
NumPy loop that computes the same numbers (checked equal to 1e-9), and their ratio.
Targets (printed, not asserted): vectorised <= 1 s on 2 cores, >= 20x the loop.

    python benchmarks/bench_metrics.py [--queries 6306] [--docs 753611] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.metrics import evaluate, parse_metric

METRICS = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "ndcg@15", "ndcg@max", "mrr", "opa",
           "opa_arf", "arp", "recall@30@15", "map", "precision@10"]


def mslr_like_fold(n_queries: int, n_docs: int, seed: int = 0):
    """(scores, labels, offsets) with MSLR-WEB30K-like list lengths and label mix."""
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(mean=0.0, sigma=0.82, size=n_queries)
    lengths = np.clip(np.round(raw / raw.mean() * n_docs / n_queries), 1, 1251).astype(np.int64)
    # fix the total exactly: spread the remainder over random queries below the cap
    while (diff := n_docs - int(lengths.sum())) != 0:
        room = np.flatnonzero(lengths < 1251) if diff > 0 else np.flatnonzero(lengths > 1)
        pick = rng.choice(room, size=min(abs(diff), len(room)), replace=False)
        lengths[pick] += np.sign(diff)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    labels = rng.choice(5, size=n_docs, p=[0.51, 0.32, 0.135, 0.025, 0.01]).astype(np.float64)
    scores = (labels + rng.normal(scale=1.5, size=n_docs)).astype(np.float32).astype(np.float64)
    return scores, labels, offsets


def per_query_loop(scores, labels, offsets, metrics):
    """The straightforward implementation: one NumPy computation per query."""
    out = {m: np.zeros(len(offsets) - 1) for m in metrics}
    for q in range(len(offsets) - 1):
        s, y = scores[offsets[q]: offsets[q + 1]], labels[offsets[q]: offsets[q + 1]]
        n = len(y)
        ranked = y[np.argsort(-s, kind="stable")]
        ideal = np.sort(y)[::-1]
        disc = 1.0 / np.log2(np.arange(2, n + 2))
        rel = ranked >= 1
        for m in metrics:
            spec = parse_metric(m)
            if spec.kind == "ndcg":
                k = n if spec.k is None else min(spec.k, n)
                idcg = ((2 ** ideal[:k] - 1) * disc[:k]).sum()
                out[m][q] = ((2 ** ranked[:k] - 1) * disc[:k]).sum() / idcg if idcg > 0 else 1.0
            elif spec.kind == "mrr":
                hit = np.flatnonzero(rel)
                out[m][q] = 1.0 / (hit[0] + 1) if hit.size else 0.0
            elif spec.kind in ("opa", "opa_arf"):
                upper = np.triu(np.ones((n, n), dtype=bool), 1)  # (i above j)
                diff = ranked[:, None] - ranked[None, :]
                if spec.kind == "opa":
                    distinct = (upper & (diff != 0)).sum()
                    out[m][q] = (upper & (diff > 0)).sum() / distinct if distinct else 0.0
                else:
                    out[m][q] = (upper & (diff >= 0)).sum() / upper.sum() if n > 1 else 0.0
            elif spec.kind == "arp":
                out[m][q] = (ranked * np.arange(1, n + 1)).sum() / y.sum() if y.sum() > 0 else 0.0
            elif spec.kind == "recall":
                k = min(spec.k, n)
                kth = ideal[k - 1]
                above, tied = (y > kth).sum(), (y == kth).sum()
                w = np.where(ranked > kth, 1.0, np.where(ranked == kth, (k - above) / tied, 0.0))
                out[m][q] = w[: spec.m].sum() / k
            elif spec.kind == "map":
                prec = np.cumsum(rel) / np.arange(1, n + 1)
                out[m][q] = prec[rel].mean() if rel.any() else 1.0
            elif spec.kind == "precision":
                out[m][q] = rel[: spec.k].sum() / spec.k
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=6306)
    parser.add_argument("--docs", type=int, default=753_611)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    scores, labels, offsets = mslr_like_fold(args.queries, args.docs)
    lengths = np.diff(offsets)
    print(f"fold: {len(scores):,} documents, {len(lengths):,} queries, list length mean "
          f"{lengths.mean():.1f}, median {np.median(lengths):.0f}, max {lengths.max()}")
    evaluate(scores, labels, offsets, METRICS)  # warm-up (imports, page faults)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        frame = evaluate(scores, labels, offsets, METRICS)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    reference = per_query_loop(scores, labels, offsets, METRICS)
    loop_s = time.perf_counter() - start
    worst = max(float(np.abs(frame[m].to_numpy() - reference[m]).max()) for m in METRICS)
    if worst > 1e-9:
        raise SystemExit(f"vectorised and loop metrics differ by {worst:.3g}")
    best = min(times)
    print(f"metrics: {', '.join(METRICS)}")
    print(f"vectorised evaluate: {best:.3f} s (best of {args.repeat}; all: "
          f"{', '.join(f'{t:.3f}' for t in times)})")
    print(f"per-query loop:      {loop_s:.3f} s   (max |difference| {worst:.2e})")
    print(f"speed-up: {loop_s / best:.1f}x   target <= 1 s: {'met' if best <= 1 else 'MISSED'}; "
          f"target >= 20x: {'met' if loop_s / best >= 20 else 'MISSED'}")
    start = time.perf_counter()
    evaluate(scores, labels, offsets, METRICS, ties="expected")
    print(f"ties='expected' evaluate: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
