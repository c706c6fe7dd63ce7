"""Fast, strict reader for the SVMlight / LETOR text format used by every web LTR dataset.

One document per line::

    <label> qid:<int> <index>:<value> <index>:<value> ... [# comment]

:func:`read_svmlight` returns dense ``(X float32 [N, F], y float32 [N], qid int64 [N])``,
bit-identical to ``sklearn.datasets.load_svmlight_file(path, dtype=np.float32,
query_id=True)`` followed by ``X.toarray()`` and ``y.astype(np.float32)`` on every valid file
(dense MSLR-style rows, sparse Yahoo-style rows, ``# docid = ...`` comments, CRLF line ends,
trailing whitespace, blank or comment-only lines, which are skipped).

How it is fast: the file is memory-mapped and parsed as raw bytes by two numba kernels that
run in parallel over line-aligned chunks (without the GIL: a job's progress heartbeat,
:mod:`bench.atomic.progress`, keeps writing its lines during a long parse). Pass 1 counts the data lines of each chunk and finds
the largest feature index (the last index of a line, since indices ascend); it only looks for
newlines, ``#`` and NUL, 64 bytes at a time in a vectorised test. Pass 2 parses every number
straight into the preallocated dense matrix in one forward pass per line (a token ends at
whitespace or ``#``, so lines are not pre-scanned for their end); indices and plain decimals
``[-]int[.frac]`` are read 8 bytes at a time (SWAR digit runs), anything else byte by byte.

How numbers are rounded: a value is the decimal ``m * 10**e``. When ``m < 2**53`` and
``|e| <= 22`` both factors are exact doubles, so one multiplication or division gives the
correctly rounded double (Clinger's fast path), then the float32 cast matches Python's
``float()`` followed by a C cast, as sklearn does. Otherwise the double is approximated within
a few ulps and kept only if the interval ``v * (1 +- 2**-45)`` casts to a single float32;
the rare ambiguous token falls back to Python's ``float``. Magnitudes of ``1e39`` and above
(Istella's DBL_MAX sentinel ``1.79769313486e+308``) become ``inf`` in float32, exactly as in
sklearn with ``dtype=np.float32``; ``prepare``'s ``clip`` option deals with them.

Differences from sklearn, all on input sklearn also rejects or silently mangles:

* a value written ``NULL`` (LETOR 3.0 ``Feature_null``) becomes ``null_value``, **0.0 by
  default** (the value a sparse file gives an absent feature); pass ``float("nan")`` to keep
  it visibly missing;
* every data line must carry ``qid:<int>`` as its second field;
* index 0 is an error (the datasets are 1-based), as are unsorted or duplicate indices;
* a qid that reappears after another query is an error, not a silent merge;
* Python-only number spellings (``1_000``) and NUL bytes are errors.

Malformed input raises :class:`SvmlightFormatError` naming the file, the 1-based line and
what is wrong:

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> p = os.path.join(d, "toy.txt")
>>> with open(p, "w") as f:
...     _ = f.write("2 qid:1 1:0.5 3:1e2 # docid = a\\n0 qid:1 2:-1\\n1 qid:7 1:NULL\\n")
>>> X, y, qid = read_svmlight(p)
>>> X.tolist(), y.tolist(), qid.tolist()
([[0.5, 0.0, 100.0], [0.0, -1.0, 0.0], [0.0, 0.0, 0.0]], [2.0, 0.0, 1.0], [1, 1, 7])
>>> with open(p, "w") as f:
...     _ = f.write("2 qid:1 1:0.5\\n0 qid:1 3:x\\n")
>>> try:
...     read_svmlight(p)
... except SvmlightFormatError as e:
...     print(e.line, str(e).split(": ", 1)[1])
2 feature value is not a number (token '3:x')
"""

from __future__ import annotations

import os
from pathlib import Path

import numba
import numpy as np
from numba import prange
from numba.cpython.unsafe.numbers import trailing_zeros

from bench.errors import SvmlightFormatError
from bench.jit import njit

__all__ = ["SvmlightFormatError", "read_svmlight"]




