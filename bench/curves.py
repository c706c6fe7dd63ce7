r"""Loss curves on the papers' toy lists: the table the ``neuralndcg_curves`` figure draws.

NeuralNDCG Figs. 1-2 plot NDCG and NeuralNDCG (with and without Sinkhorn scaling, several
temperatures) of a fixed toy list as one score ``x`` varies. :func:`neuralndcg_curve_data`
computes them with the registered loss and :func:`bench.metrics.evaluate`;
``ltr-bench loss-curves`` writes the table (parquet: columns ``panel, x, curve, value``)
that ``ltr-bench figure neuralndcg_curves --input`` renders, so rendering only reads a
computed table.

NeuralNDCG Table 1 sorts the labels of a toy list by NeuralSort's relaxed sort matrix at
several temperatures, :math:`\hat g = \hat P_{\mathrm{sort}(s)}(\tau)\, y`, beside the exact
sort (the limit :math:`\tau \to 0`). :func:`neuralsort_toy_data` computes it with the
suite's own :func:`bench.losses.neuralsort.neuralsort` (float64); ``ltr-bench toy-sort``
writes the table (columns ``tau, rank, value``; ``tau = 0`` is the exact sort) that
``ltr-bench computed-table neuralndcg_table1`` renders.

CLI::

    ltr-bench loss-curves --taus 0.1 0.5 1 5 --points 321 --out results/figures/neuralndcg_curves.parquet
    ltr-bench toy-sort --taus 0.01 0.1 1 --out results/tables/neuralsort_toy.parquet
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.errors import UsageError
from bench.results import write_frame

COLUMNS = ("panel", "x", "curve", "value")
# The papers' toy lists: (labels, scores with the varied score last, x range)
TOY_FIG1 = ([2.0, 1.0, 0.0, 0.0, 0.0], [4.0, 1.0, 0.0, 0.0], (-2.0, 6.0))
TOY_FIG2 = ([1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0], (-1.0, 7.0))
# NeuralNDCG Table 1's toy list: ground truth y and predicted scores s (the table's caption)
TOY_TABLE1 = ([4.0, 2.0, 1.0, 0.0, 4.0, 3.0], [0.5, 0.2, 0.1, 0.01, 0.65, 0.3])
TOY_SORT_COLUMNS = ("tau", "rank", "value")


def _neuralndcg_values(labels: list[float], scores: np.ndarray, tau: float, sinkhorn: bool) -> np.ndarray:
    """NeuralNDCG@max of each row of ``scores`` (one call of the registered loss per list)."""
    import torch

    from bench.losses import get

    loss = get("neuralndcg")
    y = torch.tensor([labels], dtype=torch.float64)
    mask = torch.ones_like(y, dtype=torch.bool)
    kwargs = {"tau": tau, "k": None, "max_iter": 30 if sinkhorn else 0}
    rows = torch.from_numpy(np.ascontiguousarray(scores, dtype=np.float64))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 5-item lists: thread wake-ups would cost 1000x the arithmetic
    try:
        with torch.no_grad():
            out = [-float(loss(row[None, :], y, mask, **kwargs)) for row in rows]
    finally:
        torch.set_num_threads(threads)
    return np.asarray(out)


def _ndcg_values(labels: list[float], scores: np.ndarray) -> np.ndarray:
    from bench.metrics import evaluate

    n, length = scores.shape
    offsets = np.arange(n + 1, dtype=np.int64) * length
    frame = evaluate(scores.ravel().astype(np.float64), np.tile(np.asarray(labels, dtype=np.float64), n), offsets,
                     ["ndcg@max"])
    return frame["ndcg@max"].to_numpy()


def neuralndcg_curve_data(taus: list[float], points: int = 401) -> pd.DataFrame:
    """Columns panel, x, curve, value: NDCG and NeuralNDCG of the toy lists as ``x`` varies.

    Panel ``fig1`` is NeuralNDCG Fig. 1 (tau = 1, with and without Sinkhorn scaling),
    panel ``fig2`` is Fig. 2 (every tau in ``taus``, with Sinkhorn scaling).
    """
    rows = []
    for panel, (labels, fixed, (lo, hi)), variants in (
        ("fig1", TOY_FIG1, [(1.0, True), (1.0, False)]),
        ("fig2", TOY_FIG2, [(t, True) for t in taus]),
    ):
        xs = np.linspace(lo, hi, points)
        scores = np.column_stack([np.tile(fixed, (points, 1)), xs])
        rows.append(pd.DataFrame({"panel": panel, "x": xs, "curve": "NDCG", "value": _ndcg_values(labels, scores)}))
        for tau, sink in variants:
            name = f"NeuralNDCG tau={tau:g}" + ("" if sink else " (no Sinkhorn)")
            if panel == "fig1":
                name = "NeuralNDCG" + (" with Sinkhorn" if sink else " without Sinkhorn") + f" (tau={tau:g})"
            vals = _neuralndcg_values(labels, scores, tau, sink)
            rows.append(pd.DataFrame({"panel": panel, "x": xs, "curve": name, "value": vals}))
    return pd.concat(rows, ignore_index=True)


def neuralsort_toy_data(taus: list[float]) -> pd.DataFrame:
    r"""Columns tau, rank, value: the toy labels sorted exactly (``tau = 0``) and by
    :math:`\hat P(\tau) y` for each ``tau`` (rank 1 = first row of :math:`\hat P`).

    >>> frame = neuralsort_toy_data([1.0])
    >>> frame[frame.tau == 0].value.tolist()
    [4.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    >>> [round(v, 4) for v in frame[frame.tau == 1.0].value]
    [3.3893, 2.982, 2.4965, 2.0191, 1.6097, 1.2815]
    """
    import torch

    from bench.losses.neuralsort import neuralsort

    labels, scores = TOY_TABLE1
    y = torch.tensor(labels, dtype=torch.float64)
    s = torch.tensor([scores], dtype=torch.float64)
    mask = torch.ones_like(s, dtype=torch.bool)
    exact = y[torch.argsort(s[0], descending=True, stable=True)]
    rows = [(0.0, r + 1, float(v)) for r, v in enumerate(exact)]
    for tau in taus:
        sorted_gains = (neuralsort(s, mask, tau=float(tau))[0] @ y).tolist()
        rows += [(float(tau), r + 1, float(v)) for r, v in enumerate(sorted_gains)]
    return pd.DataFrame(rows, columns=list(TOY_SORT_COLUMNS))


def _cli_toy(args) -> int:
    if not args.taus or min(args.taus) <= 0:
        raise UsageError("--taus must be positive numbers")
    frame = neuralsort_toy_data(list(args.taus))
    write_frame(frame, args.out)
    print(f"{args.out}: {len(frame)} rows ({frame['tau'].nunique()} temperatures, exact sort as tau = 0)")
    return 0


def _cli(args) -> int:
    if args.points < 2 or not args.taus or min(args.taus) <= 0:
        raise UsageError("--points must be >= 2 and --taus positive numbers")
    frame = neuralndcg_curve_data(list(args.taus), args.points)
    write_frame(frame, args.out)
    print(f"{args.out}: {len(frame)} rows ({frame['curve'].nunique()} curves)")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench loss-curves`` and ``ltr-bench toy-sort``."""
    p = subparsers.add_parser("loss-curves", help="NDCG vs NeuralNDCG on the papers' toy lists, as a table")
    p.add_argument("--taus", type=float, nargs="+", default=[0.1, 1.0, 5.0], help="temperatures of Fig. 2")
    p.add_argument("--points", type=int, default=401, help="values of the varied score x")
    p.add_argument("--out", required=True, help="output parquet (panel, x, curve, value)")
    p.set_defaults(func=_cli)
    t = subparsers.add_parser("toy-sort", help="NeuralSort's relaxed sort of NeuralNDCG Table 1's toy list, as a table")
    t.add_argument("--taus", type=float, nargs="+", default=[0.01, 0.1, 1.0], help="temperatures")
    t.add_argument("--out", required=True, help="output parquet (tau, rank, value; tau = 0: exact sort)")
    t.set_defaults(func=_cli_toy)
