"""The LETOR evaluation conventions ``letor3`` / ``letor4`` of :mod:`bench.metrics`.

(a) A hand-made LETOR file with every quirk of the real data (CRLF line ends, ``#docid = ...
inc = ... prob = ...`` comment tails, a query without a relevant document, lists shorter than
10, tied scores), read by the suite's own parser; its expected values are worked out below
from the rules of ``Eval-Score-3.0.pl`` / ``Eval-Score-4.0.pl``: gain 2^y - 1, discount 1
at ranks 1 and 2 and 1/log2(r) from rank 3, ties in file order, a query without relevant
documents scores 0, NDCG@k = 0 for k > n (both), P@k = 0 for k > n (3.0) or hits / k (4.0).

(b) A randomized file (60 queries, 1-40 documents, labels 0-2, many ties) whose per-query
values were produced by the official scripts (``scripts/letor_oracle.sh``,
``tests/fixtures/letor/README.md``). Tolerances are the scripts' printed precision:
Eval-Score-4.0.pl prints ``%.4f`` (half a unit of the 4th decimal, 5e-5), Eval-Score-3.0.pl
prints Perl's default 15 significant digits (1e-14 on values <= 1).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from bench.data.svmlight import read_svmlight
from bench.metrics import conventions_caption, evaluate, summarize

FIXTURES = Path(__file__).parent / "fixtures" / "letor"
TOL4 = 5e-5 + 1e-12  # "%.4f"
TOL3 = 1e-14  # Perl's "%.15g"

# (label, score) per line, in file order; comment tails as in LETOR 4.0 files
HAND = {
    1: [(0, 0.5), (2, 0.5), (1, 0.9), (0, 0.1)],  # tie 0.5: label 0 stays ahead of label 2
    2: [(0, 0.3), (0, 0.2), (0, 0.1)],  # no relevant document
    3: [(y, 1.0) for y in (0, 1, 0, 2, 0, 0, 1, 0, 0, 0, 2, 0)],  # all tied: file order
    4: [(2, -0.25)],  # a single document
}


def _write_hand(tmp_path: Path) -> tuple[Path, np.ndarray]:
    lines, scores = [], []
    for qid, docs in HAND.items():
        for d, (label, score) in enumerate(docs):
            lines.append(f"{label} qid:{qid} 1:{0.1 * d:.1f} 2:{score} #docid = GX{qid:03d}-{d:02d} "
                         f"inc = {0.5 + d} prob = 0.0{d + 1}")
            scores.append(score)
    path = tmp_path / "hand.txt"
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    return path, np.array(scores)


def _read(path: Path):
    _, y, qid = read_svmlight(path)
    _, starts, counts = np.unique(qid, return_index=True, return_counts=True)
    order = np.argsort(starts)
    offsets = np.r_[0, np.cumsum(counts[order])]
    return y.astype(np.float64), offsets, qid[np.sort(starts)]


L3 = 1 / math.log2(3)
L7 = 1 / math.log2(7)
# hand-worked values: query 1 ranks labels [1, 0, 2, 0]; query 3 keeps the file order
NDCG = {  # NDCG@k for k <= n (both versions); 0 beyond n
    1: [1 / 3, 1 / 4, (1 + 3 * L3) / 4, (1 + 3 * L3) / 4],
    2: [0.0, 0.0, 0.0],
    3: [
        0 / 3,
        1 / 6,
        1 / (6 + L3),
        (1 + 3 / 2) / (6 + L3 + 1 / 2),
        (1 + 3 / 2) / (6 + L3 + 1 / 2),
        (1 + 3 / 2) / (6 + L3 + 1 / 2),
        (1 + 3 / 2 + L7) / (6 + L3 + 1 / 2),
        (1 + 3 / 2 + L7) / (6 + L3 + 1 / 2),
        (1 + 3 / 2 + L7) / (6 + L3 + 1 / 2),
        (1 + 3 / 2 + L7) / (6 + L3 + 1 / 2),
    ],
    4: [1.0],
}
HITS = {1: [1, 1, 2, 2], 2: [0, 0, 0], 3: [0, 1, 1, 2, 2, 2, 3, 3, 3, 3], 4: [1]}
MAP = {1: (1 + 2 / 3) / 2, 2: 0.0, 3: (1 / 2 + 2 / 4 + 3 / 7 + 4 / 11) / 4, 4: 1.0}
K = range(1, 11)


def _expected(convention: str, qid: int, metric: str) -> float:
    n = len(HAND[qid])
    if metric == "map":
        return MAP[qid]
    if metric == "mean_ndcg":  # Eval-Score-4.0.pl: mean of NDCG@1..n (n = 12 for query 3)
        ndcg = NDCG[qid] + ([(1 + 3 / 2 + L7 + 3 / math.log2(11)) / (6 + L3 + 1 / 2)] * 2 if qid == 3 else [])
        return sum(ndcg) / n
    kind, k = metric.split("@")
    k = int(k)
    if kind == "ndcg":
        return NDCG[qid][k - 1] if k <= n else 0.0
    hits = HITS[qid][min(k, n) - 1]
    if k > n and convention == "letor3":
        return 0.0
    return hits / k


@pytest.mark.parametrize("convention", ["letor3", "letor4"])
def test_hand_fixture_every_quirk(tmp_path, convention):
    path, scores = _write_hand(tmp_path)
    labels, offsets, qids = _read(path)
    assert qids.tolist() == [1, 2, 3, 4] and labels.tolist()[:4] == [0, 2, 1, 0]
    metrics = [f"ndcg@{k}" for k in K] + [f"precision@{k}" for k in K] + ["map"]
    if convention == "letor4":
        metrics.append("mean_ndcg")
    df = evaluate(scores, labels, offsets, metrics, query_ids=qids, convention=convention)
    for row, qid in enumerate(HAND):
        for m in metrics:
            assert df[m][row] == pytest.approx(_expected(convention, qid, m), abs=1e-15), (qid, m)
            assert not df[m + ":dropped"][row]


def test_hand_fixture_conventions_differ_where_the_scripts_do(tmp_path):
    path, scores = _write_hand(tmp_path)
    labels, offsets, qids = _read(path)
    names = ["ndcg@10", "precision@5", "map"]
    v3 = evaluate(scores, labels, offsets, names, convention="letor3")
    v4 = evaluate(scores, labels, offsets, names, convention="letor4")
    default = evaluate(scores, labels, offsets, names)
    assert v3["precision@5"][0] == 0.0 and v4["precision@5"][0] == pytest.approx(2 / 5)  # n = 4
    assert v4["ndcg@10"][0] == 0.0 and default["ndcg@10"][0] == pytest.approx(
        (1 + 3 / math.log2(4)) / (3 + 1 / math.log2(3)))
    assert v4["ndcg@10"][1] == 0.0 and default["ndcg@10"][1] == 1.0  # no relevant document
    assert v3["map"].tolist() == v4["map"].tolist()


def test_letor_conventions_reject_what_the_scripts_do_not_define():
    s, y, off = np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([0, 2])
    with pytest.raises(ValueError, match="mrr.*not defined under convention 'letor4'"):
        evaluate(s, y, off, ["mrr"], convention="letor4")
    with pytest.raises(ValueError, match="only under convention 'letor4'"):
        evaluate(s, y, off, ["mean_ndcg"])
    with pytest.raises(ValueError, match="mean_ndcg.*letor3"):
        evaluate(s, y, off, ["mean_ndcg"], convention="letor3")
    with pytest.raises(ValueError, match="ties must be 'stable'"):
        evaluate(s, y, off, ["map"], ties="expected", convention="letor3")
    with pytest.raises(ValueError, match="labels 0, 1 and 2 only.*row 1 .*3.0"):
        evaluate(s, np.array([0.0, 3.0]), off, ["map"], convention="letor4")
    with pytest.raises(ValueError, match="convention='letor' is not one of"):
        evaluate(s, y, off, ["map"], convention="letor")


def test_caption_names_the_official_script():
    assert "Eval-Score-3.0.pl" in conventions_caption(convention="letor3")
    assert "Eval-Score-4.0.pl" in conventions_caption(convention="letor4")
    assert conventions_caption() == conventions_caption(convention="default")


# ---------------------------------------------------------------------------------------
# (b) the official scripts' own output on a randomized file


def _random_fixture():
    labels, offsets, qids = _read(FIXTURES / "random.test.txt")
    text = (FIXTURES / "random.scores.txt").read_text().split()
    return np.array([float(t) for t in text]), labels, offsets, qids


def _parse_eval3(path: Path):
    """Per query index (qids sorted numerically): printed P@1..n', MAP, NDCG@1..n'; averages."""
    per = {"precision": {}, "map": {}, "ndcg": {}}
    avg = {}
    for line in path.read_text().splitlines():
        m = re.match(r"(precision|Map|NDCG) of query(\d+):\t(.*)$", line)
        if m:
            kind = {"precision": "precision", "Map": "map", "NDCG": "ndcg"}[m.group(1)]
            per[kind][int(m.group(2))] = [float(v) for v in m.group(3).split("\t") if v]
            continue
        m = re.match(r"(precision|MAP|NDCG):\t(.*)$", line)
        if m:
            avg[m.group(1).lower()] = [float(v) for v in m.group(2).split("\t") if v]
    return per, avg


def _parse_eval4(path: Path):
    """{qid or 'Average': {column: value}} for both tables of Eval-Score-4.0.pl."""
    out: dict = {}
    header = None
    for line in path.read_text().splitlines():
        if not line:
            continue
        cells = line.split("\t")
        if cells[0] == "qid":
            header = cells[1:]
            continue
        key = cells[0] if cells[0] == "Average" else int(cells[0])
        out.setdefault(key, {}).update(zip(header, map(float, cells[1:])))
    return out


def test_random_fixture_covers_the_quirks():
    scores, labels, offsets, qids = _random_fixture()
    n = np.diff(offsets)
    rel = np.add.reduceat(labels >= 1, offsets[:-1])
    assert len(n) == 60 and n.min() == 1 and n.max() == 40
    assert (n < 10).sum() >= 10 and (rel == 0).sum() >= 3 and set(labels.tolist()) == {0.0, 1.0, 2.0}
    tied = sum(len(np.unique(scores[a:b])) < b - a for a, b in zip(offsets[:-1], offsets[1:]))
    assert tied >= 40
    assert (FIXTURES / "random.test.txt").read_bytes().count(b"\r\n") == len(labels)


def test_letor3_equals_eval_score_3_per_query():
    scores, labels, offsets, qids = _random_fixture()
    ks = range(1, 17)
    names = [f"ndcg@{k}" for k in ks] + [f"precision@{k}" for k in ks] + ["map"]
    df = evaluate(scores, labels, offsets, names, query_ids=qids, convention="letor3")
    per, avg = _parse_eval3(FIXTURES / "eval-3.0.txt")
    by_qid = np.argsort(qids, kind="stable")  # the script numbers queries by sorted qid
    compared, worst = 0, 0.0
    for i, row in enumerate(by_qid):
        ours_map = df["map"][row]
        worst = max(worst, abs(ours_map - per["map"][i][0]))
        compared += 1
        for kind in ("ndcg", "precision"):
            printed = per[kind][i]
            assert len(printed) == min(16, offsets[row + 1] - offsets[row])
            for k in ks:  # nothing printed beyond n: the script's mean adds 0 there
                theirs = printed[k - 1] if k <= len(printed) else 0.0
                worst = max(worst, abs(df[f"{kind}@{k}"][row] - theirs))
                compared += 1
    assert compared == 60 * 33 and worst <= TOL3, worst
    means = summarize(df)
    for kind in ("ndcg", "precision"):
        for k, value in enumerate(avg[kind], start=1):
            assert means[f"{kind}@{k}"] == pytest.approx(value, abs=TOL3)
    assert means["map"] == pytest.approx(avg["map"][0], abs=TOL3)


def test_letor4_equals_eval_score_4_per_query():
    scores, labels, offsets, qids = _random_fixture()
    names = [f"ndcg@{k}" for k in K] + [f"precision@{k}" for k in K] + ["map", "mean_ndcg"]
    df = evaluate(scores, labels, offsets, names, query_ids=qids, convention="letor4")
    table = _parse_eval4(FIXTURES / "eval-4.0.txt")
    column = {**{f"ndcg@{k}": f"NDCG@{k}" for k in K}, **{f"precision@{k}": f"P@{k}" for k in K},
              "map": "MAP", "mean_ndcg": "MeanNDCG"}
    assert sorted(k for k in table if k != "Average") == sorted(qids.tolist())
    diffs = np.array([[df[m][row] - table[int(q)][column[m]] for m in names] for row, q in enumerate(qids)])
    assert diffs.size == 60 * 22 and np.abs(diffs).max() <= TOL4, np.abs(diffs).max()
    means = summarize(df)
    for m in names:
        assert means[m] == pytest.approx(table["Average"][column[m]], abs=TOL4)


def test_ndcg_at_max_is_ndcg_at_the_list_length(tmp_path):
    path, scores = _write_hand(tmp_path)
    labels, offsets, _ = _read(path)
    for convention in ("letor3", "letor4"):
        df = evaluate(scores, labels, offsets, ["ndcg@max"], convention=convention)
        assert df["ndcg@max"].tolist() == pytest.approx([NDCG[1][3], 0.0, (1 + 3 / 2 + L7 + 3 / math.log2(11)) /
                                                         (6 + L3 + 1 / 2), 1.0], abs=1e-15)


def test_evaluate_with_convention_grades_only_the_scripts_metrics_the_letor_way(tmp_path):
    from bench.metrics import evaluate_with_convention, metric_convention

    path, scores = _write_hand(tmp_path)
    labels, offsets, qids = _read(path)
    names = ["mrr", "ndcg@10", "opa", "map"]
    mixed = evaluate_with_convention(scores, labels, offsets, names, "letor4", query_ids=qids)
    assert list(mixed.columns) == ["query", *names, *(n + ":dropped" for n in names)]
    letor = evaluate(scores, labels, offsets, ["ndcg@10", "map"], query_ids=qids, convention="letor4")
    default = evaluate(scores, labels, offsets, ["mrr", "opa"], query_ids=qids)
    for name, ref in (("ndcg@10", letor), ("map", letor), ("mrr", default), ("opa", default), ("opa:dropped", default)):
        assert mixed[name].tolist() == ref[name].tolist(), name
    plain = evaluate(scores, labels, offsets, names, query_ids=qids)
    assert evaluate_with_convention(scores, labels, offsets, names, "default", query_ids=qids).equals(plain)
    assert [metric_convention(n, "letor3") for n in ("precision@3", "mean_ndcg", "arp")] == ["letor3", "default",
                                                                                             "default"]