# error codes shared by the kernels and the message table below
_E_NUL, _E_LABEL, _E_NOQID, _E_QID, _E_TOKEN, _E_IDX0, _E_ORDER, _E_RANGE, _E_VALUE = range(1, 10)
_MESSAGES = {
    _E_NUL: "binary data (NUL byte); this is not an SVMlight text file",
    _E_LABEL: "label is not a number",
    _E_NOQID: "missing 'qid:<int>' as the second field",
    _E_QID: "qid is not an integer",
    _E_TOKEN: "malformed feature, expected '<index>:<value>' with an integer index",
    _E_IDX0: "feature index 0 in a 1-based file (indices start at 1)",
    _E_ORDER: "feature indices must be sorted and unique",
    _E_RANGE: "feature index exceeds n_features",
    _E_VALUE: "feature value is not a number",
}

# 10**k for k in [-70, 40] as correctly rounded doubles (Python parses the literals)
_P10_LO = -70
_P10 = np.array([float(f"1e{k}") for k in range(_P10_LO, 41)], dtype=np.float64)
_TWO53 = 2**53
_P10_INT = np.array([10**k for k in range(19)], dtype=np.uint64)
_SLOW_CAPACITY = 1024  # ambiguous-rounding tokens per chunk before a chunk is re-run


@njit(inline="always")
def _is_ws(c):
    return c == 32 or (c >= 9 and c <= 13)


@njit(inline="always")
def _is_end(c):
    """A byte that may follow a token: whitespace (newline included) or the comment mark."""
    return c == 32 or (c >= 9 and c <= 13) or c == 35


@njit(inline="always")
def _lower(c):
    return c | 32 if c >= 65 and c <= 90 else c


@njit
def _match_word(buf, i, end, word):
    """True when ``buf[i:end]`` starts with ``word`` (lower-case ASCII codes), any case."""
    if end - i < word.shape[0]:
        return False
    for k in range(word.shape[0]):
        if _lower(buf[i + k]) != word[k]:
            return False
    return True


_W_NAN = np.array([ord(c) for c in "nan"], dtype=np.uint8)
_W_INF = np.array([ord(c) for c in "inf"], dtype=np.uint8)
_W_INFINITY = np.array([ord(c) for c in "infinity"], dtype=np.uint8)


@njit
def _parse_number(buf, i, end):
    """Parse the float token starting at ``buf[i]``; it ends at whitespace, ``#`` or ``end``.

    Returns ``(value, next_i, status)``: status 0 = ok (``value`` casts to the right float32),
    1 = valid but rounding ambiguous (use Python's float), 2 = not a number.
    """
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    if i < end and _lower(buf[i]) >= 97 and _lower(buf[i]) <= 122:  # nan / inf / infinity
        val = np.nan
        if _match_word(buf, i, end, _W_INFINITY):
            i += 8
            val = np.inf
        elif _match_word(buf, i, end, _W_INF):
            i += 3
            val = np.inf
        elif _match_word(buf, i, end, _W_NAN):
            i += 3
        else:
            return 0.0, i, 2
        if i < end and not _is_end(buf[i]):
            return 0.0, i, 2
        return (-val if neg else val), i, 0
    m = np.int64(0)
    nd = 0  # significant digits kept in m (at most 18, so m fits in int64)
    e = 0
    dropped = False
    any_digit = False
    while i < end:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        any_digit = True
        if m == 0 and d == 0:
            pass
        elif nd < 18:
            m = m * 10 + d
            nd += 1
        else:
            e += 1
            dropped = dropped or d != 0
        i += 1
    if i < end and buf[i] == 46:  # '.'
        i += 1
        while i < end:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            any_digit = True
            if m == 0 and d == 0:
                e -= 1
            elif nd < 18:
                m = m * 10 + d
                nd += 1
                e -= 1
            else:
                dropped = dropped or d != 0
            i += 1
    if not any_digit:
        return 0.0, i, 2
    if i < end and (buf[i] == 101 or buf[i] == 69):  # exponent
        i += 1
        eneg = False
        if i < end and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        ex = 0
        exp_digit = False
        while i < end:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            exp_digit = True
            if ex < 100000:
                ex = ex * 10 + d
            i += 1
        if not exp_digit:
            return 0.0, i, 2
        e += -ex if eneg else ex
    if i < end and not _is_end(buf[i]):
        return 0.0, i, 2
    status = 0
    if m == 0:
        v = 0.0
    elif not dropped and m <= _TWO53 and e >= -22 and e <= 22:
        # Clinger's fast path: both operands exact, one correctly rounded operation
        v = np.float64(m) * _P10[e - _P10_LO] if e >= 0 else np.float64(m) / _P10[-e - _P10_LO]
    else:
        mag = nd + e  # value lies in [10**(mag-1), 10**mag)
        if mag >= 40:
            v = np.inf  # >= 1e39 overflows float32
        elif mag <= -46:
            v = 0.0  # < 1e-46 rounds to zero in float32
        else:
            if e >= -22 and e < 0:
                v = np.float64(m) / _P10[-e - _P10_LO]
            else:
                v = np.float64(m) * _P10[e - _P10_LO]
            lo = np.float32(v * (1.0 - 2.0**-45))
            hi = np.float32(v * (1.0 + 2.0**-45))
            if lo != hi:
                status = 1
    return (-v if neg else v), i, status


