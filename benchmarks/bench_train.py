"""Training throughput on ``mslr-like`` synthetic data: neural losses and GBDT baselines.

Run: ``python benchmarks/bench_train.py [--queries 2000] [--steps 30] [--trees 50] [--threads N]``.

Data: ``bench.data.generate_synthetic(preset="mslr-like")`` with ``--queries`` training
queries (the preset's list-length distribution, 136 features; the full Fold1 has 18,919,
use ``--queries 18919`` if memory and patience allow) and a vali split a quarter that size,
z-scored with train statistics. The MLP is PiRank's shape for this table,
136-256-256-128-64-1 with batch norm and dropout 0.3, batches of 16 lists of
``L_train = 200``, Adam; each loss runs ``--steps`` timed steps after 3 warm-up steps, with
the exact code path of :mod:`bench.train` (``epoch_lists`` + ``gather`` for the data,
then forward, loss, backward, clip, step). The losses run in 5 interleaved rounds of
``--steps / 5`` steps and the median round is printed (a shared machine's load then hits
every loss alike): queries/s, ms/step, the loss's own forward+backward on the same batch,
and the share of step time spent in the data pipeline (list sampling amortised per step +
gather). GBDT: LightGBM ``lambdarank`` and XGBoost
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


class LossBench:
    """One loss's training state; :meth:`run` times ``n`` steps (data vs. compute vs. loss)."""

    def __init__(self, name: str, params: dict, data, batch: int, list_size: int) -> None:
        torch.manual_seed(0)
        self.data, self.batch = data, batch
        self.model = build_model({"type": "mlp", "hidden": [256, 256, 128, 64]}, data.features.shape[1])
        self.loss_fn = get(name, **params)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        self.lists, self.order = epoch_lists(data, list_size, gen)
        self.t_lists = time.perf_counter() - t0
        self.per_epoch = math.ceil(data.n_queries / batch)
        self.b = 0
        self.model.train()

    def run(self, n: int) -> dict[str, float]:
        t_data = t_step = t_loss = 0.0
        for _ in range(n):
            b = self.b % self.per_epoch
            self.b += 1
            t0 = time.perf_counter()
            rows = self.lists[self.order[b * self.batch : (b + 1) * self.batch]]
            x, y, mask = gather(self.data, rows, torch.device("cpu"))
            t1 = time.perf_counter()
            loss = self.loss_fn(self.model(x, mask), y, mask)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), math.inf)
            self.opt.step()
            float(loss.detach())
            t2 = time.perf_counter()
            s = torch.randn(mask.shape, requires_grad=True)  # the loss alone, same batch
            self.loss_fn(s, y, mask).backward()
            t3 = time.perf_counter()
            t_data, t_step, t_loss = t_data + t1 - t0, t_step + t2 - t1, t_loss + t3 - t2
        data = t_data / n + self.t_lists / self.per_epoch  # list sampling amortised per step
        step = data + t_step / n
        return {"step": step, "data": data, "loss": t_loss / n}


def bench_gbdt(train, trees: int, threads: int) -> dict[str, float]:
    import lightgbm as lgb
    import xgboost as xgb

    groups = np.diff(train.offsets)
    out = {}
    t0 = time.perf_counter()
    dtrain = lgb.Dataset(train.features, label=train.labels, group=groups)
    lgb.train({"objective": "lambdarank", "metric": "None", "seed": 0, **LGB_DEFAULTS, "num_threads": threads}, dtrain, num_boost_round=trees)
    out["lightgbm lambdarank"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    dm = xgb.DMatrix(train.features, label=train.labels)
    dm.set_group(groups)
    xgb.train({"objective": "rank:ndcg", "seed": 0, "disable_default_eval_metric": 1, **XGB_DEFAULTS, "nthread": threads}, dm, trees)
    out["xgboost rank:ndcg"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--trees", type=int, default=50)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--list-size", type=int, default=200)
    ap.add_argument("--threads", type=int, default=0, help="torch/LightGBM/XGBoost threads (0: library default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    train, _ = _split(args.queries, 1, "train")
    print(
        f"mslr-like train: {args.queries} queries, {train.labels.size} docs, 136 features "
        f"(generated in {time.perf_counter() - t0:.1f}s); torch threads {torch.get_num_threads()}"
    )
    print(f"MLP 136-256-256-128-64-1, batch {args.batch} lists, L_train {args.list_size}, {args.steps} timed steps")
    data = split_to_tensors(train, torch.device("cpu"))
    benches = {
        name: LossBench(name, params, data, args.batch, args.list_size)
        for name, params in (("ranknet", {}), ("neuralndcg", {}), ("pirank_ndcg", {"tau": 5.0}))
    }
    for b in benches.values():
        b.run(3)  # warm-up
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in benches}
    per_round = max(1, args.steps // 5)
    for _ in range(5):  # interleaved rounds: load changes on a shared box hit every loss alike
        for name, b in benches.items():
            rounds[name].append(b.run(per_round))
    results = {}
    for name, rs in rounds.items():
        med = {k: float(np.median([r[k] for r in rs])) for k in ("step", "data", "loss")}
        results[name] = med
        print(
            f"  {name:12s} {args.batch / med['step']:8.1f} queries/s  {1e3 * med['step']:7.1f} ms/step "
            f"(loss fwd+bwd alone {1e3 * med['loss']:6.1f} ms)  data pipeline {100 * med['data'] / med['step']:4.1f}%"
        )
    base = results["ranknet"]["step"]
    print("  throughput relative to ranknet: " + ", ".join(f"{k} {base / v['step']:.2f}x" for k, v in results.items()))
    times = bench_gbdt(train, args.trees, args.threads)
    for k, v in times.items():
        print(f"  {k:20s} {v:7.2f}s for {args.trees} trees ({1e3 * v / args.trees:.0f} ms/tree)")


if __name__ == "__main__":
    main()
