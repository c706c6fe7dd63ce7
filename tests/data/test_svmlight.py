"""read_svmlight: bit-identical to sklearn on every layout, and every malformed input named.

Oracle: ``sklearn.datasets.load_svmlight_file(dtype=float32, query_id=True)`` (exact
equality of X, y, qid; tolerance 0, NaN compared as NaN).
"""

from __future__ import annotations

import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from bench.data import SvmlightFormatError, read_svmlight


def _sklearn(path: Path, n_features: int):
    X, y, q = load_svmlight_file(str(path), dtype=np.float32, query_id=True, zero_based=False,
                                 n_features=n_features)
    return X.toarray(), y.astype(np.float32), q


def _assert_same(path: Path, **kw):
    X, y, q = read_svmlight(path, **kw)
    Xs, ys, qs = _sklearn(path, X.shape[1])
    assert X.dtype == np.float32 and y.dtype == np.float32 and q.dtype == np.int64
    np.testing.assert_array_equal(X, Xs)  # NaN == NaN here, exact otherwise
    np.testing.assert_array_equal(y, ys)
    np.testing.assert_array_equal(q, qs)
    return X, y, q


def _write(tmp_path: Path, text: str | bytes, name="f.txt") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode("latin-1"))
    return p


def test_dense_mslr_layout(tmp_path, rng):
    rows = []
    for q in range(1, 8):
        for _ in range(rng.integers(1, 9)):
            vals = rng.lognormal(0, 3, 136) * rng.choice([0, 1, -1], 136, p=[0.4, 0.5, 0.1])
            toks = " ".join(f"{j + 1}:{v:.6g}" if rng.random() < 0.5 else f"{j + 1}:{int(v)}"
                            for j, v in enumerate(vals))
            rows.append(f"{rng.integers(0, 5)} qid:{q * 17} {toks} ")
    p = _write(tmp_path, "\n".join(rows) + "\n")
    X, _, _ = _assert_same(p)
    assert X.shape == (len(rows), 136)


def test_sparse_yahoo_layout_with_crlf_and_comments(tmp_path, rng):
    rows = []
    for q in range(3):
        for _ in range(5):
            idx = np.sort(rng.choice(np.arange(1, 701), size=rng.integers(0, 60), replace=False))
            toks = " ".join(f"{i}:{rng.random():.8f}" for i in idx)
            rows.append(f"{rng.integers(0, 5)} qid:{q} {toks}\t# docid = GX{q}-{len(rows)} \xe9")
    rows.insert(3, "# a comment-only line")
    rows.insert(5, "   ")
    p = _write(tmp_path, "\r\n".join(rows) + "\r\n")
    X, y, q = _assert_same(p, n_features=700)
    assert X.shape == (15, 700)


def test_istella_dbl_max_becomes_inf_like_sklearn(tmp_path):
    text = ("1 qid:3 1:1.79769313486e+308 2:-1.79769313486e+308 3:3.4028235e38 4:3.4028236e38 "
            "5:1e-45 6:7e-46 7:0.1 # caf\xe9\n0 qid:3 1:12 7:1e39\n")
    X, _, _ = _assert_same(_write(tmp_path, text))
    assert np.isposinf(X[0, 0]) and np.isneginf(X[0, 1]) and np.isfinite(X[0, 2])