@njit
def _next_line_start(buf, p):
    n = buf.shape[0]
    while p < n and buf[p] != 10:
        p += 1
    return min(p + 1, n)


@njit
def _count_newlines(buf, end):
    n = 0
    for k in range(end):
        if buf[k] == 10:
            n += 1
    return n


@njit(inline="always")
def _parse_value(buf, i, end):
    """Fast path of :func:`_parse_number` for plain decimals of at most 18 digits.

    Accumulates every digit (leading zeros included, they add nothing) into one int64 ``m``
    and counts the fraction digits into ``e``, reads an optional exponent, and when
    ``m <= 2**53`` and ``|e| <= 22`` gives the same single correctly rounded operation as
    :func:`_parse_number` (whose ``m`` and ``e`` are equal for such tokens). Any other token
    (more digits, nan/inf, a large exponent, malformed text) is re-read from its start by
    :func:`_parse_number`, so both give the same ``(value, next_i, status)``.
    """
    s = i
    neg = False
    if i < end and buf[i] == 45:
        neg = True
        i += 1
    m = np.int64(0)
    nd = 0
    while i < end:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        m = m * 10 + d
        nd += 1
        i += 1
    e = 0
    if i < end and buf[i] == 46:  # '.'
        i += 1
        while i < end:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            m = m * 10 + d
            nd += 1
            e -= 1
            i += 1
    if nd == 0 or nd > 18:
        return _parse_number(buf, s, end)
    if i < end and (buf[i] == 101 or buf[i] == 69):  # exponent
        j = i + 1
        eneg = False
        if j < end and (buf[j] == 45 or buf[j] == 43):
            eneg = buf[j] == 45
            j += 1
        ex = 0
        ne = 0
        while j < end and ne < 4:
            d = np.int64(buf[j]) - 48
            if d < 0 or d > 9:
                break
            ex = ex * 10 + d
            ne += 1
            j += 1
        if ne == 0 or ne == 4:
            return _parse_number(buf, s, end)
        e += -ex if eneg else ex
        i = j
    if i < end and not _is_end(buf[i]):
        return 0.0, i, 2
    if m == 0:
        v = 0.0
    elif m <= _TWO53 and e >= -22 and e <= 22:
        v = np.float64(m) * _P10[e - _P10_LO] if e >= 0 else np.float64(m) / _P10[-e - _P10_LO]
    else:
        return _parse_number(buf, s, end)
    return (-v if neg else v), i, 0


_U8 = np.uint64(8)
_ONES30 = np.uint64(0x3030303030303030)
_ONES76 = np.uint64(0x7676767676767676)
_HIGH = np.uint64(0x8080808080808080)
_M1 = np.uint64(0x000000FF000000FF)
_MUL1 = np.uint64(100 + (1000000 << 32))
_MUL2 = np.uint64(1 + (10000 << 32))


@njit(inline="always")
def _load8(buf, k):
    """The 8 bytes ``buf[k:k + 8]`` as a little-endian uint64, for ``k >= 0``.

    Read through an unsigned index so that LLVM merges the eight byte loads into one: with a
    signed index numba fixes up a negative one at each load (a compare and a select), and the
    loads stayed apart. The parse's CPU time fell by 26% (0.326 -> 0.242 CPU s on the perf
    suite's 70 MB MSLR-format file, best of 5, one thread; see
    docs/performance.md, "Parsing against scikit-learn"). Reading the other bytes the same
    way gained nothing more.
    """
    u = np.uint64(k)
    return (np.uint64(buf[u]) | (np.uint64(buf[u + np.uint64(1)]) << np.uint64(8))
            | (np.uint64(buf[u + np.uint64(2)]) << np.uint64(16)) | (np.uint64(buf[u + np.uint64(3)]) << np.uint64(24))
            | (np.uint64(buf[u + np.uint64(4)]) << np.uint64(32)) | (np.uint64(buf[u + np.uint64(5)]) << np.uint64(40))
            | (np.uint64(buf[u + np.uint64(6)]) << np.uint64(48)) | (np.uint64(buf[u + np.uint64(7)]) << np.uint64(56)))


