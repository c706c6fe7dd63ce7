"""Helpers shared by the tests (no tests here): the repository root and a tiny prepared fold.

``tests/conftest.py`` puts this directory on ``sys.path``, so a test module says
``from helpers import ROOT, make_prepared``. ``make_prepared`` builds a tiny synthetic fold
through the real ``prepare`` path, so the trainers read exactly what the workflow gives them;
``make_letor_fold`` does the same with the LETOR-format fixture.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TINY_OPTIONS = {
    "n_queries": 48,
    "vali_queries": 16,
    "test_queries": 16,
    "list_length": [2, 25],
    "n_features": 8,
    "normalize": "zscore",
    "seed": 0,
}


def make_prepared(out: Path, **options) -> Path:
    """Prepare a tiny synthetic fold into ``out`` (48/16/16 queries, 2-25 docs, 8 features)."""
    from bench.data import prepare_fold

    prepare_fold("synthetic", "fold1", out, {**TINY_OPTIONS, **options}, log=lambda *a, **k: None)
    return out


def merge_train_and_vali(prepared: Path, out: Path) -> Path:
    """A copy of the prepared fold ``prepared`` whose training split is its train + validation
    (validation and test kept, the same meta: the same dataset and fold names, hence the same
    seeds): the fold a refit on train + validation trains on (``train.refit``'s oracle)."""
    import numpy as np

    from bench.data import load_prepared
    from bench.data.prepared import ARRAYS, SPLITS, fingerprint, save_prepared

    fold = load_prepared(prepared)
    arrays = {s: {a: np.asarray(getattr(fold.splits[s], a)) for a in ARRAYS} for s in SPLITS}
    train, vali = arrays["train"], arrays["vali"]
    arrays["train"] = {
        "features": np.concatenate([train["features"], vali["features"]]),
        "labels": np.concatenate([train["labels"], vali["labels"]]),
        "qids": np.concatenate([train["qids"], vali["qids"]]),
        "offsets": np.concatenate([train["offsets"], vali["offsets"][1:] + train["offsets"][-1]]),
    }
    sizes = {"n_docs": arrays["train"]["labels"].size, "n_queries": arrays["train"]["qids"].size}
    meta = {**fold.meta, "fingerprint": fingerprint(arrays)}
    meta["splits"] = {**meta["splits"], "train": {**meta["splits"]["train"], **sizes}}
    save_prepared(out, arrays, meta)
    return out


def make_letor_fold(tmp: Path) -> Path:
    """The LETOR 4.0-format fixture (tests/fixtures/letor: CRLF, comment tails, queries without
    relevant documents, short lists) prepared under ``tmp`` as a file-based fold: train = test =
    its file, half of the training queries moved to vali."""
    import shutil

    from bench.data import prepare_fold

    src = tmp / "raw"
    src.mkdir(parents=True)  # a copy: prepare writes checksum sidecars beside its sources
    shutil.copy(ROOT / "tests" / "fixtures" / "letor" / "random.test.txt", src / "random.test.txt")
    out = tmp / "prepared" / "letor" / "Fold1"
    prepare_fold("letor-fixture", "Fold1", out, {"vali_fraction": 0.5},
                 files={"train": src / "random.test.txt", "test": src / "random.test.txt"}, log=lambda m: None)
    return out


def copy_checkout(dest: Path) -> Path:
    """The workflow as a fresh clone has it (committed frozen baselines, no results) at ``dest``."""
    ignore = shutil.ignore_patterns(".git", ".snakemake", "results", "reports", "*.egg-info", "__pycache__",
                                    ".pytest_cache", ".venv")
    shutil.copytree(ROOT, dest, ignore=ignore)
    shutil.copytree(ROOT / "results" / "frozen", dest / "results" / "frozen")
    return dest


def md_tables(text: str) -> list[list[list[str]]]:
    """Every markdown table of ``text`` as rows of stripped cells (header first); each table is
    checked to have a ``---`` separator row and rows as wide as its header."""
    tables, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cur.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
        elif cur:
            tables.append(cur)
            cur = []
    for t in tables:
        assert all(set(c) == {"-"} for c in t[1]), t[1]
        assert all(len(r) == len(t[0]) for r in t), t
    return tables


def exact_pl_expected_ndcg(scores, labels, k=None):
    """``E_{y ~ PL(scores)}[NDCG@k(y)]`` of one list by enumerating its ``n!`` rankings (n <= 7).

    ``scores``: a 1-D float64 tensor (autograd gives the exact gradient); ``labels``: 1-D.
    ``P(y) = prod_t exp(s_{y_t}) / sum_{j not in y_<t} exp(s_j)``; gain ``2^y - 1``, discount
    ``1/log2(1 + rank)``, ``maxDCG@k`` of the labels sorted descending. The independent oracle
    of the Plackett-Luce losses (tests/losses/test_plackett_luce.py, test_gumbel.py).
    """
    import itertools
    import math

    import torch

    n = scores.shape[0]
    cut = n if k is None else min(k, n)
    gains = [2.0 ** float(v) - 1.0 for v in labels]
    ideal = sum(g / math.log2(2 + r) for r, g in enumerate(sorted(gains, reverse=True)[:cut]))
    total = scores.new_zeros(())
    for perm in itertools.permutations(range(n)):
        log_p = scores.new_zeros(())
        for t in range(n):
            rest = torch.stack([scores[j] for j in perm[t:]])
            log_p = log_p + scores[perm[t]] - torch.logsumexp(rest, 0)
        dcg = sum(gains[perm[r]] / math.log2(2 + r) for r in range(cut))
        total = total + torch.exp(log_p) * dcg / ideal
    return total


TOY_METRICS = ["ndcg@5", "ndcg@10", "mrr", "arp", "opa"]


def toy_neural_config(extra_method: str, **train) -> dict:
    """A run config for two-epoch training on :func:`make_prepared`'s toy fold: RankNet,
    ``extra_method`` (its loss of the same name) and a context-aware ListNet (``cae``);
    ``train`` overrides the train section."""
    return {
        "model": {"type": "mlp", "hidden": [16, 8], "dropout": 0.1},
        "train": {"epochs": 2, "batch_size": 8, "list_size": 12, "eval_batch_size": 7, **train},
        "metrics": {"names": TOY_METRICS, "empty_query": "one", "ties": "stable"},
        "methods": {
            "ranknet": {"loss": "ranknet"},
            extra_method: {"loss": extra_method},
            "cae": {"loss": "listnet", "model": {"type": "context_aware", "input_proj": 8, "hidden": 16}},
        },
    }