def test_number_spellings_and_rounding_edge_cases(tmp_path):
    """Random decimals incl. exact float32 midpoints (ties) and 20+ digit mantissas."""
    rnd = random.Random(7)
    toks = []
    for _ in range(400):
        r = rnd.random()
        if r < 0.3:
            f = np.float32(rnd.uniform(-1e4, 1e4))
            nxt = np.nextafter(f, np.float32(np.inf))
            mid = (Decimal(float(f)) + Decimal(float(nxt))) / 2
            v = str(mid + Decimal(rnd.choice([0, 1, -1])) * Decimal("1e-35"))
        elif r < 0.5:
            v = repr(rnd.uniform(-1, 1) * 10 ** rnd.randint(-60, 60))
        elif r < 0.6:
            v = f"{rnd.random():.{rnd.randint(17, 40)}f}"
        else:
            v = rnd.choice(["0", "-0.0", ".5", "5.", "1E5", "+3", "nan", "inf", "-Infinity",
                            "0000012.50000", "1e-400", "-2.5e+2", str(rnd.randint(0, 10**12))])
        toks.append(v)
    lines = []
    for k in range(50):  # 8 values per line at ascending, unique indices
        idx = sorted(rnd.sample(range(1, 60), 8))
        feats = " ".join(f"{i}:{v}" for i, v in zip(idx, toks[k * 8:(k + 1) * 8]))
        lines.append(f"{k % 3} qid:{k // 4} {feats}")
    _assert_same(_write(tmp_path, "\n".join(lines) + "\n"))


def test_digit_run_lengths_signs_and_comment_ends(tmp_path):
    """The 8-byte (SWAR) paths: every integer and fraction length from 0 to 10 digits.

    Indices of 1 to 3 digits and of 9 characters (an 8+ digit run goes to the byte-wise
    reading), values with
    leading/trailing zeros, signs, ``.5`` / ``5.``, exponents, a ``#`` right after a value,
    tabs and CRLF, and tokens in a line's last 24 bytes (the byte-wise path at a chunk's end),
    all equal to sklearn.
    """
    rnd = random.Random(11)

    def digits(n: int) -> str:
        return "".join(rnd.choice("0123456789") for _ in range(n))

    lines = []
    for k in range(300):
        idx = sorted(rnd.sample(range(1, 200), 6))
        toks = []
        for j, i in enumerate(idx):
            v = rnd.choice(["", "-"]) + digits(rnd.randint(0, 10))
            if rnd.random() < 0.6:
                v += "." + digits(rnd.randint(0, 10))
            if v.strip("-.") == "":
                v = rnd.choice(["0", "-0", ".5", "5.", "-0.0"])
            if rnd.random() < 0.1:
                v += rnd.choice(["e3", "E-2", "e+07"])
            # every 7th line: 9-character indices (leading zeros), longer than one 8-byte word
            toks.append(f"{i:09d}:{v}" if k % 7 == 0 and j % 2 else f"{i}:{v}")
        sep = rnd.choice([" ", "\t", "  "])
        end = rnd.choice(["", " ", "#c", " # docid = 7", "\r"])
        lines.append(f"{k % 5} qid:{k // 3}{sep}" + sep.join(toks) + end)
    p = _write(tmp_path, "\n".join(lines) + "\n")
    _assert_same(p)
    _assert_same(_write(tmp_path, "2 qid:1 3:-12.5#x\n", "short.txt"))


def test_null_maps_to_null_value(tmp_path):
    p = _write(tmp_path, "0 qid:1 1:NULL 2:3\n1 qid:1 1:2 2:NULL\n")
    X, _, _ = read_svmlight(p)
    assert X.tolist() == [[0.0, 3.0], [2.0, 0.0]]
    X, _, _ = read_svmlight(p, null_value=float("nan"))
    assert np.isnan(X[0, 0]) and np.isnan(X[1, 1]) and X[0, 1] == 3.0
    # with NULL written as 0 sklearn agrees with the default mapping
    q = _write(tmp_path, "0 qid:1 1:0 2:3\n1 qid:1 1:2 2:0\n", "g.txt")
    np.testing.assert_array_equal(read_svmlight(p)[0], _sklearn(q, 2)[0])


def test_n_features_pads_and_label_range_accepts(tmp_path):
    p = _write(tmp_path, "4 qid:1 2:1\n0 qid:2 1:1\n")
    X, y, q = read_svmlight(p, n_features=5, label_range=(0, 4))
    assert X.shape == (2, 5) and q.tolist() == [1, 2]