@njit(inline="always")
def _digit_run(buf, k):
    """``(value, n)``: the run of ASCII digits starting at ``buf[k]``, read 8 bytes at once.

    ``n`` (0..8) is the run's length; ``value`` is exact for ``n <= 8`` (0 when ``n == 0``).
    Method (SWAR, branch-free): ``x = word - 0x30..30`` makes each digit byte 0..9; a byte
    is no digit when ``x >= 10`` or its high bit is set, tested for all bytes as
    ``t = ((x + 0x76..76) | x) & 0x80..80``; the first such byte (trailing zeros of ``t``
    / 8; 64 when ``t == 0``) ends the run. Borrows and carries only move towards later
    bytes, so the run is exact. The later bytes are masked off (``t & -t`` isolates the
    first stop bit), the run is shifted to the top of the word (zero bytes below act as
    leading zeros) and combined pairwise: ``x*10 + (x >> 8)``, then two multiply-shifts
    (the method of simdjson's ``parse_eight_digits_unrolled``).
    """
    x = _load8(buf, k) - _ONES30
    t = ((x + _ONES76) | x) & _HIGH
    n = np.int64(trailing_zeros(t) >> np.uint64(3))
    x &= ((t & (~t + np.uint64(1))) >> np.uint64(7)) - np.uint64(1)  # all ones when t == 0
    sh = np.uint64(8 * (8 - n))
    half = sh >> np.uint64(1)
    x = (x << half) << (sh - half)  # two shifts: a shift by 64 is undefined
    x = x * np.uint64(10) + (x >> _U8)
    x = (((x & _M1) * _MUL1) + (((x >> np.uint64(16)) & _M1) * _MUL2)) >> np.uint64(32)
    return x, n


@njit(inline="always")
def _parse_feature_value(buf, k, end):
    """Value token at ``buf[k]``: 8-byte (SWAR) path for ``[-]int[.frac]`` of < 8 + < 8 digits.

    ``m = int * 10**nfrac + frac`` and ``e = -nfrac`` are the ``m, e`` of
    :func:`_parse_number` (leading zeros add nothing, at most 14 digits, so ``m < 2**53`` and
    Clinger's single operation ``m / 10**nfrac`` applies), hence the same double. Sign and
    dot are branched on (measured faster than selecting them arithmetically). Everything
    else (longer runs, exponents, nan/inf, malformed text, the last bytes of a chunk) goes
    to :func:`_parse_value`.
    """
    if k + 24 > end:
        return _parse_value(buf, k, end)
    p = k
    neg = buf[p] == 45
    if neg:
        p += 1
    ip, n1 = _digit_run(buf, p)
    if n1 == 8:
        return _parse_value(buf, k, end)
    p += n1
    m = ip
    nf = 0
    if buf[p] == 46:  # '.'
        fp, nf = _digit_run(buf, p + 1)
        if nf == 8:
            return _parse_value(buf, k, end)
        p += 1 + nf
        if nf > 0:
            m = ip * np.uint64(_P10_INT[nf]) + fp
    if n1 + nf == 0 or not _is_end(buf[p]):
        return _parse_value(buf, k, end)
    v = np.float64(m) / _P10[nf - _P10_LO] if nf > 0 else np.float64(m)
    return (-v if neg else v), p, 0


@njit(inline="always")
def _find_special(buf, i, end):
    """First ``p >= i`` with ``buf[p]`` a newline, ``#`` or NUL (``end`` when none).

    Blocks of 64 bytes are tested branch-free and skipped when they hold none; a block that
    does is searched byte by byte. The block test is written so that LLVM vectorises it: a
    fixed-length slice, uint8 arithmetic only, and ``min(b ^ 10, b ^ 35, b) == 0`` for "b is
    one of the three" (about 3x faster than the same test on ``buf[i + k]`` with booleans).
    """
    while i + 64 <= end:
        blk = buf[i:i + 64]
        hit = np.uint8(0)
        for k in range(64):
            b = blk[k]
            hit |= np.uint8(min(b ^ np.uint8(10), b ^ np.uint8(35), b) == 0)
        if hit:
            break
        i += 64
    while i < end:
        b = buf[i]
        if b == 10 or b == 35 or b == 0:
            return i
        i += 1
    return end


