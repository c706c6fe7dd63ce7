r"""``ltr-bench perf train``: training throughput on ``mslr-like`` data, and the data pipeline's share.

Data: ``bench.data.generate_synthetic(preset="mslr-like")`` with ``--queries`` training
queries (the preset's list-length distribution, 136 features; the real Fold1 has 18,919),
z-scored with its own statistics. Model: PiRank's MLP for this table,
136-256-256-128-64-1 with batch norm and dropout 0.3; Adam; batches of ``--batch`` lists
of ``L_train = --list-size``. Each loss of ``--losses`` (default RankNet, NeuralNDCG,
PiRank-NDCG at tau 5) runs the exact step of :mod:`bench.training.loop`: ``epoch_lists`` +
``gather`` for the data, then forward, loss, backward, gradient clipping, Adam step.

Timing: 3 warm-up steps per loss, then 5 interleaved rounds of ``--steps / 5`` steps (a
shared machine's load changes then hit every loss alike); per loss the median round is
reported: queries/s = ``batch / step time``, step time, the data pipeline's time per step
(list sampling of the epoch amortised over its steps + ``gather``; ``perf_counter``
timers, CUDA synchronised) and its share of the step, and the loss's own forward + backward
on the same batch (outside the step). GBDT (LightGBM ``lambdarank``, XGBoost
``rank:ndcg``, the suite's default parameters, ``--trees`` rounds, no early stopping) is
timed on the same training split when ``--trees > 0``.

Target (printed, never asserted): the data pipeline takes < 10 % of the step time.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from bench.atomic import write_text
from bench.config.run import resolve_model
from bench.data import generate_synthetic
from bench.errors import UsageError
from bench.losses import get, info
from bench.models import build_model
from bench.perf.common import SuiteResult, Target, fmt, loadavg, machine_line, md_table, now_utc, sync, targets_section
from bench.training.batches import epoch_lists, gather, split_to_tensors
from bench.training.device import resolve_device

HIDDEN = [256, 256, 128, 64]
LOSS_PARAMS = {"pirank_ndcg": {"tau": 5.0}}
ROUNDS = 5


def mslr_like_split(n_queries: int, seed: int, split: str = "train", stats=None):
    """One ``mslr-like`` split as a prepared-split-like namespace (z-scored features)."""
    X, y, qid = generate_synthetic(n_queries, preset="mslr-like", seed=seed, task_seed=0, split=split)
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    offsets = np.r_[starts, qid.size].astype(np.int64)
    mean, std = stats if stats is not None else (X.mean(0), X.std(0) + 1e-6)
    X = ((X - mean) / std).astype(np.float32)
    ns = SimpleNamespace(features=X, labels=y, offsets=offsets, qids=qid[starts].astype(np.int64))
    return ns, (mean, std)


class LossBench:
    """One loss's training state; :meth:`run` times ``n`` steps (data vs. step vs. loss alone)."""

    def __init__(self, name: str, params: dict, data, batch: int, list_size: int, device: torch.device) -> None:
        torch.manual_seed(0)
        self.data, self.batch, self.device = data, batch, device
        self.model = build_model(resolve_model({"type": "mlp", "hidden": HIDDEN}), data.features.shape[1]).to(device)
        self.loss_fn = get(name, **params)
        params_ = list(self.model.parameters())
        if isinstance(self.loss_fn, torch.nn.Module):
            self.loss_fn = self.loss_fn.to(device)
            params_ += list(self.loss_fn.parameters())
        self.opt = torch.optim.Adam(params_, lr=1e-3)
        gen = torch.Generator().manual_seed(0)
        sync(device)
        t0 = time.perf_counter()
        self.lists, self.order = epoch_lists(data, list_size, gen)
        sync(device)
        self.t_lists = time.perf_counter() - t0
        self.per_epoch = math.ceil(data.n_queries / batch)
        self.b = 0
        self.model.train()

    def run(self, n: int) -> dict[str, float]:
        """Mean seconds per step: ``step`` (data + compute), ``data``, ``loss`` (alone)."""
        t_data = t_step = t_loss = 0.0
        for _ in range(n):
            b = self.b % self.per_epoch
            self.b += 1
            sync(self.device)
            t0 = time.perf_counter()
            rows = self.lists[self.order[b * self.batch: (b + 1) * self.batch]]
            x, y, mask = gather(self.data, rows, self.device)
            sync(self.device)
            t1 = time.perf_counter()
            loss = self.loss_fn(self.model(x, mask), y, mask)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), math.inf)
            self.opt.step()
            float(loss.detach())  # the trainer reads the loss every step (NaN guard)
            sync(self.device)
            t2 = time.perf_counter()
            s = torch.randn(mask.shape, device=self.device, requires_grad=True)  # the loss alone, same batch
            self.loss_fn(s, y, mask).backward()
            sync(self.device)
            t3 = time.perf_counter()
            t_data, t_step, t_loss = t_data + t1 - t0, t_step + t2 - t1, t_loss + t3 - t2
        data = t_data / n + self.t_lists / self.per_epoch  # list sampling amortised per step
        return {"step": data + t_step / n, "data": data, "loss": t_loss / n}