def test_many_chunks_match_sklearn(tmp_path, rng):
    """> 1 MiB so the parallel kernels split the file into several chunks."""
    n = 3000
    X = np.round(rng.normal(size=(n, 40)) * 100, 3)
    qid = np.repeat(np.arange(n // 10), 10)
    body = "\n".join(f"{i % 5} qid:{qid[i]} " + " ".join(f"{j + 1}:{X[i, j]}" for j in range(40))
                     for i in range(n))
    p = _write(tmp_path, body)  # no trailing newline
    assert p.stat().st_size > (1 << 20)
    _assert_same(p)


@pytest.mark.parametrize("text, line, fragment", [
    ("0 qid:1 1:1\nx qid:1 1:1\n", 2, "label is not a number"),
    ("0 qid:1 1:1\n\n0 1:1\n", 3, "missing 'qid:<int>'"),
    ("0 qid:1 1:1\n0 qid:a 1:1\n", 2, "qid is not an integer"),
    ("0 qid:1 1:1\n0 qid:1.5 1:1\n", 2, "qid is not an integer"),
    ("0 qid:1 1:1\n0 qid:1 1:abc\n", 2, "feature value is not a number"),
    ("0 qid:1 1:1\n0 qid:1 2:1_0\n", 2, "feature value is not a number"),
    ("0 qid:1 1:1\n0 qid:1 2:\n", 2, "feature value is not a number"),
    ("0 qid:1 0:1 2:1\n", 1, "feature index 0"),
    ("0 qid:1 1:1\r\n0 qid:1 3:1 2:1\r\n", 2, "sorted and unique"),
    ("0 qid:1 1:1 1:2\n", 1, "sorted and unique"),
    ("0 qid:1 1:1 x:2\n", 1, "malformed feature"),
    ("0 qid:1 1:1 7\n", 1, "malformed feature"),
    ("0 qid:1 1:1\n0 qid:2 1:1\n0 qid:1 1:1\n", 3, "qid 1 reappears"),
    ("0 qid:1 1:1\n0 qid:1 1:1\x00\x01\n", 2, "binary data"),
])
def test_malformed_input_names_file_and_line(tmp_path, text, line, fragment):
    p = _write(tmp_path, text)
    with pytest.raises(SvmlightFormatError) as info:
        read_svmlight(p)
    err = info.value
    assert err.path == str(p) and err.line == line
    assert str(err).startswith(f"{p}:{line}: ") and fragment in str(err)


def test_label_range_and_n_features_errors(tmp_path):
    p = _write(tmp_path, "0 qid:1 1:1\n5 qid:1 1:1\n")
    with pytest.raises(SvmlightFormatError, match=r":2: label 5\.0 outside .*\[0, 4\]"):
        read_svmlight(p, label_range=(0, 4))
    q = _write(tmp_path, "0 qid:1 1:1\n0 qid:1 137:1\n", "g.txt")
    with pytest.raises(SvmlightFormatError, match=r"g\.txt:2: feature index exceeds n_features=136"):
        read_svmlight(q, n_features=136)


@pytest.mark.parametrize("content, fragment", [
    (b"", "file is empty"),
    (b"# only a comment\n\n  \n", "no data lines"),
])
def test_empty_files(tmp_path, content, fragment):
    p = _write(tmp_path, content)
    with pytest.raises(SvmlightFormatError, match=fragment) as info:
        read_svmlight(p)
    assert info.value.line is None and info.value.path == str(p)


def test_binary_garbage(tmp_path, rng):
    p = _write(tmp_path, rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(SvmlightFormatError) as info:
        read_svmlight(p)
    assert info.value.line >= 1 and str(p) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_svmlight(tmp_path / "nope.txt")


def test_jit_falls_back_when_cache_cannot_be_written(tmp_path):
    """A function numba cannot cache (no source file) still compiles, with a warning."""
    code = (
        "import warnings\n"
        "from bench.jit import njit\n"
        "src = 'def f(x):\\n    return x + 1\\n'\n"
        "ns = {}\n"
        "exec(compile(src, '<generated>', 'exec'), ns)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    g = njit(ns['f'])\n"
        "print(g(1), any('cache unavailable' in str(m.message) for m in w))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "True"]
