r"""``ltr-bench perf gbdt-devices``: XGBoost on the GPU against XGBoost on the CPU, one fold.

**What is compared.** The real run function (:func:`bench.training.gbdt.gbdt_run`, what the
``gbdt`` rule runs) twice per objective on the same prepared fold and seed: once with
``--device cpu`` and once with ``--device`` (``cuda`` by default). Reported per objective:

- the wall time of each run (the whole run: matrices, boosting, validation metric, test
  scoring) and the library's fit time (``train_seconds`` in run.json), their ratio;
- the rounds boosted and the round kept (early stopping on validation NDCG@10 may stop the two
  devices at different rounds: histogram sums on the GPU round differently);
- per test query, for each metric: the largest |GPU - CPU| difference, the mean difference
  (GPU - CPU) and the share of queries whose value is identical.

**Data.** ``prepare_fold("synthetic", ...)`` with the ``mslr-like`` preset (MSLR-WEB30K's
list lengths and label shares, 136 features, log1p + z-score) at ``--queries`` training,
``--vali-queries`` and ``--test-queries`` queries, seed 0; generated once, reused by every run.

**Parameters.** Each objective at the suite's default XGBoost parameters (the config
schema's ``gbdt_xgboost``: LightGBM's MSLR recipe), ``--trees`` rounds, early stopping after
``--early-stopping`` rounds without improvement.

With ``--device cuda``: torch must see a GPU (a measurement never silently runs on the CPU),
and the installed XGBoost must be built with CUDA (``xgboost.build_info()["USE_CUDA"]``); if
it is not, the report says so and the suite exits with status 1 without training. With
``--device cpu`` both sides run on the CPU: the run must then be identical per query, which
makes the suite testable without a GPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.atomic import write_text
from bench.errors import UsageError
from bench.perf.common import SuiteResult, Target, fmt, loadavg, machine_line, md_table, now_utc, targets_section
from bench.training.device import resolve_device

METRICS = ["ndcg@1", "ndcg@5", "ndcg@10", "mrr"]


def xgboost_cuda_build() -> tuple[str, bool]:
    """(XGBoost's version, whether this build was compiled with CUDA)."""
    import xgboost

    return xgboost.__version__, bool(xgboost.build_info().get("USE_CUDA", False))


def make_fold(folder: Path, args: argparse.Namespace) -> Path:
    from bench.data.prepare import prepare_fold

    options = {"preset": "mslr-like", "n_queries": args.queries, "vali_queries": args.vali_queries,
               "test_queries": args.test_queries, "seed": 0, "normalize": "log1p_zscore"}
    prepare_fold("synthetic", "Fold1", folder, options, log=lambda m: None)
    return folder


def one_run(fold: Path, out: Path, objective: str, device: str, args: argparse.Namespace) -> dict[str, Any]:
    """One ``gbdt_run`` of ``objective`` on ``device``: its seconds, record and per-query metrics."""
    from bench.config.settings import resolve_gbdt
    from bench.results import read_metrics, read_run_info
    from bench.training.gbdt import gbdt_run

    entry = {"gbdt": "xgboost", "objective": objective, "num_trees": args.trees,
             "early_stopping_rounds": args.early_stopping}
    config = {"methods": {"m": entry}, "metrics": {"names": METRICS, "empty_query": "one", "ties": "stable"},
              "train": {}}
    start = time.perf_counter()
    gbdt_run(resolve_gbdt(config, "m"), fold, out, method="m", seed=0, device=device, quiet=True,
             threads=args.threads or None)
    wall = time.perf_counter() - start
    info = read_run_info(out)
    return {"wall": wall, "fit": info["train_seconds"], "device": info["device"],
            "rounds": info["result"]["rounds_trained"], "best": info["result"]["best_iteration"],
            "metrics": read_metrics(out)}


def compare(cpu: dict[str, Any], other: dict[str, Any]) -> list[list[str]]:
    """Per metric: mean on each side, max |diff|, mean diff, share of identical queries."""
    rows = []
    for metric in METRICS:
        a = cpu["metrics"][metric].to_numpy()
        b = other["metrics"][metric].to_numpy()
        diff = b - a
        rows.append([metric, f"{a.mean():.5f}", f"{b.mean():.5f}", f"{np.abs(diff).max():.2e}",
                     f"{diff.mean():+.2e}", f"{100 * np.mean(diff == 0):.1f}%"])
    return rows


def report_gbdt_devices(args: argparse.Namespace) -> SuiteResult:
    device = resolve_device(args.device, on_missing_cuda=None)
    objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
    if min(args.queries, args.vali_queries, args.test_queries, args.trees, args.early_stopping) < 1 or not objectives:
        raise UsageError("--queries, --vali-queries, --test-queries, --trees and --early-stopping must be >= 1, "
                         "--objectives non-empty")
    version, has_cuda = xgboost_cuda_build()
    head = ["# XGBoost on the GPU vs the CPU (the gbdt run function, one fold)", "",
            f"- generated {now_utc()} by `ltr-bench perf gbdt-devices --device {device.type} --queries {args.queries} "
            f"--vali-queries {args.vali_queries} --test-queries {args.test_queries} --trees {args.trees} "
            f"--early-stopping {args.early_stopping} --objectives {','.join(objectives)} --threads {args.threads}`",
            f"- {machine_line(device)}; load average at start {loadavg()} (1/5/15 min)",
            f"- XGBoost {version}, built with CUDA: {'yes' if has_cuda else 'no'}"]
    if device.type == "cuda" and not has_cuda:
        text = "\n".join(head + ["", "This XGBoost build has no CUDA support (`xgboost.build_info()['USE_CUDA']` is "
                                 "false): nothing to compare. Swap in XGBoost's CUDA wheel (`pip install -e .` brings "
                                 "`xgboost-cpu`: `pip uninstall -y xgboost-cpu && pip install \"xgboost>=2.1\"`, "
                                 "docs/install.md) and run again."]) + "\n"
        write_text(args.out, text)
        print(text)
        return SuiteResult("gbdt-devices", text, [Target("XGBoost built with CUDA", "no", "yes", False)], 1,
                           [Path(args.out)])
    blocks: list[str] = []
    targets: list[Target] = []
    with tempfile.TemporaryDirectory(prefix="ltr-gbdt-devices-") as tmp:
        t0 = time.perf_counter()
        fold = make_fold(Path(tmp) / "fold", args)
        head.append(f"- fold: mslr-like preset, {args.queries} / {args.vali_queries} / {args.test_queries} queries "
                    f"(train / vali / test), 136 features, generated in {time.perf_counter() - t0:.1f} s")
        for objective in objectives:
            stem = Path(tmp) / objective.replace(":", "_")
            cpu = one_run(fold, stem.with_suffix(".cpu"), objective, "cpu", args)
            other = one_run(fold, stem.with_suffix(".compared"), objective, device.type, args)
            speed = cpu["wall"] / other["wall"]
            blocks += ["", f"## `{objective}`", "",
                       md_table(["side", "device used", "wall (s)", "fit (s)", "rounds boosted", "round kept"],
                                [[side, r["device"], fmt(r["wall"]), fmt(r["fit"]), str(r["rounds"]), str(r["best"])]
                                 for side, r in (("reference (cpu)", cpu), (f"compared ({device.type})", other))]),
                       "", f"Wall time CPU / {device.type}: {speed:.2f}x; fit time: {cpu['fit'] / other['fit']:.2f}x.",
                       "", md_table(["metric", "mean (cpu)", f"mean ({device.type})", "max |diff|", "mean diff",
                                     "identical queries"], compare(cpu, other))]
            targets.append(Target(f"XGBoost {objective} ran on {device.type}", other["device"], device.type,
                                  other["device"] == device.type))
    text = "\n".join(head + blocks + targets_section(targets)) + "\n"
    write_text(args.out, text)
    print(text)
    print(f"wrote {args.out}")
    return SuiteResult("gbdt-devices", text, targets, 0 if all(t.met for t in targets) else 1, [Path(args.out)])


def add_gbdt_devices_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cuda",
                   help="the side compared with the CPU (cpu: both sides on the CPU)")
    p.add_argument("--queries", type=int, default=4000, help="training queries of the mslr-like fold")
    p.add_argument("--vali-queries", type=int, default=1000)
    p.add_argument("--test-queries", type=int, default=1000)
    p.add_argument("--trees", type=int, default=200, help="boosting rounds at most")
    p.add_argument("--early-stopping", type=int, default=50, help="rounds without validation improvement")
    p.add_argument("--objectives", default="rank:ndcg,rank:pairwise")
    p.add_argument("--threads", type=int, default=0, help="XGBoost threads on the CPU side (0: all cores)")
    p.add_argument("--out", type=Path, default=Path("reports/perf/gbdt-devices.md"))


__all__ = ["add_gbdt_devices_arguments", "compare", "report_gbdt_devices", "xgboost_cuda_build"]
