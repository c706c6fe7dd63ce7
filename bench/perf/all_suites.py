"""``ltr-bench perf all``: every suite, one markdown per suite, the scaling figure, the targets.

CPU (``--device cpu``, or ``auto`` without CUDA): runs ``losses``, ``scaling``, ``train``,
``parse``, ``metrics`` and ``study`` with the sizes of :data:`PLANS` (chosen to finish in
about ten minutes on two shared cores; ``--quick`` uses :data:`QUICK`, seconds in all, for
smoke tests), writes ``<out-dir>/<suite>.md``, ``<out-dir>/scaling.csv``, the figure
``<figure-dir>/scaling_figure.png`` / ``.pdf`` (:func:`bench.report.figures.scaling_figure`)
and ``<out-dir>/summary.md``: every target met / MISSED with its number.

GPU (``--device cuda``): the device suites (``losses``, ``scaling``, ``train``) run on the GPU
and write ``<suite>-cuda.md`` (and ``scaling-cuda.csv``, ``scaling_figure-cuda.*``), the
CPU-only suites are not repeated, and ``<out-dir>/gpu.md`` records the device name, its
memory and compute capability, torch / CUDA / cuDNN versions and the GPU targets. Without
CUDA it stops before measuring anything with a clear error (exit status 2).

One failing suite does not stop the others; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path

import torch

from bench.atomic import write_text
from bench.errors import UsageError
from bench.perf.common import SuiteResult, loadavg, machine_line, now_utc
from bench.perf.suites import SUITES, suite_namespace
from bench.training.device import resolve_device

DEVICE_SUITES = ("losses", "scaling", "train")
CPU_SUITES = ("parse", "metrics", "study")

# realistic sizes for one run on this CPU (argv of each suite, without --device/--out)
PLANS: dict[str, list[str]] = {
    "losses": ["--lengths", "100,1000,3375", "--batch", "16", "--repeats", "3", "--only-at", "3375=pirank_ndcg"],
    "scaling": ["--lengths", "125,1000,2197,3375", "--batch", "16", "--steps", "100", "--k", "1",
                "--n-features", "136", "--max-seconds", "10", "--losses", "neuralndcg,approxndcg,ranknet,listnet"],
    "train": ["--queries", "512", "--rounds", "5", "--trees", "50"],
    "parse": ["--mb", "200"],
    "metrics": [],
    "study": [],
}
# on CUDA: the same sizes, but the trainer on an MSLR-WEB30K-sized training split (the GPU goal's
# epoch: bench.perf.train.MSLR_TRAIN_QUERIES queries) and no GBDT (CPU-only libraries' timings)
GPU_PLANS: dict[str, list[str]] = {
    **PLANS,
    "train": ["--queries", "18919", "--vali-queries", "500", "--rounds", "3", "--kinds", "mslr-like",
              "--losses", "ranknet,neuralndcg,approxndcg", "--trees", "0"],
}
QUICK: dict[str, list[str]] = {
    "losses": ["--lengths", "8", "--batch", "2", "--repeats", "1", "--losses", "ranknet,pirank_ndcg"],
    "scaling": ["--lengths", "8,27", "--batch", "2", "--steps", "2", "--n-features", "6", "--hidden", "8",
                "--losses", "ranknet,listnet"],
    "train": ["--queries", "12", "--vali-queries", "6", "--rounds", "1", "--batch", "4", "--list-size", "16",
              "--hidden", "16,8", "--trees", "2", "--losses", "ranknet"],
    "parse": ["--mb", "0.1"],
    "metrics": ["--queries", "40", "--docs", "800", "--repeats", "1"],
    "study": [],
}


def _outputs(name: str, out_dir: Path, suffix: str) -> list[str]:
    argv = ["--out", str(out_dir / f"{name}{suffix}.md")]
    if name == "scaling":
        argv += ["--csv", str(out_dir / f"scaling{suffix}.csv")]
    return argv


def _figure(csv: Path, figure_dir: Path, stem: str, args_ns: argparse.Namespace) -> list[Path]:
    import pandas as pd

    from bench.report import figures

    frame = pd.read_csv(csv)
    if frame.empty:
        return []
    png, pdf = figure_dir / f"{stem}.png", figure_dir / f"{stem}.pdf"
    figures.save(figures.scaling_figure(frame, args_ns.steps, args_ns.batch), png, pdf)
    return [png, pdf]


def gpu_lines(device: torch.device) -> list[str]:
    """Device name, memory, capability and library versions (CUDA only)."""
    props = torch.cuda.get_device_properties(device)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else "n/a"
    return [f"- device: {props.name}, {props.total_memory / 2**30:.1f} GiB, compute capability "
            f"{props.major}.{props.minor}, {props.multi_processor_count} SMs",
            f"- torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {cudnn}"]


def report_all(args: argparse.Namespace) -> SuiteResult:
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("perf all --device cuda: CUDA is not available (torch.cuda.is_available() is False; "
                       f"torch {torch.__version__} built with CUDA {torch.version.cuda or 'none'}); "
                       "run on a GPU machine or use --device cpu")
    device = resolve_device(args.device, on_missing_cuda=None)
    if args.threads:
        torch.set_num_threads(args.threads)
    gpu = device.type == "cuda"
    suffix = "-cuda" if gpu else ""
    plans = QUICK if args.quick else GPU_PLANS if gpu else PLANS
    names = [n for n in (*DEVICE_SUITES, *CPU_SUITES) if not (gpu and n in CPU_SUITES)]
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = skip - set(PLANS)
    if unknown:
        raise UsageError(f"--skip: unknown suite(s) {', '.join(sorted(unknown))}; known: {', '.join(PLANS)}")
    out_dir, figure_dir = Path(args.out_dir), Path(args.figure_dir)
    load, started = loadavg(), time.perf_counter()
    results: list[SuiteResult] = []
    status: list[str] = []
    for name in names:
        if name in skip:
            status.append(f"- {name}: skipped (--skip)")
            continue
        argv = list(plans[name]) + _outputs(name, out_dir, suffix)
        if name in DEVICE_SUITES:
            argv += ["--device", device.type]
        if name == "study":
            argv += ["--root", str(args.study_root)]
        ns = suite_namespace(name, argv)
        t0 = time.perf_counter()
        print(f"== perf {name} ({' '.join(argv)})", flush=True)
        try:
            res = SUITES[name].report(ns)
            if name == "scaling":
                res.outputs += _figure(Path(ns.csv), figure_dir, f"scaling_figure{suffix}", ns)
        except UsageError:
            raise
        except Exception as exc:  # keep going: the other suites' numbers still count
            traceback.print_exc()
            res = SuiteResult(name, "", [], 1, [])
            status.append(f"- {name}: FAILED after {time.perf_counter() - t0:.0f} s ({type(exc).__name__}: {exc})")
            results.append(res)
            continue
        results.append(res)
        outs = ", ".join(f"`{p}`" for p in res.outputs)
        status.append(f"- {name}: {'ok' if res.rc == 0 else f'exit status {res.rc}'} in "
                      f"{time.perf_counter() - t0:.0f} s -> {outs}")
    wall = time.perf_counter() - started
    targets = [t for r in results for t in r.targets]
    met = sum(t.met for t in targets)
    title = "# GPU performance" if gpu else "# Performance summary"
    lines = [title, "", f"- generated {now_utc()} by `ltr-bench perf all --device {device.type}"
             f"{' --quick' if args.quick else ''}` in {wall:.0f} s",
             f"- {machine_line(device)}", f"- load average at start {load}, at end {loadavg()} (1/5/15 min)"]
    if gpu:
        lines += gpu_lines(device)
    lines += ["", "## Suites", "", *status, "", f"## Targets ({met} of {len(targets)} met)", "",
              *(t.line() for t in targets)]
    text = "\n".join(lines) + "\n"
    summary = out_dir / ("gpu.md" if gpu else "summary.md")
    write_text(summary, text)
    print(text)
    print(f"wrote {summary}")
    rc = 1 if any(r.rc for r in results) else 0
    return SuiteResult("all", text, targets, rc, [summary] + [p for r in results for p in r.outputs])


def add_all_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    p.add_argument("--out-dir", type=Path, default=Path("reports/perf"))
    p.add_argument("--figure-dir", type=Path, default=Path("reports/perf"))
    p.add_argument("--study-root", type=Path, default=Path("results/benchmarks"))
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test, seconds)")
    p.add_argument("--skip", default="", help="comma-separated suites not to run")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as set by OMP_NUM_THREADS)")


__all__ = ["CPU_SUITES", "DEVICE_SUITES", "GPU_PLANS", "PLANS", "QUICK", "add_all_arguments", "gpu_lines", "report_all"]
