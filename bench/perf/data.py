r"""``ltr-bench perf parse`` and ``ltr-bench perf metrics``: the data-side suites.

``perf parse``: writes an MSLR-format file of about ``--mb`` MB (136 dense features with
MSLR-like magnitudes: small counts, ratios in [0, 1], BM25-like scores, negative LMIR-like
scores, click counts up to ~1e7, about 40 % zeros, list lengths ~120) to a temporary
directory, parses it with ``bench.data.read_svmlight`` (with the process's numba threads, then
with one) and with ``sklearn.datasets.load_svmlight_file`` (+ ``toarray``, the same dense
float32 result) side by side in one process, checks the arrays are identical and reports
seconds, CPU seconds (the process's, every thread counted: what the load does not move), MB/s,
the wall-clock ratio and the ratio per CPU second, and the ceiling of the wall-clock ratio on
idle cores (threads x the per-CPU-second ratio / the CPU seconds the threads add).
It then prepares the file (as train, vali and test) into the memory-mappable cache and
times the cache reload, a second ``prepare_fold`` with the same inputs (source checksums
from the suite's checksum cache, ``meta.json`` check, memory-mapping; what every later workflow step
pays), and the same reload followed by reading every feature byte; both are compared with
parsing the three split files. Targets: parsing >= 25x scikit-learn (issue 27), cache reload >= 50x
parsing.

``perf metrics``: every metric of :data:`METRICS` on an MSLR-WEB30K-sized test fold
(753,611 documents in 6,306 queries, list lengths lognormal with a tail to 1,251, labels
0..4 with MSLR-like frequencies, scores = label + noise) with ``bench.metrics.evaluate``
(best of ``--repeats``) vs :func:`per_query_loop`, a straightforward per-query NumPy loop
checked equal to 1e-9. Target: all metrics <= 1 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from bench.atomic import write_text
from bench.errors import UsageError
from bench.metrics import evaluate, parse_metric
from bench.perf.common import SuiteResult, Target, fmt, loadavg, md_table, now_utc, targets_section


@numba.njit(cache=True)
def _write_rows(labels, qids, micro, decimals, out):
    """Format rows as ``label qid:q 1:v ... 136:v\\n`` into ``out``; returns bytes used.

    ``micro`` holds each value times 1e6 as an integer so the text is an exact decimal with
    at most 6 fractional digits, trailing zeros stripped, as in the MSLR files.
    """
    p = 0
    digits = np.empty(24, dtype=np.uint8)
    for r in range(micro.shape[0]):
        out[p] = 48 + labels[r]
        p += 1
        for ch in b" qid:":
            out[p] = ch
            p += 1
        q = qids[r]
        n = 0
        while True:
            digits[n] = 48 + q % 10
            n += 1
            q //= 10
            if q == 0:
                break
        for k in range(n - 1, -1, -1):
            out[p] = digits[k]
            p += 1
        for j in range(micro.shape[1]):
            out[p] = 32
            p += 1
            idx = j + 1
            n = 0
            while True:
                digits[n] = 48 + idx % 10
                n += 1
                idx //= 10
                if idx == 0:
                    break
            for k in range(n - 1, -1, -1):
                out[p] = digits[k]
                p += 1
            out[p] = 58
            p += 1
            v = micro[r, j]
            if v < 0:
                out[p] = 45
                p += 1
                v = -v
            ip = v // 1000000
            fp = v % 1000000
            n = 0
            while True:
                digits[n] = 48 + ip % 10
                n += 1
                ip //= 10
                if ip == 0:
                    break
            for k in range(n - 1, -1, -1):
                out[p] = digits[k]
                p += 1
            if decimals[j] > 0 and fp > 0:
                out[p] = 46
                p += 1
                nd = 6
                while fp % 10 == 0:
                    fp //= 10
                    nd -= 1
                for k in range(nd - 1, -1, -1):
                    out[p + k] = 48 + fp % 10
                    fp //= 10
                p += nd
        out[p] = 10
        p += 1
    return p


def make_mslr_like_file(path: Path, target_mb: float, seed: int = 0) -> int:
    """Write an MSLR-format file of about ``target_mb`` MB; returns the number of rows."""
    rng = np.random.default_rng(seed)
    n_features = 136
    kind = rng.choice(4, size=n_features, p=[0.5, 0.2, 0.2, 0.1])  # int, ratio, score, negative
    decimals = np.where(kind == 0, 0, 6).astype(np.int64)
    scale = np.exp(rng.uniform(0, 12, size=n_features))  # magnitudes up to ~1.6e5 (x tails)
    bytes_per_row = 1100
    n_rows = int(target_mb * 1e6 / bytes_per_row)
    block = 20_000
    written = 0
    qid = 1
    with open(path, "wb") as fh:
        while written < n_rows:
            n = min(block, n_rows - written)
            lengths = np.clip(rng.lognormal(4.5, 0.8, size=n // 60 + 2).astype(np.int64), 1, 1250)
            qids = np.repeat(np.arange(qid, qid + lengths.size), lengths)[:n]
            qid = int(qids[-1]) + 1
            base = rng.lognormal(0.0, 1.5, size=(n, n_features)) * scale / 20
            vals = np.where(kind == 0, np.floor(base), base)
            vals = np.where(kind == 1, rng.random((n, n_features)), vals)
            vals = np.where(kind == 3, -base * 10, vals)
            vals[rng.random((n, n_features)) < 0.4] = 0.0
            micro = np.round(vals * 1e6).astype(np.int64)
            labels = rng.choice(5, size=n, p=[0.51, 0.32, 0.135, 0.025, 0.01]).astype(np.int64)
            buf = np.empty(n * (n_features * 24 + 32), dtype=np.uint8)
            used = _write_rows(labels, qids.astype(np.int64), micro, decimals, buf)
            fh.write(buf[:used].tobytes())
            written += n
    return n_rows


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



# --------------------------------------------------------------------------- perf parse


def measure_parse(mb: float, work: Path, log=print) -> dict:
    """Generate ``work/train.txt`` (~``mb`` MB) and time parsing and the prepared cache."""
    from sklearn.datasets import load_svmlight_file

    from bench.data import read_svmlight
    from bench.data.prepare import prepare_fold

    path = work / "train.txt"
    t0 = time.perf_counter()
    rows = make_mslr_like_file(path, mb)
    size = path.stat().st_size / 1e6
    log(f"generated {path.name}: {size:.1f} MB, {rows} rows in {time.perf_counter() - t0:.1f} s")
    read_svmlight(path, n_features=136)  # JIT compile (or cache load) before timing
    threads = numba.get_num_threads()
    (X, y, q), t_ours, c_ours = _timed(lambda: read_svmlight(path))
    numba.set_num_threads(1)
    try:
        _, t_one, c_one = _timed(lambda: read_svmlight(path))
    finally:
        numba.set_num_threads(threads)
    n_features = X.shape[1]
    (Xs, ys, qs), t_sk, c_sk = _timed(lambda: _sklearn_dense(load_svmlight_file, path, n_features))
    identical = bool(np.array_equal(X, Xs) and np.array_equal(y, ys.astype(np.float32)) and np.array_equal(q, qs))
    del Xs, ys, qs, X, y, q
    log(f"parse: ours {t_ours:.2f} s ({c_ours:.2f} CPU s), sklearn {t_sk:.2f} s ({c_sk:.2f} CPU s), "
        f"identical {identical}")
    files = {"train": path, "vali": path, "test": path}
    out = work / "prepared"

    def prepare():
        return prepare_fold("bench-file", "Fold1", out, options={}, files=files, log=lambda m: None,
                            checksum_cache=work / "checksum-cache")

    t0 = time.perf_counter()
    prepare()
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fold = prepare()
    t_reload = time.perf_counter() - t0
    del fold
    t0 = time.perf_counter()
    fold = prepare()
    checksum = sum(float(np.asarray(s.features).sum(dtype=np.float64)) for s in fold.splits.values())
    t_full = time.perf_counter() - t0
    return {"mb": size, "rows": rows, "ours_s": t_ours, "sklearn_s": t_sk, "identical": identical,
            "ours_cpu_s": c_ours, "one_thread_s": t_one, "one_thread_cpu_s": c_one, "sklearn_cpu_s": c_sk,
            "prepare_s": t_first, "reload_s": t_reload, "reload_read_s": t_full, "checksum": checksum,
            "threads": threads}


def _timed(fn):
    """``(fn(), wall seconds, CPU seconds of the process)``: CPU seconds are what the parser
    costs whatever else the machine runs (every thread of this process counts)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _sklearn_dense(load_svmlight_file, path: Path, n_features: int):
    """scikit-learn's reader + ``toarray``: the same dense float32 result as ``read_svmlight``."""
    Xs, ys, qs = load_svmlight_file(str(path), dtype=np.float32, query_id=True, zero_based=False,
                                    n_features=n_features)
    return Xs.toarray(), ys, qs