@njit(inline="always")
def _find_newline(buf, i, end):
    """First ``p >= i`` with ``buf[p]`` a newline (``end`` when none); 64-byte blocks as above."""
    while i + 64 <= end:
        blk = buf[i:i + 64]
        hit = np.uint8(0)
        for k in range(64):
            hit |= np.uint8(blk[k] == 10)
        if hit:
            break
        i += 64
    while i < end and buf[i] != 10:
        i += 1
    return i


@njit(parallel=True, nogil=True)
def _scan(buf, starts, ends, nrows, maxidx, err):
    """Pass 1: per chunk, count data lines and the largest (= last) feature index of a line.

    Only newlines, ``#`` and NUL bytes matter here, found with :func:`_find_special`; a data
    line's last token is then read backwards from its end.
    """
    for c in prange(starts.shape[0]):
        i = starts[c]
        end_c = ends[c]
        rows = 0
        mx = 0
        while i < end_c:
            ls = i
            hashp = -1
            while True:
                i = _find_special(buf, i, end_c)
                if i >= end_c or buf[i] == 10:
                    break
                if buf[i] == 35:
                    if hashp < 0:
                        hashp = i
                elif err[c, 0] == 0:
                    err[c, 0] = _E_NUL
                    err[c, 1] = ls
                    err[c, 2] = i
                i += 1
            de = hashp if hashp >= 0 else i
            i += 1
            t = de - 1
            while t >= ls and _is_ws(buf[t]):
                t -= 1
            if t < ls:
                continue  # blank or comment-only line
            rows += 1
            te = t + 1
            while t >= ls and not _is_ws(buf[t]):
                t -= 1
            ts = t + 1
            idx = 0
            ok = False
            for k in range(ts, te):
                b = buf[k]
                if b == 58:  # ':'
                    ok = k > ts
                    break
                if b < 48 or b > 57 or idx > 10**15:
                    break
                idx = idx * 10 + (b - 48)
            if ok and idx > mx:
                mx = idx
        nrows[c] = rows
        maxidx[c] = mx


@njit(inline="always")
def _skip_blank(buf, k, end):
    """Skip whitespace other than the newline."""
    while k < end and buf[k] != 10 and _is_ws(buf[k]):
        k += 1
    return k


