"""Regenerate tests/fixtures/ir_measures/: a seeded run and what independent evaluators say of it.

    pip install ir-measures==0.4.3 cwl-eval==1.0.12   # plus perl for gdeval
    python scripts/ir_measures_oracle.py [OUT_DIR]    # default: tests/fixtures/ir_measures

Writes ``run.tsv`` (``qid docid label score``) and ``expected.tsv`` (``qid measure value``).
The run has 60 queries (100-159) of 1-30 documents, labels 0-4, a few queries without a
relevant document and distinct scores, and 14 queries (200-213) with tied scores: scores
drawn from a few quarter values (one query all tied, one tie group of 30, one without a
relevant document), docnos numbered in an order unrelated to the file order, so that file
order, docno order and reversed docno order rank tied documents differently. Per query:

- trec_eval through ir-measures' pytrec_eval provider: ``P@k``, ``AP``, ``AP@k`` (trec_eval's
  ``map_cut``), ``RR`` and ``nDCG@k`` with the gains 2^y - 1 (``nDCG(gains=...)``);
- ir-measures' msmarco provider: ``RR@k``;
- gdeval.pl (TREC Web track, through ir-measures): ``ERR@k`` (its grades 0-4: the Yahoo!
  challenge's definition, printed to 5 decimals);
- cwl-eval (C/W/L, through its own API): ``RBP(p)`` with binary relevance and its residual
  (best case minus worst case over the ranks up to cwl's depth of 1000).

Each tool's order of tied scores (the fixture README has the sources): trec_eval and gdeval
put the larger docno first, the msmarco provider the smaller; cwl_eval reads a run file's
lines in their order without sorting, and it is given the documents sorted by score with ties
in ``run.tsv`` order (Python's stable sort; ir-measures' own cwl provider sorts the same way).
``main`` also prints where ranx (if installed) differs from these values.

tests/test_metrics_oracles.py compares the suite's metrics with these values. The fixtures are
committed (rather than ir-measures made a test dependency) so that the test extra stays small
and the check needs neither perl nor pytrec-eval's binary wheel in CI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

GAINS = {g: 2**g - 1 for g in range(5)}
CUTS = (1, 5, 10, 20)
PERSISTENCE = (0.5, 0.8, 0.95)


def make_run(seed: int = 20240611) -> list[tuple[str, str, int, float]]:
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(60):
        n = int(rng.integers(1, 31))
        labels = rng.choice(5, size=n, p=[0.5, 0.2, 0.15, 0.1, 0.05])
        if q % 12 == 3:
            labels[:] = 0  # a query without a relevant document
        scores = rng.permutation(np.arange(n) + 0.25 * rng.random()) / 7.0  # distinct
        rows += [(str(100 + q), f"d{q:02d}_{j:02d}", int(y), round(float(s), 9)) for j, (y, s) in enumerate(zip(labels, scores))]
    return rows + make_tied_run()


def make_tied_run(seed: int = 43) -> list[tuple[str, str, int, float]]:
    """Queries 200-213: tied scores (quarter values), docnos in an order unrelated to the file's."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(14):
        n = 30 if q in (0, 1) else int(rng.integers(2, 31))
        labels = rng.choice(5, size=n, p=[0.4, 0.25, 0.15, 0.1, 0.1])
        if q == 5:
            labels[:] = 0  # a query without a relevant document
        if q == 0:
            scores = np.full(n, 0.5)  # one tie group of 30
        else:
            scores = rng.integers(0, 2 if q == 1 else 4, size=n) / 4.0
        numbers = rng.permutation(n)
        rows += [(str(200 + q), f"t{q:02d}_{k:02d}", int(y), float(s)) for k, y, s in zip(numbers, labels, scores)]
    return rows