def bench_gbdt(train, trees: int, threads: int) -> dict[str, float]:
    """Seconds to build ``trees`` rounds of LightGBM lambdarank and XGBoost rank:ndcg."""
    import lightgbm as lgb
    import xgboost as xgb

    from bench.config.settings import gbdt_library

    groups = np.diff(train.offsets)
    n_threads = threads or torch.get_num_threads()
    out = {}
    t0 = time.perf_counter()
    dtrain = lgb.Dataset(train.features, label=train.labels, group=groups)
    lgb.train({"objective": "lambdarank", "metric": "None", "seed": 0, "verbosity": -1, **gbdt_library("lightgbm")[1],
               "num_threads": n_threads}, dtrain, num_boost_round=trees)
    out["LightGBM lambdarank"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    dm = xgb.DMatrix(train.features, label=train.labels)
    dm.set_group(groups)
    xgb.train({"objective": "rank:ndcg", "seed": 0, "disable_default_eval_metric": 1, **gbdt_library("xgboost")[1],
               "nthread": n_threads}, dm, trees)
    out["XGBoost rank:ndcg"] = time.perf_counter() - t0
    return out


def measure_losses(names: list[str], data, batch: int, list_size: int, steps: int,
                   device: torch.device) -> dict[str, dict[str, float]]:
    """Median-round seconds per step of every loss (interleaved rounds, see module doc)."""
    benches = {name: LossBench(name, LOSS_PARAMS.get(name, {}), data, batch, list_size, device) for name in names}
    for b in benches.values():
        b.run(3)  # warm-up
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in benches}
    per_round = max(1, steps // ROUNDS)
    for _ in range(ROUNDS):
        for name, b in benches.items():
            rounds[name].append(b.run(per_round))
    return {name: {k: float(np.median([r[k] for r in rs])) for k in ("step", "data", "loss")}
            for name, rs in rounds.items()}


def report_train(args: argparse.Namespace) -> SuiteResult:
    device = resolve_device(args.device, on_missing_cuda=None)
    if min(args.queries, args.steps, args.batch, args.list_size) < 1 or args.trees < 0:
        raise UsageError("--queries, --steps, --batch and --list-size must be >= 1, --trees >= 0")
    names = [n.strip() for n in args.losses.split(",") if n.strip()]
    for name in names:
        try:
            info(name)
        except ValueError as exc:
            raise UsageError(f"--losses: {exc}") from exc
    if args.threads:
        torch.set_num_threads(args.threads)
    load = loadavg()
    t0 = time.perf_counter()
    train, _ = mslr_like_split(args.queries, 1)
    t_gen = time.perf_counter() - t0
    data = split_to_tensors(train, device)
    results = measure_losses(names, data, args.batch, args.list_size, args.steps, device)
    base = results[names[0]]["step"]
    rows, targets = [], []
    for name, r in results.items():
        share = r["data"] / r["step"]
        rows.append([name, f"{args.batch / r['step']:.1f}", fmt(1e3 * r["step"]), fmt(1e3 * r["data"]),
                     f"{100 * share:.1f}%", fmt(1e3 * r["loss"]), f"{base / r['step']:.2f}x"])
        targets.append(Target(f"data pipeline share of a {name} training step", f"{100 * share:.1f}% "
                              f"({1e3 * r['data']:.2f} of {1e3 * r['step']:.1f} ms)", "< 10%", share < 0.10))
        print(f"{name}: {args.batch / r['step']:.1f} queries/s, {1e3 * r['step']:.1f} ms/step, data {100 * share:.1f}%",
              flush=True)
    gbdt_rows = []
    if args.trees:
        for lib, secs in bench_gbdt(train, args.trees, args.threads).items():
            gbdt_rows.append([lib, str(args.trees), fmt(secs), fmt(1e3 * secs / args.trees)])
            print(f"{lib}: {secs:.2f} s for {args.trees} trees", flush=True)
    lines = [
        "# Training throughput (mslr-like synthetic data)",
        "",
        f"- generated {now_utc()} by `ltr-bench perf train`",
        f"- {machine_line(device)}; load average at start {load}, at end {loadavg()} (1/5/15 min)",
        f"- data: generate_synthetic(preset='mslr-like'), {args.queries} training queries, {train.labels.size} "
        f"documents, 136 features (generated in {t_gen:.1f} s), z-scored",
        f"- MLP 136-{'-'.join(map(str, HIDDEN))}-1 (batch norm, dropout 0.3), Adam, {args.batch} lists of L_train = "
        f"{args.list_size} per step; the step of bench.training (epoch_lists + gather, forward, loss, backward, clip, step)",
        f"- 3 warm-up steps, then {ROUNDS} interleaved rounds of {max(1, args.steps // ROUNDS)} steps per loss; "
        "median round shown. Data pipeline = gather per step + the epoch's list sampling amortised over its steps "
        "(perf_counter timers). Loss alone = forward + backward of the loss on the same batch with leaf scores",
        "",
        md_table(["loss", "queries/s", "ms / step", "data pipeline ms / step", "data share", "loss alone ms",
                  f"throughput vs {names[0]}"], rows),
    ]
    if gbdt_rows:
        lines += ["", f"GBDT on the same training split ({args.threads or torch.get_num_threads()} threads, "
                      "suite defaults, no early stopping; Dataset/DMatrix construction included):", "",
                  md_table(["library", "trees", "seconds", "ms / tree"], gbdt_rows)]
    text = "\n".join(lines + targets_section(targets)) + "\n"
    write_text(args.out, text)
    print(text)
    print(f"wrote {args.out}")
    return SuiteResult("train", text, targets, 0, [Path(args.out)])


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--queries", type=int, default=2000, help="training queries generated (Fold1: 18919)")
    p.add_argument("--steps", type=int, default=30, help="timed steps per loss")
    p.add_argument("--batch", type=int, default=16, help="lists per step")
    p.add_argument("--list-size", type=int, default=200, help="L_train")
    p.add_argument("--losses", default="ranknet,neuralndcg,pirank_ndcg")
    p.add_argument("--trees", type=int, default=50, help="GBDT rounds (0: skip GBDT)")
    p.add_argument("--threads", type=int, default=0, help="torch/LightGBM/XGBoost threads (0: torch's current)")
    p.add_argument("--out", type=Path, default=Path("reports/perf/train.md"))


__all__ = ["LossBench", "add_train_arguments", "bench_gbdt", "measure_losses", "mslr_like_split", "report_train"]
