"""The perf suites beyond ``losses`` at tiny sizes: well-formed tables and CSV, stop rules,
slope fitting on known exponents, the Snakemake benchmark summary, ``perf all`` and its
CUDA refusal. No wall-time assertions (times are only checked to be positive numbers).
"""

from __future__ import annotations

import math
import os

import numba
import pandas as pd
import pytest
import torch

from bench.cli import main
from bench.errors import UsageError
from bench.perf import losses as perf_losses
from bench.perf import scaling as perf_scaling
from bench.perf import study as perf_study
from bench.perf.suites import SUITES
from bench.report import figures
from helpers import md_tables


@pytest.fixture(scope="module")
def quick_all(tmp_path_factory):
    """One ``perf all --quick`` run shared by the structure tests (every suite, seconds)."""
    root = tmp_path_factory.mktemp("perf")
    bench_dir = root / "benchmarks" / "runs" / "exp"
    bench_dir.mkdir(parents=True)
    for i, s in enumerate([3.5, 1.25, 7.0]):
        (bench_dir / f"job{i}.tsv").write_text("s\th:m:s\tmax_rss\tcpu_time\n" f"{s}\t0:00:0{int(s)}\t100.5\t{s / 2}\n")
    out, figs = root / "perf", root / "figures"
    rc = main(["perf", "all", "--quick", "--device", "cpu", "--out-dir", str(out), "--figure-dir", str(figs),
               "--study-root", str(root / "benchmarks")])
    return rc, out, figs


def test_perf_all_quick_writes_every_suite_and_the_figure(quick_all):
    rc, out, figs = quick_all
    assert rc == 0
    names = {p.name for p in out.iterdir()}
    assert names == {"losses.md", "scaling.md", "scaling.csv", "train.md", "parse.md", "metrics.md", "study.md",
                     "summary.md"}
    assert (figs / "scaling_figure.png").stat().st_size > 0 and (figs / "scaling_figure.pdf").stat().st_size > 0
    summary = (out / "summary.md").read_text(encoding="utf-8")
    for suite in ("losses", "scaling", "train", "parse", "metrics", "study"):
        assert f"- {suite}: ok in" in summary
    targets = [ln for ln in summary.splitlines() if ln.startswith("- ") and "(target " in ln]
    assert targets and all(ln.endswith((": met", ": MISSED")) for ln in targets)
    assert not list(out.glob(".*.tmp")) and not list(figs.glob(".*.tmp"))


def test_scaling_csv_has_the_figure_columns_and_pirank_variants(quick_all):
    _, out, _ = quick_all
    frame = pd.read_csv(out / "scaling.csv")
    assert list(frame.columns) == perf_scaling.CSV_COLUMNS
    assert set(figures.SCALING_COLUMNS) <= set(frame.columns)
    curves = set(zip(frame.loss, frame.variant))
    assert curves == {("pirank_ndcg", "depth1"), ("pirank_ndcg", "depth3"), ("pirank_ndcg", "depth1-fullmatrix"),
                      ("ranknet", "default"), ("listnet", "default")}
    assert sorted(set(frame.L)) == [8, 27]
    assert (frame.seconds > 0).all() and (frame.steps == 2).all() and (~frame.extrapolated).all()
    assert (frame.seconds - frame.seconds_per_step * frame.steps).abs().max() < 1e-12
    assert (frame.min_step <= frame.seconds_per_step).all() and (frame.steps_timed == 2).all()
    slopes = figures.scaling_data(frame)  # the renderer accepts the CSV as is
    assert len(slopes) == 5 and slopes.time_slope.notna().all()
    md = (out / "scaling.md").read_text(encoding="utf-8")
    main_table, slope_table = md_tables(md)[:2]
    assert len(main_table) == 2 + 10 and len(slope_table) == 2 + 5
    assert slope_table[0][4] == "time slope of the excess over listnet"
    stated_table = md_tables(md)[2]  # one row per curve: its stated cost, expected and measured slope, verdict
    assert stated_table[0] == ["loss", "variant", "stated cost per list", "expected slope over these L",
                               "loss-alone time slope", "verdict"]
    by_curve = {(r[0], r[1]): r for r in stated_table[2:]}
    assert by_curve[("ranknet", "default")][2] == "n^2" and by_curve[("listnet", "default")][2] == "n"
    assert all(r[5] in ("matches", "below", "above") for r in stated_table[2:])
    assert (frame.loss_seconds > 0).all() and set(frame.stated) == {"n log n", "n^2", "n"}
    assert "near-linear" in md and "full-matrix" in md