def expected(rows) -> list[tuple[str, str, float]]:
    import ir_measures
    from cwl.ruler.measures.cwl_rbp import RBPCWLMetric
    from cwl.ruler.ranking import Ranking
    from ir_measures import AP, ERR, RR, P, nDCG

    qrels = [ir_measures.Qrel(q, d, y) for q, d, y, _ in rows]
    run = [ir_measures.ScoredDoc(q, d, s) for q, d, _, s in rows]
    measures = [P(rel=1) @ k for k in CUTS] + [AP(rel=1)] + [AP(rel=1) @ k for k in CUTS] + [RR(rel=1)]
    measures += [nDCG(gains=GAINS) @ k for k in CUTS]
    out = [(m.query_id, str(m.measure), float(m.value))
           for m in ir_measures.providers.registry["pytrec_eval"].iter_calc(measures, qrels, run)]
    rr_cut = [RR(rel=1) @ k for k in CUTS]
    out += [(m.query_id, str(m.measure), float(m.value))
            for m in ir_measures.providers.registry["msmarco"].iter_calc(rr_cut, qrels, run)]
    out += [(m.query_id, str(m.measure), float(m.value))
            for m in ir_measures.providers.registry["gdeval"].iter_calc([ERR @ k for k in CUTS], qrels, run)]
    for qid in sorted({q for q, *_ in rows}):
        docs = sorted((r for r in rows if r[0] == qid), key=lambda r: -r[3])
        gains = [1.0 if y >= 1 else 0.0 for _, _, y, _ in docs]
        for p in PERSISTENCE:
            metric = RBPCWLMetric(p)
            metric.residuals = True
            value = metric.measure(Ranking(qid, gains, [1.0] * len(gains)))
            out += [(qid, f"RBP(p={p})", float(value)), (qid, f"RBP_residual(p={p})", float(metric.residual_expected_utility))]
    return sorted(out)


RANX_NAMES = {"P": "precision@{k}", "AP": "map", "AP@": "map@{k}", "RR": "mrr", "RR@": "mrr@{k}",
              "nDCG@": "ndcg_burges@{k}", "RBP": "rbp.{p}"}


def ranx_differences(rows, values) -> list[str]:
    """Where ranx (its per-query values, ``return_mean=False``) differs from ``values`` by > 1e-9.

    One line per ir-measures name with a ranx counterpart: queries that differ among those with
    distinct scores (100-159) and among those with tied scores (200-213), and the largest gap.
    """
    import re

    from ranx import Qrels, Run, evaluate

    qids = sorted({q for q, *_ in rows})
    qrels = Qrels({q: {d: y for q2, d, y, _ in rows if q2 == q} for q in qids})
    run = Run({q: {d: s for q2, d, _, s in rows if q2 == q} for q in qids})
    by_measure: dict[str, dict[str, float]] = {}
    for q, m, v in values:
        by_measure.setdefault(m, {})[q] = v
    lines = []
    for measure, want in sorted(by_measure.items()):
        cut = re.search(r"@(\d+)$", measure)
        base = measure.split("(")[0].split("@")[0] + ("@" if cut and not measure.startswith("P") else "")
        if base not in RANX_NAMES:
            continue
        p = re.search(r"p=0\.([0-9]+)", measure)
        name = RANX_NAMES[base].format(k=cut.group(1) if cut else "", p=p.group(1) if p else "")
        got = dict(zip(qids, evaluate(qrels, run, name, return_mean=False)))
        gaps = {q: abs(float(got[q]) - want[q]) for q in qids}
        off = [q for q in qids if gaps[q] > 1e-9]
        lines.append(f"{measure} (ranx {name}): {sum(q < '200' for q in off)} of 60 distinct-score queries, "
                     f"{sum(q >= '200' for q in off)} of 14 tied differ; largest gap {max(gaps.values()):.3g}")
    return lines


def main(out_dir: str = "tests/fixtures/ir_measures") -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = make_run()
    values = expected(rows)
    (out / "run.tsv").write_text("".join(f"{q}\t{d}\t{y}\t{s!r}\n" for q, d, y, s in rows))
    (out / "expected.tsv").write_text("".join(f"{q}\t{m}\t{v!r}\n" for q, m, v in values))
    print(f"{out}: {len(rows)} documents")
    try:
        print("\n".join(ranx_differences(rows, values)))
    except ImportError:
        print("ranx is not installed: no comparison")


if __name__ == "__main__":
    main(*sys.argv[1:])
