r"""``ltr-bench perf train``: the real trainer against the bare step, float32 and bfloat16.

**What is measured.** Documents per second of two ways to train the same model with the
same loss on the same batch shape and threads:

- **the trainer**: :func:`bench.training.loop.train_epoch`, the training pass a run takes
  every epoch (this epoch's lists drawn by ``epoch_lists``, then per step ``gather`` +
  :func:`~bench.training.loop.train_step`: forward, loss, backward, clip, the loss and
  gradient norm read for the divergence check, Adam), called on a
  :class:`~bench.training.loop.Fit` built by :func:`bench.training.loop.setup` -- the real
  code path, not a copy. Validation is not part of a pass (a run times it apart too:
  ``train_seconds`` in run.json);
- **the bare step**: forward, loss, backward, clip, Adam of a second ``Fit`` of the same
  seeded config on batches gathered once before timing (``x [B, L, F]``, labels, mask held
  in memory): the roof the trainer can approach. One pass = one epoch's batches.

Documents are real documents only: a list of a query longer than ``L_train`` counts
``L_train``, padding counts nothing (the MLP scores only real items, ``x[mask]``, in both).
docs/s = real documents of a pass / its ``perf_counter`` seconds (CUDA synchronised).

**Cases.** Losses ``--losses`` (RankNet, NeuralNDCG, ApproxNDCG); two list kinds: ``equal``
(every query exactly ``L_train = --list-size`` documents: no padding) and ``mslr-like``
(``bench.data.generate_synthetic(preset="mslr-like")``: lognormal lengths, mean ~120,
3.2 % empty queries, padded or sub-sampled to ``L_train``); both 136 features z-scored with
the training split's statistics. Precision ``fp32`` and ``bf16``: bfloat16 autocast of the
MLP (``torch.autocast(<device>, dtype=torch.bfloat16)`` via
:func:`bench.training.device.autocast`; on the CPU through ``Fit.amp_on_cpu``, which no
config key sets), the loss in float32, as ``train.amp`` does on CUDA.

**Model.** PiRank's MLP for this table, kept from the earlier suite:
136-256-256-128-64-1 (``--hidden``), batch norm, dropout 0.3, Adam (lr 1e-3), ``--batch``
16 lists of ``L_train = --list-size`` 200 per step, no gradient clipping (the norm is still
computed, ``clip_grad_norm_`` at infinity, as the trainer does with ``grad_clip: null``).
The issue's alternative (136-1024-512-256-1, 64 lists) is ``--hidden 1024,512,256 --batch 64``.

**Timing.** All in :func:`bench.training.device.deterministic` (as a run), ``--threads``
intra-op threads. Every case warms up with 2 steps of each kind, then ``--rounds`` rounds;
in every round each case runs one trainer pass and one bare pass back to back (the order
alternates from round to round), so machine load hits both alike. Reported per case: the
median docs/s of each, and the median over rounds of the per-round ratio trainer / bare.

**Values, bf16 vs fp32.** (a) On the first 4 pre-made batches, the loss of the same
initial model in evaluation mode with and without autocast: the largest relative
difference. (b) Validation NDCG@10 (``--vali-queries`` queries of the kind, the loop's own
validation) of the fp32 and the bf16 trainer after the same training (2 warm-up steps +
``--rounds`` passes from the same seeded init and the same list draws).

**Targets** (printed, never asserted): trainer >= 0.9x the bare step (fp32, every case);
on the CPU, bf16 trainer >= 1.1x fp32 for at least one case (the bar for offering bf16 on
the CPU as an option). GBDT (LightGBM ``lambdarank``, XGBoost ``rank:ndcg``, the suite's
default parameters, ``--trees`` rounds, no early stopping) is timed on the ``mslr-like``
training split when ``--trees > 0``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from bench.atomic import write_text
from bench.data import generate_synthetic
from bench.errors import UsageError
from bench.losses import info
from bench.perf.common import SuiteResult, Target, fmt, loadavg, machine_line, md_table, now_utc, sync, targets_section
from bench.training.batches import gather
from bench.training.device import autocast, deterministic, resolve_device, torch_threads

HIDDEN = (256, 256, 128, 64)
KINDS = ("equal", "mslr-like")
#: the GPU goal's epoch: MSLR-WEB30K Fold1's training queries (the mslr-like preset's train split)
MSLR_TRAIN_QUERIES = 18_919
GPU_EPOCH_GOAL_S = 2.0
PRECISIONS = ("fp32", "bf16")
WARMUP_STEPS = 2
VALUE_BATCHES = 4
TRAINER_GOAL = 0.9
BF16_GOAL = 1.1


# --------------------------------------------------------------------------- data


def _split(X: np.ndarray, y: np.ndarray, qid: np.ndarray, stats=None):
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    offsets = np.r_[starts, qid.size].astype(np.int64)
    mean, std = stats if stats is not None else (X.mean(0), X.std(0) + 1e-6)
    X = ((X - mean) / std).astype(np.float32)
    return SimpleNamespace(features=X, labels=y, offsets=offsets, qids=qid[starts].astype(np.int64)), (mean, std)


def mslr_like_split(n_queries: int, seed: int, split: str = "train", stats=None, list_size: int | None = None):
    """One split as a prepared-split-like namespace (z-scored; ``stats``: the training split's).

    ``list_size`` None: the ``mslr-like`` preset's lengths; else every query has exactly
    ``list_size`` documents (no empty query).
    """
    extra: dict[str, Any] = {} if list_size is None else {"list_length": int(list_size), "empty_fraction": 0.0}
    X, y, qid = generate_synthetic(n_queries, preset="mslr-like", seed=seed, task_seed=0, split=split, **extra)
    return _split(X, y, qid, stats)


def kind_fold(kind: str, n_train: int, n_vali: int, list_size: int) -> SimpleNamespace:
    """A prepared-fold-like namespace (train, vali, test) of one list kind."""
    size = list_size if kind == "equal" else None
    train, stats = mslr_like_split(n_train, 1, "train", list_size=size)
    vali, _ = mslr_like_split(n_vali, 2, "vali", stats, list_size=size)
    return SimpleNamespace(splits={"train": train, "vali": vali, "test": vali}, meta={"n_features": 136},
                           fingerprint=f"perf-train-{kind}")


# --------------------------------------------------------------------------- one case


def run_config(loss: str, *, hidden, batch: int, list_size: int, amp: bool) -> dict[str, Any]:
    """The run config of a case (budgets large: a pass is never cut short)."""
    return {"model": {"type": "mlp", "hidden": list(hidden)},
            "train": {"batch_size": batch, "list_size": list_size, "epochs": None, "max_steps": 10**9, "amp": amp},
            "metrics": ["ndcg@10"], "methods": {loss: {"loss": loss}}}


def make_fit(fold, loss: str, kind: str, *, hidden, batch: int, list_size: int, bf16: bool,
             device: torch.device):
    """``bench.training.loop.setup`` of a case: identical seeded init for every precision."""
    from bench.config.settings import resolve_neural
    from bench.training.loop import setup
    from bench.training.loss import make_loss

    cfg = resolve_neural(run_config(loss, hidden=hidden, batch=batch, list_size=list_size, amp=bf16), loss)
    f = setup(cfg, make_loss(cfg, loss), fold, ("perf-train", kind, loss, 0), device)
    f.amp_on_cpu = bf16
    return f


class Case:
    """One (list kind, loss, precision): a trainer ``Fit`` and a bare-step ``Fit`` with its batches."""

    def __init__(self, fold, kind: str, loss: str, precision: str, *, hidden, batch: int, list_size: int,
                 device: torch.device) -> None:
        from bench.training.batches import epoch_lists
        from bench.training.state import TrainState

        self.kind, self.loss, self.precision, self.device = kind, loss, precision, device
        opts = {"hidden": hidden, "batch": batch, "list_size": list_size, "bf16": precision == "bf16",
                "device": device}
        self.trainer = make_fit(fold, loss, kind, **opts)
        self.state = TrainState()
        self.bare = make_fit(fold, loss, kind, **opts)
        train = self.bare.splits["train"]
        lists, order = epoch_lists(train, self.bare.list_size, self.bare.trainables.list_gen)
        rows = [lists[order[b * batch:(b + 1) * batch]] for b in range(self.bare.budget.steps_per_epoch)]
        self.batches = [gather(train, r, device) for r in rows]
        self.docs = int(sum(int(m.sum()) for _, _, m in self.batches))
        self.slots = int(sum(m.numel() for _, _, m in self.batches))
        self.warm_rows = rows[:WARMUP_STEPS]
        self.rounds: dict[str, list[float]] = {"trainer": [], "bare": []}  # docs/s per round

    def bare_step(self, x, y, mask) -> None:
        """Forward (autocast as the trainer), loss in float32, backward, clip, Adam."""
        f, tr = self.bare, self.bare.trainables
        with autocast(f.device, f.tc["amp"], on_cpu=f.amp_on_cpu):
            s = tr.model(x, mask)
        loss = f.loss_call(s.float(), y, mask, tau=None, gen=tr.loss_gen)
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(f.params, math.inf)
        tr.optimizer.step()

    def warm_up(self) -> None:
        from bench.training.loop import train_step

        self.bare.trainables.model.train()
        for rows, (x, y, mask) in zip(self.warm_rows, self.batches):
            train_step(self.trainer, rows, lr=self.trainer.tc["lr"], tau=None)
            self.bare_step(x, y, mask)
        sync(self.device)

    def time_trainer(self) -> float:
        """One training pass of the real loop; returns docs/s."""
        from bench.training.loop import train_epoch

        done = train_epoch(self.trainer, self.state, None, lr=self.trainer.tc["lr"], tau=None)
        if done.docs != self.docs:
            raise RuntimeError(f"trainer pass trained {done.docs} documents, the bare pass {self.docs}")
        self.rounds["trainer"].append(done.docs / done.seconds)
        return done.seconds

    def time_bare(self) -> float:
        """One bare pass over the pre-made batches; returns seconds."""
        self.bare.trainables.model.train()
        sync(self.device)
        t0 = time.perf_counter()
        for x, y, mask in self.batches:
            self.bare_step(x, y, mask)
        sync(self.device)
        seconds = time.perf_counter() - t0
        self.rounds["bare"].append(self.docs / seconds)
        return seconds

    def docs_per_s(self, who: str) -> float:
        return float(statistics.median(self.rounds[who]))

    def ratio(self) -> float:
        """Median over rounds of trainer docs/s / bare docs/s of the same round."""
        return float(statistics.median(t / b for t, b in zip(self.rounds["trainer"], self.rounds["bare"])))

    def vali_ndcg(self) -> float:
        from bench.training.loop import _validate

        return float(_validate(self.trainer, 0)["ndcg@10"])


@torch.no_grad()
def loss_difference(case: Case) -> float:
    """Largest relative difference |loss_bf16 - loss_fp32| / |loss_fp32| of the bare ``Fit``'s
    initial model (evaluation mode) on its first :data:`VALUE_BATCHES` pre-made batches."""
    f, tr = case.bare, case.bare.trainables
    tr.model.eval()
    worst = 0.0
    for x, y, mask in case.batches[:VALUE_BATCHES]:
        s32 = tr.model(x, mask)
        with autocast(f.device, True, on_cpu=True):
            s16 = tr.model(x, mask)
        l32 = float(f.loss_call(s32.float(), y, mask, tau=None, gen=tr.loss_gen))
        l16 = float(f.loss_call(s16.float(), y, mask, tau=None, gen=tr.loss_gen))
        worst = max(worst, abs(l16 - l32) / max(abs(l32), 1e-12))
    tr.model.train()
    return worst


def measure(cases: list[Case], rounds: int) -> None:
    """Warm up every case, then ``rounds`` interleaved rounds (module docstring)."""
    for c in cases:
        c.warm_up()
    for r in range(rounds):
        for c in cases:
            if r % 2 == 0:
                c.time_trainer()
                c.time_bare()
            else:
                c.time_bare()
                c.time_trainer()
        print(f"round {r + 1}/{rounds}: " + ", ".join(
            f"{c.kind}/{c.loss}/{c.precision} {c.rounds['trainer'][-1] / c.rounds['bare'][-1]:.2f}x" for c in cases),
            flush=True)


# --------------------------------------------------------------------------- GBDT


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


# --------------------------------------------------------------------------- report


def cpu_flags_line() -> str:
    """The CPU's vector and bfloat16 flags (``/proc/cpuinfo``) and torch's CPU capability."""
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    break
    except OSError:
        pass
    vector = [f for f in flags if f.startswith(("avx", "amx", "fma", "f16c")) or "bf16" in f]
    bf16 = [f for f in vector if "bf16" in f]
    return (f"CPU flags (/proc/cpuinfo, vector and bf16): {' '.join(vector) or 'n/a'}; bfloat16 instructions: "
            f"{' '.join(bf16) or 'none (no avx512_bf16 / amx_bf16)'}; torch CPU capability "
            f"{torch.backends.cpu.get_cpu_capability()}")


def _parse(args: argparse.Namespace) -> tuple[list[str], list[str], tuple[int, ...], list[str]]:
    if min(args.queries, args.rounds, args.batch, args.list_size, args.vali_queries) < 1 or args.trees < 0:
        raise UsageError("--queries, --rounds, --batch, --list-size and --vali-queries must be >= 1, --trees >= 0")
    names = [n.strip() for n in args.losses.split(",") if n.strip()]
    for name in names:
        try:
            info(name)
        except ValueError as exc:
            raise UsageError(f"--losses: {exc}") from exc
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if not precisions or "fp32" not in precisions or set(precisions) - set(PRECISIONS):
        raise UsageError(f"--precisions: fp32 and optionally bf16, got {args.precisions!r}")
    try:
        hidden = tuple(int(h) for h in args.hidden.split(",") if h.strip())
    except ValueError as exc:
        raise UsageError(f"--hidden: comma-separated widths, got {args.hidden!r}") from exc
    if not hidden or min(hidden) < 1:
        raise UsageError(f"--hidden: comma-separated widths >= 1, got {args.hidden!r}")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or set(kinds) - set(KINDS):
        raise UsageError(f"--kinds: one or more of {', '.join(KINDS)}, got {args.kinds!r}")
    if args.trees and "mslr-like" not in kinds:
        raise UsageError("--trees > 0 times GBDT on the mslr-like lists: add mslr-like to --kinds or pass --trees 0")
    return names, precisions, hidden, kinds


def report_train(args: argparse.Namespace) -> SuiteResult:
    device = resolve_device(args.device, on_missing_cuda=None)
    names, precisions, hidden, kinds = _parse(args)
    load = loadavg()
    with torch_threads(args.threads or None), deterministic(device):
        t0 = time.perf_counter()
        folds = {k: kind_fold(k, args.queries, args.vali_queries, args.list_size) for k in kinds}
        t_gen = time.perf_counter() - t0
        cases = {(k, n, p): Case(folds[k], k, n, p, hidden=hidden, batch=args.batch, list_size=args.list_size,
                                 device=device)
                 for k in kinds for n in names for p in precisions}
        diffs = {(k, n): loss_difference(cases[k, n, "fp32"]) for k in kinds for n in names} \
            if "bf16" in precisions else {}
        measure(list(cases.values()), args.rounds)
        ndcg = {key: c.vali_ndcg() for key, c in cases.items()} if "bf16" in precisions else {}
        threads = torch.get_num_threads()
        gbdt = bench_gbdt(folds["mslr-like"].splits["train"], args.trees, args.threads) if args.trees else {}
    targets, rows = [], []
    for k in kinds:
        for n in names:
            c = cases[k, n, "fp32"]
            ratio = c.ratio()
            rows.append([k, n, str(c.docs), f"{100 * (1 - c.docs / c.slots):.1f}%", f"{c.docs_per_s('trainer'):.0f}",
                         f"{c.docs_per_s('bare'):.0f}", f"{ratio:.3f}x", "met" if ratio >= TRAINER_GOAL else "MISSED"])
            targets.append(Target(f"trainer vs bare step, {n}, {k} lists (float32 docs/s)", f"{ratio:.3f}x",
                                  f">= {TRAINER_GOAL}x", ratio >= TRAINER_GOAL))
    bf16_rows, gains = [], []
    if "bf16" in precisions:
        for k in kinds:
            for n in names:
                c32, c16 = cases[k, n, "fp32"], cases[k, n, "bf16"]
                gain = c16.docs_per_s("trainer") / c32.docs_per_s("trainer")
                gains.append(gain)
                bare_gain = c16.docs_per_s("bare") / c32.docs_per_s("bare")
                bf16_rows.append([k, n, f"{c32.docs_per_s('trainer'):.0f}", f"{c16.docs_per_s('trainer'):.0f}",
                                  f"{gain:.2f}x", f"{c32.docs_per_s('bare'):.0f}", f"{c16.docs_per_s('bare'):.0f}",
                                  f"{bare_gain:.2f}x", f"{c16.ratio():.3f}x", f"{diffs[k, n]:.2e}",
                                  f"{ndcg[k, n, 'fp32']:.4f}", f"{ndcg[k, n, 'bf16']:.4f}",
                                  f"{ndcg[k, n, 'bf16'] - ndcg[k, n, 'fp32']:+.4f}"])
        if device.type == "cpu":
            best = max(gains)
            targets.append(Target("bfloat16 autocast on the CPU, trainer docs/s vs float32 (best case)",
                                   f"{best:.2f}x", f">= {BF16_GOAL}x to offer it", best >= BF16_GOAL))
    targets += gpu_epoch_targets(cases, device, args.queries)
    for t in targets:
        print(t.line(), flush=True)
    any_case = next(iter(cases.values()))
    steps = any_case.bare.budget.steps_per_epoch
    lines = [
        "# The trainer against the bare step (docs/s), float32 and bfloat16",
        "",
        f"- generated {now_utc()} by `ltr-bench perf train --queries {args.queries} --vali-queries "
        f"{args.vali_queries} --rounds {args.rounds} --batch {args.batch} --list-size {args.list_size} --hidden "
        f"{','.join(map(str, hidden))} --losses {','.join(names)} --precisions {','.join(precisions)} --kinds "
        f"{','.join(kinds)} --trees {args.trees} --threads {args.threads}` on {device.type}",
        f"- {machine_line(device)}; load average at start {load}, at end {loadavg()} (1/5/15 min)",
        f"- {cpu_flags_line()}",
        f"- data: generate_synthetic(preset='mslr-like'), {args.queries} training queries per list kind, 136 "
        f"features z-scored (generated in {t_gen:.1f} s); `equal`: every query exactly {args.list_size} documents; "
        f"`mslr-like`: the preset's lengths, padded or sub-sampled to L_train = {args.list_size}",
        f"- MLP 136-{'-'.join(map(str, hidden))}-1 (batch norm, dropout 0.3), Adam lr 1e-3, {args.batch} lists of "
        f"L_train = {args.list_size} per step, {steps} steps per pass (one epoch), clip_grad_norm_ at infinity; "
        "deterministic kernels as in a run",
        "- trainer = bench.training.loop.train_epoch (epoch_lists, then gather + train_step per step; no "
        "validation); bare step = forward, loss, backward, clip, Adam on batches gathered before timing",
        f"- docs = real documents only (padding not counted); {WARMUP_STEPS} warm-up steps each, then "
        f"{args.rounds} interleaved rounds (trainer and bare pass back to back, order alternating); median docs/s; "
        "ratio = median of the per-round ratios",
        "",
        "## float32: trainer vs bare step",
        "",
        md_table(["lists", "loss", "real docs / pass", "padding", "trainer docs/s", "bare step docs/s",
                  "trainer / bare", f">= {TRAINER_GOAL}x"], rows),
    ]
    if bf16_rows:
        lines += [
            "",
            "## bfloat16 autocast of the MLP vs float32",
            "",
            "Same data, seeds and rounds. Loss rel. diff: largest |loss_bf16 - loss_fp32| / |loss_fp32| of the initial "
            f"model (evaluation mode) on the first {VALUE_BATCHES} batches. NDCG@10: validation "
            f"({args.vali_queries} queries of the kind) after {WARMUP_STEPS} warm-up steps + {args.rounds} passes "
            "from the same init and list draws.",
            "",
            md_table(["lists", "loss", "trainer fp32", "trainer bf16", "bf16 / fp32", "bare fp32", "bare bf16",
                      "bf16 / fp32 (bare)", "bf16 trainer / bare", "loss rel. diff", "NDCG@10 fp32", "NDCG@10 bf16",
                      "diff"], bf16_rows),
        ]
    if gbdt:
        lines += ["", f"GBDT on the mslr-like training split (threads: {args.threads or threads}; suite defaults, "
                      "no early stopping; Dataset/DMatrix construction included):", "",
                  md_table(["library", "trees", "seconds", "ms / tree"],
                           [[lib, str(args.trees), fmt(s), fmt(1e3 * s / args.trees)] for lib, s in gbdt.items()])]
    text = "\n".join(lines + targets_section(targets)) + "\n"
    write_text(args.out, text)
    print(text)
    print(f"wrote {args.out}")
    return SuiteResult("train", text, targets, 0, [Path(args.out)])


def gpu_epoch_targets(cases: dict[tuple[str, str, str], Any], device: torch.device, queries: int) -> list[Target]:
    """The GPU goal: one float32 trainer pass (= one epoch) of RankNet on an MSLR-sized
    mslr-like training split within :data:`GPU_EPOCH_GOAL_S` seconds (CUDA runs of at least
    :data:`MSLR_TRAIN_QUERIES` queries only)."""
    case = cases.get(("mslr-like", "ranknet", "fp32"))
    if device.type != "cuda" or case is None or queries < MSLR_TRAIN_QUERIES:
        return []
    seconds = case.docs / case.docs_per_s("trainer")
    return [Target(f"one MLP + RankNet epoch of the MSLR-sized mslr-like fold ({queries:,} queries, float32) on the GPU",
                   f"{seconds:.2f} s ({case.docs_per_s('trainer'):,.0f} docs/s)", f"<= {GPU_EPOCH_GOAL_S:g} s",
                   seconds <= GPU_EPOCH_GOAL_S)]


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--queries", type=int, default=512, help="training queries per list kind (one pass = one epoch)")
    p.add_argument("--vali-queries", type=int, default=500, help="validation queries (bf16 vs fp32 NDCG@10)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds (one pass of each per round)")
    p.add_argument("--batch", type=int, default=16, help="lists per step")
    p.add_argument("--list-size", type=int, default=200, help="L_train")
    p.add_argument("--hidden", default=",".join(map(str, HIDDEN)), help="MLP hidden widths")
    p.add_argument("--losses", default="ranknet,neuralndcg,approxndcg")
    p.add_argument("--precisions", default="fp32,bf16", help="fp32, or fp32,bf16 (bfloat16 autocast of the MLP)")
    p.add_argument("--kinds", default=",".join(KINDS), help="list kinds to time: equal, mslr-like or both")
    p.add_argument("--trees", type=int, default=50, help="GBDT rounds (0: skip GBDT)")
    p.add_argument("--threads", type=int, default=0, help="torch/LightGBM/XGBoost threads (0: torch's current)")
    p.add_argument("--out", type=Path, default=Path("reports/perf/train.md"))


__all__ = ["Case", "add_train_arguments", "bench_gbdt", "cpu_flags_line", "gpu_epoch_targets", "kind_fold",
           "loss_difference", "make_fit",
           "measure", "mslr_like_split", "report_train", "run_config"]