@pytest.mark.parametrize("suite, header", [
    ("train", ["lists", "loss", "real docs / pass", "padding", "trainer docs/s", "bare step docs/s",
               "trainer / bare", ">= 0.9x"]),
    ("parse", ["parser", "seconds", "CPU seconds", "MB/s", "speed vs scikit-learn", "per CPU second vs scikit-learn"]),
    ("metrics", ["implementation", "seconds", "speed vs loop"]),
    ("losses", perf_losses.COLUMNS),
])
def test_suite_tables_are_well_formed(quick_all, suite, header):
    _, out, _ = quick_all
    text = (out / f"{suite}.md").read_text(encoding="utf-8")
    first = md_tables(text)[0]
    assert first[0] == header and len(first) > 2
    assert "error" not in text


def test_parse_suite_checks_identical_arrays_and_reports_both_targets(quick_all):
    text = (quick_all[1] / "parse.md").read_text(encoding="utf-8")
    assert "identical between the two parsers: True" in text
    assert "SVMlight parsing vs scikit-learn" in text and "prepared-cache reload vs parsing" in text
    rows = md_tables(text)[0][2:]
    assert [r[0] for r in rows] == ["scikit-learn load_svmlight_file + toarray", "bench read_svmlight (1 numba thread)",
                                    f"bench read_svmlight ({numba.get_num_threads()} numba threads)"]
    assert all(float(r[2]) >= 0 for r in rows) and "Per CPU second" in text  # CPU seconds (0.00 on --quick)


def test_study_lists_the_slowest_jobs_first(quick_all):
    text = (quick_all[1] / "study.md").read_text(encoding="utf-8")
    rows = md_tables(text)[0][2:]
    assert [r[0] for r in rows] == ["runs/exp/job2", "runs/exp/job0", "runs/exp/job1"]
    assert "3 jobs; sum of job wall-clock 11.8 s" in text


def test_study_span_and_bad_files(tmp_path):
    for name, s, end in (("a", 10.0, 1000.0), ("b", 4.0, 1003.0)):
        (tmp_path / f"{name}.tsv").write_text(f"s\tmax_rss\n{s}\t1\n")
        os.utime(tmp_path / f"{name}.tsv", (end, end))
    slowest, total, span = perf_study.summarise(perf_study.read_benchmarks(tmp_path), 1)
    assert list(slowest.job) == ["a"] and total == 14.0 and span == pytest.approx(13.0)  # 990 -> 1003
    (tmp_path / "bad.tsv").write_text("x\ty\n1\t2\n")
    with pytest.raises(UsageError, match="bad.tsv: not a Snakemake benchmark file"):
        perf_study.read_benchmarks(tmp_path)


@pytest.mark.parametrize("exponent", [2.0, 4.0 / 3.0, 1.0])
def test_loglog_slope_recovers_a_known_exponent(exponent):
    lengths = [125, 1000, 2197, 3375]
    assert abs(perf_scaling.loglog_slope(lengths, [0.37 * n**exponent for n in lengths]) - exponent) < 1e-9


def test_projection_follows_the_last_local_slope():
    pts = [{"L": 100, "t": 1.0}, {"L": 200, "t": 4.0}]
    assert perf_scaling._projection(pts, 400, "t") == pytest.approx(16.0)  # slope 2
    assert perf_scaling._projection(pts[:1], 300, "t") == pytest.approx(9.0)  # one point: slope 2
    steep = [{"L": 100, "t": 1.0}, {"L": 200, "t": 64.0}]
    assert perf_scaling._projection(steep, 400, "t") == pytest.approx(512.0)  # clamped to slope 3
    assert perf_scaling._projection([], 400, "t") is None


def test_scaling_max_seconds_extrapolates_then_stops(tmp_path):
    csv, md = tmp_path / "s.csv", tmp_path / "s.md"
    rc = main(["perf", "scaling", "--device", "cpu", "--lengths", "27,8", "--batch", "2", "--steps", "3",
               "--n-features", "4", "--hidden", "4", "--losses", "none", "--max-seconds", "1e-9",
               "--csv", str(csv), "--out", str(md)])
    assert rc == 0
    frame = pd.read_csv(csv)
    assert sorted(frame.L) == [8, 8, 8]  # lengths are sorted; growth stopped after the first
    assert (frame.steps_timed == 0).all() and frame.extrapolated.all()
    text = md.read_text(encoding="utf-8")
    assert text.count("extrapolated from the warm-up step") == 3
    assert text.count("not measured beyond L=8: the warm-up step alone took") == 3