@njit(parallel=True, nogil=True)
def _fill(buf, starts, ends, row0, n_features, null_value, X, y, qid, rowoff,
          slow_row, slow_col, slow_pos, nslow, err):
    """Pass 2: parse every data line of each chunk into row ``row0[c] + k`` of X, y, qid.

    One forward pass per line: tokens are read as they come and the line ends at its newline
    or its ``#`` (the comment is then skipped to the newline), so no byte is scanned twice.
    """
    cap = slow_row.shape[1]
    for c in prange(starts.shape[0]):
        i = starts[c]
        end_c = ends[c]
        row = row0[c]
        while i < end_c:
            ls = i
            k = _skip_blank(buf, i, end_c)
            if k >= end_c or buf[k] == 10 or buf[k] == 35:  # blank or comment-only line
                i = _find_newline(buf, k, end_c) + 1
                continue
            rowoff[row] = ls
            # label
            v, k2, st = _parse_value(buf, k, end_c)
            if st == 2:
                err[c, 0] = _E_LABEL
                err[c, 1] = ls
                err[c, 2] = k
                break
            if st == 1:
                n = nslow[c]
                if n < cap:
                    slow_row[c, n] = row
                    slow_col[c, n] = -1
                    slow_pos[c, n] = k
                nslow[c] = n + 1
            y[row] = np.float32(v)
            k = _skip_blank(buf, k2, end_c)
            # qid
            if not (end_c - k >= 4 and buf[k] == 113 and buf[k + 1] == 105
                    and buf[k + 2] == 100 and buf[k + 3] == 58):
                err[c, 0] = _E_NOQID
                err[c, 1] = ls
                err[c, 2] = k
                break
            tok = k
            k += 4
            qneg = False
            if k < end_c and buf[k] == 45:
                qneg = True
                k += 1
            qv = np.int64(0)
            nq = 0
            while k < end_c and buf[k] >= 48 and buf[k] <= 57 and nq < 18:
                qv = qv * 10 + (np.int64(buf[k]) - 48)
                nq += 1
                k += 1
            if nq == 0 or (k < end_c and not _is_end(buf[k])):
                err[c, 0] = _E_QID
                err[c, 1] = ls
                err[c, 2] = tok
                break
            qid[row] = -qv if qneg else qv
            # features
            prev = 0
            over = 0
            while True:
                k = _skip_blank(buf, k, end_c)
                if k >= end_c or buf[k] == 10 or buf[k] == 35:
                    break
                tok = k
                idx = np.int64(0)
                nidx = 0
                if k + 8 <= end_c:
                    iv, nidx = _digit_run(buf, k)
                    if nidx > 0 and nidx < 8 and buf[k + nidx] == 58:
                        idx = np.int64(iv)
                        k += nidx
                    else:
                        nidx = 0
                if nidx == 0:  # the byte-wise reading, exact errors included
                    while k < end_c and buf[k] >= 48 and buf[k] <= 57 and nidx < 18:
                        idx = idx * 10 + (np.int64(buf[k]) - 48)
                        nidx += 1
                        k += 1
                    if nidx == 0 or k >= end_c or buf[k] != 58:
                        err[c, 0] = _E_TOKEN
                        break
                k += 1
                if idx == 0:
                    err[c, 0] = _E_IDX0
                    break
                if idx <= prev:
                    err[c, 0] = _E_ORDER
                    err[c, 3] = prev
                    break
                prev = idx
                if end_c - k >= 4 and buf[k] == 78 and buf[k + 1] == 85 and buf[k + 2] == 76 \
                        and buf[k + 3] == 76 and (end_c - k == 4 or _is_end(buf[k + 4])):
                    v = null_value
                    k += 4
                    st = 0
                else:
                    v, k, st = _parse_feature_value(buf, k, end_c)
                if st == 2:
                    err[c, 0] = _E_VALUE
                    break
                if idx > n_features:
                    if over == 0:
                        over = tok
                    continue
                if st == 1:
                    n = nslow[c]
                    if n < cap:
                        slow_row[c, n] = row
                        slow_col[c, n] = idx - 1
                        slow_pos[c, n] = tok
                    nslow[c] = n + 1
                X[row, idx - 1] = np.float32(v)
            if err[c, 0] == 0 and over > 0:
                err[c, 0] = _E_RANGE
                tok = over
                err[c, 3] = n_features
            if err[c, 0] != 0:
                err[c, 1] = ls
                err[c, 2] = tok
                break
            row += 1
            i = _find_newline(buf, k, end_c) + 1


