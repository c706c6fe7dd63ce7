"""Training throughput on ``mslr-like`` synthetic data: neural losses and GBDT baselines.

Run: ``python benchmarks/bench_train.py [--queries 2000] [--steps 30] [--trees 50]``.

Data: ``bench.data.generate_synthetic(preset="mslr-like")`` with ``--queries`` training
queries (the preset's list-length distribution, 136 features; the full Fold1 has 18,919,
use ``--queries 18919`` if memory and patience allow) and a vali split a quarter that size,
z-scored with train statistics. The MLP is PiRank's shape for this table,
136-256-256-128-64-1 with batch norm and dropout 0.3, batches of 16 lists of
``L_train = 200``, Adam; each loss runs ``--steps`` timed steps after 3 warm-up steps, with
the exact code path of :mod:`bench.train` (``epoch_lists`` + ``gather`` for the data,
then forward, loss, backward, clip, step). Printed per loss: queries/s, and the share of
step time spent in the data pipeline (list sampling amortised per step + gather), timed
side by side in the same process. GBDT: LightGBM ``lambdarank`` and XGBoost
``rank:ndcg`` with the suite's default parameters, capped at ``--trees`` rounds, no early
stopping (training time only, on the same train split).
"""

from __future__ import annotations

import argparse
import math
import time
from types import SimpleNamespace

import numpy as np
import torch

from bench.data import generate_synthetic
from bench.gbdt import LGB_DEFAULTS, XGB_DEFAULTS
from bench.losses import get
from bench.models import build_model
from bench.train import epoch_lists, gather, split_to_tensors


def _split(n_queries: int, seed: int, split: str, stats=None):
    X, y, qid = generate_synthetic(n_queries, preset="mslr-like", seed=seed, task_seed=0, split=split)
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    offsets = np.r_[starts, qid.size].astype(np.int64)
    mean, std = stats if stats is not None else (X.mean(0), X.std(0) + 1e-6)
    X = ((X - mean) / std).astype(np.float32)
    ns = SimpleNamespace(features=X, labels=y, offsets=offsets, qids=qid[starts].astype(np.int64))
    return ns, (mean, std)


def bench_loss(name: str, params: dict, train, steps: int, batch: int, list_size: int) -> dict[str, float]:
    torch.manual_seed(0)
    data = split_to_tensors(train, torch.device("cpu"))
    model = build_model({"type": "mlp", "hidden": [256, 256, 128, 64]}, data.features.shape[1])
    loss_fn = get(name, **params)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    lists, order = epoch_lists(data, list_size, gen)
    t_lists = time.perf_counter() - t0
    per_epoch = math.ceil(data.n_queries / batch)
    t_data = t_model = 0.0
    model.train()
    for b in range(3 + steps):
        t0 = time.perf_counter()
        rows = lists[order[(b % per_epoch) * batch : (b % per_epoch + 1) * batch]]
        x, y, mask = gather(data, rows, torch.device("cpu"))
        t1 = time.perf_counter()
        loss = loss_fn(model(x, mask), y, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)
        opt.step()
        float(loss.detach())
        t2 = time.perf_counter()
        if b >= 3:
            t_data += t1 - t0
            t_model += t2 - t1
    data_per_step = t_data / steps + t_lists / per_epoch  # list sampling amortised per step
    step = data_per_step + t_model / steps
    return {"queries_per_s": batch / step, "ms_per_step": 1e3 * step, "data_share": data_per_step / step}


def bench_gbdt(train, trees: int) -> dict[str, float]:
    import lightgbm as lgb
    import xgboost as xgb

    groups = np.diff(train.offsets)
    out = {}
    t0 = time.perf_counter()
    dtrain = lgb.Dataset(train.features, label=train.labels, group=groups)
    lgb.train({"objective": "lambdarank", "metric": "None", "seed": 0, **LGB_DEFAULTS}, dtrain, num_boost_round=trees)
    out["lightgbm lambdarank"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    dm = xgb.DMatrix(train.features, label=train.labels)
    dm.set_group(groups)
    xgb.train({"objective": "rank:ndcg", "seed": 0, "disable_default_eval_metric": 1, **XGB_DEFAULTS}, dm, trees)
    out["xgboost rank:ndcg"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--list-size", type=int, default=200)
    args = ap.parse_args()
    t0 = time.perf_counter()
    train, _ = _split(args.queries, 1, "train")
    print(
        f"mslr-like train: {args.queries} queries, {train.labels.size} docs, 136 features "
        f"(generated in {time.perf_counter() - t0:.1f}s); torch threads {torch.get_num_threads()}"
    )
    print(f"MLP 136-256-256-128-64-1, batch {args.batch} lists, L_train {args.list_size}, {args.steps} timed steps")
    results = {}
    for name, params in (("ranknet", {}), ("neuralndcg", {}), ("pirank_ndcg", {"tau": 5.0})):
        results[name] = bench_loss(name, params, train, args.steps, args.batch, args.list_size)
        r = results[name]
        print(
            f"  {name:12s} {r['queries_per_s']:8.1f} queries/s  {r['ms_per_step']:7.1f} ms/step  "
            f"data pipeline {100 * r['data_share']:4.1f}% of step time"
        )
    base = results["ranknet"]["queries_per_s"]
    print("  throughput relative to ranknet: " + ", ".join(f"{k} {v['queries_per_s'] / base:.2f}x" for k, v in results.items()))
    times = bench_gbdt(train, args.trees)
    for k, v in times.items():
        print(f"  {k:20s} {v:7.2f}s for {args.trees} trees ({1e3 * v / args.trees:.0f} ms/tree)")


if __name__ == "__main__":
    main()