def test_scaling_stop_rule_projects_from_measured_points():
    curve = perf_scaling.Curve("x", "default", lambda s, y, m: s.sum())
    curve.points = [{"L": 100, "min_step": 1.0, "peak_mb": 10.0}]
    args = type("A", (), {"max_seconds": 5.0, "max_mb": 1e9})()
    assert perf_scaling._stop_reason(curve, 200, args) == ""  # 4 s projected
    assert "one step projected at 9 s > --max-seconds 5" in perf_scaling._stop_reason(curve, 300, args)
    args.max_seconds, args.max_mb = 1e9, 50.0
    assert "peak projected at 90 MB > --max-mb 50" in perf_scaling._stop_reason(curve, 300, args)


def test_only_at_restricts_one_length(tmp_path):
    out = tmp_path / "l.md"
    rc = main(["perf", "losses", "--device", "cpu", "--lengths", "5,7", "--batch", "1", "--repeats", "1",
               "--losses", "rmse,ranknet", "--only-at", "7=ranknet", "--out", str(out)])
    assert rc == 0
    rows = md_tables(out.read_text(encoding="utf-8"))[0][2:]
    assert [(r[0], r[1]) for r in rows] == [("5", "rmse"), ("5", "ranknet"), ("7", "ranknet")]


@pytest.mark.parametrize("argv, message", [
    (["perf", "losses", "--only-at", "7"], "--only-at expects L=loss"),
    (["perf", "losses", "--losses", "rmse", "--only-at", "7=ranknet"], "not among the measured losses"),
    (["perf", "scaling", "--losses", "nope"], "--losses: unknown loss 'nope'"),
    (["perf", "scaling", "--max-seconds", "0"], "--max-seconds and --max-mb must be positive"),
    (["perf", "train", "--rounds", "0"], "--queries, --rounds"),
    (["perf", "all", "--skip", "nope"], "--skip: unknown suite(s) nope"),
])
def test_bad_arguments_are_cli_errors(tmp_path, capsys, argv, message):
    rc = main([*argv, "--device", "cpu"] if argv[1] not in ("all",) else [*argv, "--device", "cpu",
                                                                           "--out-dir", str(tmp_path)])
    assert rc == 2 and message in capsys.readouterr().err


def test_perf_all_cuda_without_cuda_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = main(["perf", "all", "--device", "cuda", "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "CUDA is not available" in err and "--device cpu" in err
    assert not any(tmp_path.iterdir())  # nothing measured, nothing written


def test_every_suite_is_registered():
    assert set(SUITES) == {"losses", "kernels", "scaling", "train", "parse", "metrics", "study", "gbdt-devices",
                           "soft-ops", "all"}
    assert not math.isnan(perf_scaling.loglog_slope([1, 2], [1, 2]))


@pytest.mark.parametrize("n, k", [(12, 1), (40, 10)])
def test_fullmatrix_reference_matches_perf_reference_value_and_gradient(n, k):
    from bench.perf import reference as perf_reference

    gen = torch.Generator().manual_seed(n)
    s = torch.randn(3, n, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 5, (3, n), generator=gen).to(torch.float64)
    y[:, 0] = 4.0  # every list has a positive ideal DCG
    a, b = s.clone().requires_grad_(True), s.clone().requires_grad_(True)
    ours = perf_scaling.fullmatrix_pirank_ndcg(a, y, k=k)
    ref = perf_reference.pirank_ndcg(b, y, k=k)  # cubic A@11^T row sums at this n
    ours.backward()
    ref.backward()
    assert abs(ours.item() - ref.item()) < 1e-12
    assert torch.allclose(a.grad, b.grad, rtol=0, atol=1e-12)


def test_excess_slope_isolates_the_loss_from_a_shared_linear_cost():
    lengths = [125, 1000, 2197, 3375]

    def curve(loss, variant, seconds):
        c = perf_scaling.Curve(loss, variant, lambda s, y, m: s.sum())
        c.points = [{"L": n, "seconds": seconds(n)} for n in lengths]
        return c

    curves = [curve("listnet", "default", lambda n: 0.02 * n), curve("x", "quad", lambda n: 0.02 * n + 1e-5 * n**2),
              curve("y", "same", lambda n: 0.02 * n)]
    out = perf_scaling.excess_slopes(curves)
    assert abs(out[("x", "quad")] - 2.0) < 1e-9 and ("y", "same") not in out
    assert perf_scaling.excess_slopes(curves[1:]) == {}
