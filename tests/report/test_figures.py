"""Figures from constructed data: slopes, grids, relative changes, toy-list curves, files."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.report import figures as F


def _legend_texts(fig):
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_loglog_slope_recovers_power_laws():
    L = np.array([125, 1000, 2197, 3375])
    assert F.loglog_slope(L, 3e-6 * L**2.0) == pytest.approx(2.0, abs=1e-12)
    assert F.loglog_slope(L, 0.5 * L ** (4 / 3)) == pytest.approx(4 / 3, abs=1e-12)
    assert math.isnan(F.loglog_slope([10], [1.0]))
    assert math.isnan(F.loglog_slope([10, 10], [1.0, 2.0]))


def test_scaling_figure_prints_fitted_slopes_and_writes_png_pdf(tmp_path):
    L = np.array([125, 1000, 2197, 3375], dtype=float)
    frame = pd.DataFrame(
        {
            "loss": ["pirank_ndcg"] * 8 + ["ranknet"] * 4,
            "variant": ["depth 1"] * 4 + ["depth 3"] * 4 + [np.nan] * 4,
            "L": np.concatenate([L, L, L]),
            "seconds": np.concatenate([1e-6 * L**2, 1e-4 * L ** (4 / 3), 2e-6 * L**2]),
            "peak_mb": np.concatenate([1e-5 * L**2, 1e-3 * L, 3e-5 * L**2]),
        }
    )
    slopes = F.scaling_data(frame)
    assert slopes.time_slope.round(6).tolist() == [2.0, round(4 / 3, 6), 2.0]
    assert slopes.mem_slope.round(6).tolist() == [2.0, 1.0, 2.0]
    fig = F.scaling_figure(frame, steps=100, batch_lists=16)
    legends = _legend_texts(fig)
    assert "pirank_ndcg (depth 1): slope 2.00" in legends
    assert "pirank_ndcg (depth 3): slope 1.33" in legends
    assert "ranknet: slope 2.00" in legends
    time_ax, mem_ax = fig.axes
    assert time_ax.get_xscale() == time_ax.get_yscale() == "log"
    assert "100 training steps of 16 lists (s)" in time_ax.get_ylabel()
    assert mem_ax.get_ylabel() == "peak memory (MB)"
    F.save(fig, tmp_path / "s.png", tmp_path / "s.pdf")
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "s.pdf").read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match="lacks columns"):
        F.scaling_data(frame.drop(columns=["peak_mb"]))


def test_scaling_figure_checks_each_loss_alone_against_its_stated_cost():
    """Constructed loss-alone times: n log n exactly (matches), n^2 stated n log n (above), flat (below)."""
    L = np.array([64, 216, 512, 1000], dtype=float)
    frame = pd.DataFrame(
        {
            "loss": ["softrank_ndcg"] * 4 + ["slow"] * 4 + ["overhead"] * 4,
            "variant": "default",
            "L": np.concatenate([L, L, L]),
            "seconds": np.concatenate([1e-3 * L, 1e-3 * L, 1e-3 * L]),
            "peak_mb": np.concatenate([L, L, L]),
            "loss_seconds": np.concatenate([1e-6 * L * np.log(L), 1e-7 * L**2, 1e-3 + 0 * L]),
            "stated": ["n log n"] * 8 + ["n"] * 4,
        }
    )
    data = F.scaling_data(frame)
    expected = F.stated_slope("n log n", L)
    assert data.expected_slope.iloc[0] == pytest.approx(expected) and abs(expected - 1.185) < 1e-3
    assert data.loss_slope.iloc[0] == pytest.approx(expected, abs=1e-12)
    assert data.verdict.tolist() == ["matches", "above", "below"]
    fig = F.scaling_figure(frame, steps=5, batch_lists=4)
    assert len(fig.axes) == 3
    assert "softrank_ndcg: slope 1.19; n log n -> 1.19: matches" in _legend_texts(fig)
    assert "loss alone" in fig.axes[2].get_ylabel()


def test_listsize_relative_change_over_smallest_training_size():
    stats = pd.DataFrame(
        {
            "dataset": ["d@Ltest=10", "d@Ltest=10", "d@Ltest=20", "d@Ltest=20"],
            "metric": "ndcg@1",
            "method": ["L10", "L40", "L10", "L40"],
            "mean": [0.40, 0.42, 0.30, 0.36],
        }
    )
    data = F.listsize_data(stats, "d", {"L10": 10, "L40": 40}, [10, 20], ["ndcg@1"])
    rel = data.set_index(["l_test", "l_train"]).relative
    assert rel[(10, 10)] == 0.0
    assert rel[(10, 40)] == pytest.approx(5.0)
    assert rel[(20, 40)] == pytest.approx(20.0)
    fig = F.listsize_figure(data, "loss pirank_ndcg on syn-web")
    assert "relative change over L_train = 10 (%)" in fig.axes[0].get_ylabel()
    assert fig.get_suptitle() == "Training vs test list size: loss pirank_ndcg on syn-web"


def test_temperature_figure_from_curves(tmp_path):
    """Figs. 5 and 8-12 from run curves: seeds averaged per epoch, x = the epoch's last step in
    thousands, Fig. 5's relaxed curve = 1 - the validation loss on the cut lists, every curve
    smoothed by the debiased EMA (oracle: the closed form sum w^(t-i) v_i / sum w^(t-i), 1e-12)."""
    runs = {}
    for tau, shift in (("tau=0.1", 0.0), ("tau=5", 0.1)):
        dirs = []
        for seed in (0, 1):
            d = tmp_path / f"{tau}-{seed}"
            d.mkdir()
            pd.DataFrame({"epoch": [1, 2, 3], "step": [400, 800, 1200], "train_loss": [0.8, 0.6, 0.5],
                          "vali_L100_loss": [0.7 - shift, 0.5, 0.4 + seed * 0.1],
                          "vali_L100_ndcg@1": [0.2, 0.3, 0.35],
                          "vali_L100_ndcg@10": [0.4, 0.45, 0.5]}).to_csv(d / "curve.csv")
            dirs.append(d)
        runs[tau] = dirs
    curves = F.read_curves(runs)
    data = F.temperature_data(curves, ["ndcg@1", "ndcg@10"], 100, 0.9)
    relaxed = data[(data.panel == "fig5") & (data.kind == "relaxed") & (data.label == "tau=0.1")]
    assert relaxed.kiloiter.tolist() == [0.4, 0.8, 1.2]
    raw = [0.3, 0.5, 0.55]  # 1 - the mean over the two seeds
    assert relaxed.raw.tolist() == pytest.approx(raw, rel=1e-12)
    w = 0.9
    closed = [sum(w ** (t - i) * raw[i] for i in range(t + 1)) / sum(w ** (t - i) for i in range(t + 1))
              for t in range(3)]
    assert relaxed.smoothed.tolist() == pytest.approx(closed, rel=1e-12)
    assert list(dict.fromkeys(data.panel)) == ["fig5", "ndcg@1", "train_loss"]
    fig = F.temperature_figure(data, 100, 0.9, "loss pirank_ndcg on syn-web")
    assert fig.get_suptitle().startswith("Temperature: loss pirank_ndcg on syn-web; smoothed")
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles[0].startswith("PiRank Fig. 5") and titles[1] == "PiRank Fig. 8: validation NDCG@1"
    assert titles[2] == "PiRank Fig. 12: training loss"
    assert all(ax.get_xlabel() == "iterations (thousands)" for ax in fig.axes if ax.get_visible())
    assert len(fig.axes[0].lines) == 2 * 2 * 2  # two temperatures x (relaxed, hard) x (raw, smoothed)
    with pytest.raises(ValueError, match="vali_L40_loss"):
        F.temperature_data(curves, ["ndcg@1"], 40, 0.9)
    with pytest.raises(FileNotFoundError, match="curve.csv"):
        F.read_curves({"x": [tmp_path / "missing"]})


def test_tensorboard_smoothing_limits():
    """w = 0 is the raw curve; a constant curve stays constant; a non-finite point is drawn as
    it is and does not enter the average (TensorBoard's rules); 1e-12 relative."""
    v = [0.3, 0.9, 0.1]
    assert F.tensorboard_smooth(v, 0.0).tolist() == v
    assert F.tensorboard_smooth([0.5] * 4, 0.99).tolist() == pytest.approx([0.5] * 4, rel=1e-12)
    out = F.tensorboard_smooth([1.0, float("inf"), 0.0], 0.5)
    assert out[0] == 1.0 and out[1] == float("inf")
    assert out[2] == pytest.approx((0.5 * 1.0) / (0.5 + 1.0), rel=1e-12)  # weights w^1, w^0 on 1.0, 0.0


@pytest.mark.parametrize("profile, dataset", [((), "syn-web"), (("config/paper.yaml",), "MSLR-WEB30K")])
def test_temperature_and_listsize_figures_name_loss_and_dataset(profile, dataset):
    """The spec of each figure names what it shows (its image's title), from the config."""
    from bench.config import plan
    from bench.config.validate import load_config

    config = load_config(*profile)
    for figure in ("temperature_figure", "listsize_figure"):
        assert plan.figure_spec(config, figure)["subject"] == f"loss pirank_ndcg on {dataset}"