def report_parse(args: argparse.Namespace) -> SuiteResult:
    if args.mb <= 0:
        raise UsageError("--mb must be positive")
    load = loadavg()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        r = measure_parse(args.mb, args.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            r = measure_parse(args.mb, Path(tmp))
    parse3 = 3 * r["ours_s"]  # the prepared fold holds three splits, each parsed once
    ratio = r["sklearn_s"] / r["ours_s"]
    per_core = r["sklearn_cpu_s"] / r["one_thread_cpu_s"]  # per CPU second, one thread each
    overhead = r["ours_cpu_s"] / r["one_thread_cpu_s"]  # CPU seconds the threads add
    ceiling = r["threads"] * per_core / overhead  # the wall ratio with every thread on its own idle core
    rows = [
        ["scikit-learn load_svmlight_file + toarray", f"{r['sklearn_s']:.2f}", f"{r['sklearn_cpu_s']:.2f}",
         f"{r['mb'] / r['sklearn_s']:.1f}", "1.0x", "1.0x"],
        ["bench read_svmlight (1 numba thread)", f"{r['one_thread_s']:.2f}", f"{r['one_thread_cpu_s']:.2f}",
         f"{r['mb'] / r['one_thread_s']:.1f}", f"{r['sklearn_s'] / r['one_thread_s']:.1f}x", f"{per_core:.1f}x"],
        [f"bench read_svmlight ({r['threads']} numba threads)", f"{r['ours_s']:.2f}", f"{r['ours_cpu_s']:.2f}",
         f"{r['mb'] / r['ours_s']:.1f}", f"{ratio:.1f}x", f"{r['sklearn_cpu_s'] / r['ours_cpu_s']:.1f}x"],
    ]
    cache = [
        ["prepare (parse 3 splits, statistics, write)", fmt(r["prepare_s"]), ""],
        ["cache reload: prepare_fold again (checksums from the cache, meta check, memory-map)",
         fmt(r["reload_s"]), f"{parse3 / r['reload_s']:.0f}x"],
        ["cache reload + reading every feature byte", fmt(r["reload_read_s"]), f"{parse3 / r['reload_read_s']:.1f}x"],
    ]
    targets = [
        Target("SVMlight parsing vs scikit-learn", f"{ratio:.1f}x ({r['mb'] / r['ours_s']:.0f} vs "
               f"{r['mb'] / r['sklearn_s']:.1f} MB/s)", ">= 25x", ratio >= 25),
        Target("prepared-cache reload vs parsing the 3 splits", f"{parse3 / r['reload_s']:.0f}x", ">= 50x",
               parse3 / r["reload_s"] >= 50),
    ]
    text = "\n".join([
        "# Parsing and the prepared cache",
        "",
        f"- generated {now_utc()} by `ltr-bench perf parse`; load average at start {load}, at end {loadavg()}",
        f"- file: generated MSLR-format text, {r['mb']:.1f} MB, {r['rows']} rows, 136 features; arrays "
        f"identical between the two parsers: {r['identical']}",
        "",
        md_table(["parser", "seconds", "CPU seconds", "MB/s", "speed vs scikit-learn",
                  "per CPU second vs scikit-learn"], rows),
        "",
        f"Per CPU second (what neither the load nor the thread count moves) the parser is {per_core:.1f}x "
        f"scikit-learn; its {r['threads']} threads add {100 * (overhead - 1):.0f}% CPU seconds, so with each "
        f"thread on an idle core of its own the wall-clock ratio would be at most {ceiling:.1f}x; on a loaded "
        "machine the threads get less than a core each and the ratio falls towards the per-CPU-second one.",
        "",
        "Prepared cache (train = vali = test = the file above); ratios against parsing the three split files "
        f"with bench read_svmlight ({parse3:.2f} s):",
        "",
        md_table(["step", "time (s)", "vs parsing"], cache),
    ] + targets_section(targets)) + "\n"
    write_text(args.out, text)
    print(text)
    print(f"wrote {args.out}")
    return SuiteResult("parse", text, targets, 0 if r["identical"] else 1, [Path(args.out)])


def add_parse_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mb", type=float, default=200.0, help="size of the generated file (MB)")
    p.add_argument("--keep", type=Path, default=None, help="work in this directory and keep the files")
    p.add_argument("--out", type=Path, default=Path("reports/perf/parse.md"))


# --------------------------------------------------------------------------- perf metrics


def measure_metrics(n_queries: int, n_docs: int, repeats: int, metrics=METRICS) -> dict:
    """Best-of-``repeats`` vectorised ``evaluate`` vs one per-query loop, checked equal."""
    scores, labels, offsets = mslr_like_fold(n_queries, n_docs)
    evaluate(scores, labels, offsets, metrics)  # warm-up (imports, page faults)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        frame = evaluate(scores, labels, offsets, metrics)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    reference = per_query_loop(scores, labels, offsets, metrics)
    loop_s = time.perf_counter() - t0
    worst = max(float(np.abs(frame[m].to_numpy() - reference[m]).max()) for m in metrics)
    t0 = time.perf_counter()
    evaluate(scores, labels, offsets, metrics, ties="expected")
    expected_s = time.perf_counter() - t0
    lengths = np.diff(offsets)
    return {"docs": len(scores), "queries": len(lengths), "mean_len": float(lengths.mean()),
            "max_len": int(lengths.max()), "best_s": min(times), "times": times, "loop_s": loop_s,
            "worst_diff": worst, "expected_s": expected_s}


def report_metrics(args: argparse.Namespace) -> SuiteResult:
    if min(args.queries, args.repeats) < 1 or args.docs < args.queries:
        raise UsageError("--queries and --repeats must be >= 1 and --docs >= --queries")
    load = loadavg()
    r = measure_metrics(args.queries, args.docs, args.repeats)
    agree = r["worst_diff"] <= 1e-9
    rows = [["bench.metrics.evaluate (ties='stable')", f"{r['best_s']:.3f}", f"{r['loop_s'] / r['best_s']:.1f}x"],
            ["bench.metrics.evaluate (ties='expected')", f"{r['expected_s']:.3f}", f"{r['loop_s'] / r['expected_s']:.1f}x"],
            ["per-query NumPy loop", f"{r['loop_s']:.3f}", "1.0x"]]
    targets = [Target(f"all {len(METRICS)} metrics on a fold of {r['docs']:,} documents", f"{r['best_s']:.3f} s "
                      f"({r['loop_s'] / r['best_s']:.0f}x the per-query loop)", "<= 1 s", r["best_s"] <= 1.0)]
    text = "\n".join([
        "# Metrics on an MSLR-WEB30K-sized fold",
        "",
        f"- generated {now_utc()} by `ltr-bench perf metrics`; load average at start {load}, at end {loadavg()}",
        f"- fold: {r['docs']:,} documents, {r['queries']:,} queries, mean list length {r['mean_len']:.1f}, "
        f"max {r['max_len']}; metrics {', '.join(METRICS)}",
        f"- evaluate: best of {args.repeats} after one warm-up (all: {', '.join(f'{t:.3f}' for t in r['times'])}); "
        f"loop timed once; max |evaluate - loop| = {r['worst_diff']:.1e} ({'agree' if agree else 'DISAGREE'} to 1e-9)",
        "",
        md_table(["implementation", "seconds", "speed vs loop"], rows),
    ] + targets_section(targets)) + "\n"
    write_text(args.out, text)
    print(text)
    print(f"wrote {args.out}")
    return SuiteResult("metrics", text, targets, 0 if agree else 1, [Path(args.out)])


def add_metrics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queries", type=int, default=6306)
    p.add_argument("--docs", type=int, default=753_611)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("reports/perf/metrics.md"))


__all__ = ["METRICS", "add_metrics_arguments", "add_parse_arguments", "make_mslr_like_file", "measure_metrics",
           "measure_parse", "mslr_like_fold", "per_query_loop", "report_metrics", "report_parse"]