def _chunks(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Line-aligned ``[start, end)`` byte ranges, a few per thread for load balance."""
    n = buf.shape[0]
    k = max(1, min(4 * numba.get_num_threads(), n // (1 << 20)))
    bounds = [0]
    for j in range(1, k):
        p = _next_line_start(buf, max(j * n // k, bounds[-1]))
        bounds.append(p)
    bounds.append(n)
    b = np.asarray(bounds, dtype=np.int64)
    return b[:-1].copy(), b[1:].copy()


def _token_text(buf: np.ndarray, pos: int, limit: int = 60) -> str:
    end = pos
    n = buf.shape[0]
    while end < n and end - pos < limit and buf[end] not in (9, 10, 11, 12, 13, 32, 35):
        end += 1
    return bytes(buf[pos:end]).decode("latin-1")


def _line_of(buf: np.ndarray, offset: int) -> int:
    return int(_count_newlines(buf, offset)) + 1


def _parse(buf: np.ndarray, path: Path, n_features, null_value: float):
    """Parse the byte buffer; returns arrays or raises SvmlightFormatError."""
    starts, ends = _chunks(buf)
    nchunks = starts.shape[0]
    nrows = np.zeros(nchunks, dtype=np.int64)
    maxidx = np.zeros(nchunks, dtype=np.int64)
    err = np.zeros((nchunks, 4), dtype=np.int64)
    _scan(buf, starts, ends, nrows, maxidx, err)
    _raise_first(err, buf, path)
    n = int(nrows.sum())
    if n == 0:
        raise SvmlightFormatError(path, None, "no data lines (empty or comments only)")
    if n_features is None:
        n_features = int(maxidx.max())
    elif n_features < 0:
        raise ValueError(f"n_features must be >= 0, got {n_features}")
    row0 = np.concatenate([[0], np.cumsum(nrows)[:-1]]).astype(np.int64)
    X = np.zeros((n, int(n_features)), dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    qid = np.empty(n, dtype=np.int64)
    rowoff = np.empty(n, dtype=np.int64)
    cap = _SLOW_CAPACITY
    while True:
        slow_row = np.empty((nchunks, cap), dtype=np.int64)
        slow_col = np.empty((nchunks, cap), dtype=np.int64)
        slow_pos = np.empty((nchunks, cap), dtype=np.int64)
        nslow = np.zeros(nchunks, dtype=np.int64)
        _fill(buf, starts, ends, row0, np.int64(n_features), np.float64(null_value), X, y, qid,
              rowoff, slow_row, slow_col, slow_pos, nslow, err)
        _raise_first(err, buf, path, n_features)
        if nslow.max() <= cap:
            break
        cap = int(nslow.max())  # rare: many ambiguous tokens; re-run with room for all
    with np.errstate(over="ignore"):  # float32 overflow to inf is the intended result
        for c in range(nchunks):
            for j in range(int(nslow[c])):
                text = _token_text(buf, int(slow_pos[c, j]), limit=1 << 20)
                value = np.float32(float(text.split(":", 1)[1] if slow_col[c, j] >= 0 else text))
                if slow_col[c, j] < 0:
                    y[slow_row[c, j]] = value
                else:
                    X[slow_row[c, j], slow_col[c, j]] = value
    return X, y, qid, rowoff


def _raise_first(err: np.ndarray, buf: np.ndarray, path: Path, n_features=None) -> None:
    bad = np.flatnonzero(err[:, 0])
    if bad.size == 0:
        return
    code, line_start, tok, extra = (int(v) for v in err[bad[0]])
    what = _MESSAGES[code]
    if code == _E_ORDER:
        what += f" (index after {extra})"
    elif code == _E_RANGE:
        what = f"feature index exceeds n_features={extra}"
    if code != _E_NUL:
        what += f" (token {_token_text(buf, tok)!r})" if tok < buf.shape[0] and \
            buf[tok] not in (10, 35) else " (line ends early)"
    raise SvmlightFormatError(path, _line_of(buf, line_start), what)


def _check_queries(qid: np.ndarray, rowoff: np.ndarray, buf: np.ndarray, path: Path) -> None:
    """Query blocks must be contiguous: a qid that reappears later is an error."""
    change = np.flatnonzero(qid[1:] != qid[:-1]) + 1
    block_start = np.concatenate([[0], change])
    block_qid = qid[block_start]
    order = np.argsort(block_qid, kind="stable")
    sorted_q = block_qid[order]
    dup = np.flatnonzero(sorted_q[1:] == sorted_q[:-1]) + 1
    if dup.size == 0:
        return
    later = order[dup]  # stable sort: the second of two equal blocks is the reappearance
    b = int(later.min())
    first = int(order[np.searchsorted(sorted_q, block_qid[b])])
    line = _line_of(buf, int(rowoff[block_start[b]]))
    first_line = _line_of(buf, int(rowoff[block_start[first]]))
    raise SvmlightFormatError(
        path, line, f"qid {int(block_qid[b])} reappears after other queries (its first block "
        f"starts at line {first_line}); the lines of one query must be contiguous")


def read_svmlight(path: str | os.PathLike, n_features: int | None = None, *,
                  label_range: tuple[float, float] | None = None,
                  null_value: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read an SVMlight/LETOR file into dense ``(X float32 [N,F], y float32 [N], qid int64 [N])``.

    ``n_features``: number of columns (default: the largest index in the file; a larger
    index in the file is an error). ``label_range=(lo, hi)``: labels outside it are an error.
    ``null_value``: what a ``NULL`` value becomes (default 0.0). Bytes are parsed as ASCII;
    comments may hold any 8-bit text (Istella's latin-1 included).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise SvmlightFormatError(path, None, "file is empty")
    buf = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)
    X, y, qid, rowoff = _parse(buf, path, n_features, null_value)
    if label_range is not None:
        lo, hi = label_range
        bad = np.flatnonzero(~((y >= lo) & (y <= hi)))
        if bad.size:
            r = int(bad[0])
            raise SvmlightFormatError(
                path, _line_of(buf, int(rowoff[r])),
                f"label {float(y[r])!r} outside the dataset's range [{lo}, {hi}]")
    _check_queries(qid, rowoff, buf, path)
    return X, y, qid
