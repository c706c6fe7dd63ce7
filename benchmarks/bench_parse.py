"""Parse throughput: ``bench.data.read_svmlight`` vs ``sklearn.datasets.load_svmlight_file``.

Writes a ~200 MB MSLR-format file (136 dense features, MSLR-like magnitudes: small counts,
ratios in [0, 1], BM25-like scores, negative LMIR-like scores, click counts up to ~1e7, about
40% zeros, list lengths ~120) to a temporary directory, parses it with both readers side by
side in one process, checks the arrays are identical, and prints MB/s of each and the ratio.
It then prepares the file into the memory-mappable cache and times the cache reload (a
second ``prepare`` call with the same inputs, then touching every array) against parsing.

Run: ``python benchmarks/bench_parse.py [--mb 200] [--keep DIR]``. Not a test: numbers vary
with the machine; nothing here asserts a wall time.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numba
import numpy as np


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the generated file (MB)")
    ap.add_argument("--keep", type=Path, default=None, help="work in this directory, keep files")
    args = ap.parse_args()

    from sklearn.datasets import load_svmlight_file

    from bench.data import read_svmlight
    from bench.data.prepare import prepare_fold

    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        path = work / "train.txt"
        t0 = time.perf_counter()
        rows = make_mslr_like_file(path, args.mb)
        mb = path.stat().st_size / 1e6
        print(f"generated {path.name}: {mb:.1f} MB, {rows} rows in {time.perf_counter() - t0:.1f}s")

        read_svmlight(path, n_features=136)  # JIT compile (or cache load) before timing
        t0 = time.perf_counter()
        X, y, q = read_svmlight(path)
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        Xs, ys, qs = load_svmlight_file(str(path), dtype=np.float32, query_id=True,
                                        zero_based=False, n_features=X.shape[1])
        Xs = Xs.toarray()
        t_sk = time.perf_counter() - t0
        identical = (np.array_equal(X, Xs) and np.array_equal(y, ys.astype(np.float32))
                     and np.array_equal(q, qs))
        print(f"sklearn load_svmlight_file: {t_sk:7.2f}s  {mb / t_sk:8.1f} MB/s")
        print(f"bench read_svmlight:        {t_ours:7.2f}s  {mb / t_ours:8.1f} MB/s "
              f"({numba.get_num_threads()} threads)")
        print(f"speed-up ours/sklearn: {t_sk / t_ours:.1f}x; arrays identical: {identical}")
        del Xs, ys, qs

        # prepared cache: first prepare parses, the second only validates and maps
        files = {"train": path, "vali": path, "test": path}
        out = work / "prepared"
        t0 = time.perf_counter()
        prepare_fold("bench-file", "Fold1", out, options={}, files=files, log=lambda m: None)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        fold = prepare_fold("bench-file", "Fold1", out, options={}, files=files,
                            log=lambda m: None)
        touched = sum(float(s.features[:: max(1, s.features.shape[0] // 1000)].sum())
                      for s in fold.splits.values())
        t_reuse = time.perf_counter() - t0
        t_parse3 = 3 * t_ours
        print(f"prepare (parse 3 splits + stats + write): {t_first:.2f}s; cache reuse: "
              f"{t_reuse * 1e3:.1f} ms; reuse vs parsing the 3 splits: {t_parse3 / t_reuse:.0f}x "
              f"(checksum {touched:.3g})")
        t0 = time.perf_counter()
        fold = prepare_fold("bench-file", "Fold1", out, options={}, files=files,
                            log=lambda m: None)
        full = sum(float(np.asarray(s.features).sum()) for s in fold.splits.values())
        t_full = time.perf_counter() - t0
        print(f"cache reuse + reading every feature byte: {t_full:.2f}s; vs parsing: "
              f"{t_parse3 / t_full:.1f}x (sum {full:.3g})")
        print(json.dumps({"mb": round(mb, 1), "ours_mb_s": round(mb / t_ours, 1),
                          "sklearn_mb_s": round(mb / t_sk, 1), "ratio": round(t_sk / t_ours, 1),
                          "cache_reuse_ratio": round(t_parse3 / t_reuse),
                          "identical": bool(identical)}))


if __name__ == "__main__":
    main()
