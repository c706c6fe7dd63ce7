"""``ltr-bench perf kernels`` at tiny sizes: the side-by-side table, the value/gradient check
against the baseline checkout (which must catch a changed kernel), the floor section and the
refusals. The baseline is a copy of the current tree (no second checkout needed); no
wall-time assertions (times are only checked to be positive numbers).
"""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from bench.cli import main
from bench.errors import UsageError
from bench.perf import kernels as perf_kernels
from bench.perf.suites import SUITES, suite_namespace
from helpers import ROOT

TINY = ["--batch", "2", "--length", "12", "--rounds", "2", "--threads", "1"]


def _rows(text: str) -> dict[str, list[str]]:
    """The kernel table's rows by kernel name (cells stripped)."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("kernel", "---"):
            out[cells[0]] = cells
    return out


def _copy_tree(tmp_path):
    """A second checkout: the current tree's package copied (what a worker imports)."""
    base = tmp_path / "base"
    shutil.copytree(ROOT / "bench", base / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    return base


def test_suite_is_registered():
    assert SUITES["kernels"].module == "bench.perf.kernels"
    args = suite_namespace("kernels", [])
    assert (args.batch, args.length, args.baseline) == (16, 1000, None)


def test_side_by_side_against_a_copy_of_the_tree(tmp_path):
    base = _copy_tree(tmp_path)
    out = tmp_path / "kernels.md"
    result = SUITES["kernels"].report(suite_namespace("kernels", [*TINY, "--baseline", str(base), "--out", str(out)]))
    assert result.rc == 0
    text = out.read_text()
    assert text == result.markdown
    assert f"bench from `{base / 'bench' / '__init__.py'}`" in text  # the baseline worker imported the copy
    assert f"bench from `{ROOT / 'bench' / '__init__.py'}`" in text
    rows = _rows(text)
    assert set(rows) == set(perf_kernels.GOALS)
    for name, cells in rows.items():
        assert float(cells[1]) > 0 and float(cells[3]) > 0  # ours / baseline minimum seconds
        assert re.fullmatch(r"\d+\.\d{3}x", cells[5]), cells
        assert cells[6] == f"<= {perf_kernels.GOALS[name]:g}x"
        assert cells[7] in ("met", "MISSED")
        assert cells[8].endswith(": ok"), cells  # the same code on both sides: same value and gradient
    # the floor section: iterations actually run, bytes, bandwidth, ratio
    iterations = int(re.search(r"Sinkhorn iterations run on these inputs: (\d+)", text).group(1))
    assert 1 <= iterations <= 30
    assert f"= 4 x {iterations} x 2 x 12^2 x 4 B" in text
    assert re.search(r"memory bandwidth .*: \d+\.\d\d GB/s", text)
    assert len(result.targets) == 5 and "floor" in result.targets[-1].what


def test_any_registered_loss_sampled_ones_included_compares_without_a_goal(tmp_path):
    base = _copy_tree(tmp_path)
    out = tmp_path / "kernels.md"
    argv = [*TINY, "--baseline", str(base), "--out", str(out), "--kernels", "gumbel_neuralsort_ce,neuralsort_ce"]
    result = SUITES["kernels"].report(suite_namespace("kernels", argv))
    rows = _rows(out.read_text())
    assert result.rc == 0 and result.targets == [] and set(rows) == {"gumbel_neuralsort_ce", "neuralsort_ce"}
    for cells in rows.values():
        assert cells[6] == "none" and cells[7] == "" and re.fullmatch(r"\d+\.\d{3}x", cells[5]), cells
        # the seeded generator: the sampled loss draws the same noise in both workers
        assert cells[8] == "0.0e+00 / 0.0e+00: ok", cells


def test_a_changed_kernel_in_the_baseline_is_a_mismatch(tmp_path):
    base = _copy_tree(tmp_path)
    ranknet = base / "bench" / "losses" / "ranknet.py"
    source = ranknet.read_text()
    assert "    return masked_mean_over_lists(total / n_pairs" in source
    ranknet.write_text(source.replace("    return masked_mean_over_lists(total / n_pairs",
                                      "    return 1.001 * masked_mean_over_lists(total / n_pairs"))
    out = tmp_path / "kernels.md"
    rc = main(["perf", "kernels", *TINY, "--kernels", "ranknet,approxndcg", "--baseline", str(base), "--out", str(out)])
    assert rc == 1
    rows = _rows(out.read_text())
    assert rows["ranknet"][8].endswith("MISMATCH")
    assert rows["approxndcg"][8].endswith(": ok")


def test_without_a_baseline_the_ratio_column_asks_for_one(tmp_path):
    out = tmp_path / "kernels.md"
    result = SUITES["kernels"].report(suite_namespace("kernels", [*TINY, "--kernels", "ranknet", "--out", str(out)]))
    assert result.rc == 0
    rows = _rows(out.read_text())
    assert list(rows) == ["ranknet"] and rows["ranknet"][5] == "needs --baseline"
    assert "no baseline given" in result.markdown and result.targets == []


def test_refusals(tmp_path):
    with pytest.raises(UsageError, match="not a checkout"):
        SUITES["kernels"].report(suite_namespace("kernels", [*TINY, "--baseline", str(tmp_path)]))
    with pytest.raises(UsageError, match="--kernels"):
        SUITES["kernels"].report(suite_namespace("kernels", [*TINY, "--kernels", "no_such_loss"]))


def test_compare_tolerances():
    grad = torch.tensor([[1.0, -2.0, 0.5]])
    ok = perf_kernels.compare({"value": 1.0, "grad": grad * (1 + 1e-7)}, {"value": 1.0 + 1e-7, "grad": grad})
    assert ok[2]
    assert not perf_kernels.compare({"value": 1.0, "grad": grad}, {"value": 1.001, "grad": grad})[2]
    assert not perf_kernels.compare({"value": 1.0, "grad": grad + torch.tensor([[0.0, 0.0, 1e-3]])},
                                    {"value": 1.0, "grad": grad})[2]


def test_memory_bandwidth_is_a_positive_rate():
    assert perf_kernels.memory_bandwidth(mib=8, calls=2) > 0
