"""bench.config.jobs: the jobs of a target equal Snakemake's own DAG (``snakemake -n``), rule by rule."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import pytest

from bench.config.jobs import expand_targets, target_jobs
from bench.config.validate import load_config
from bench.errors import ConfigError
from helpers import ROOT

PROFILES = {
    "default": [],
    "paper": ["config/paper.yaml"],
    "scale": ["config/paper.yaml", "config/scale.yaml"],
    "compare": ["config/compare-example.yaml"],
}


def snakemake_counts(target: str, configfiles: list[str]) -> Counter:
    """``Job stats`` of ``snakemake -n --forceall TARGET`` (every job, as if nothing existed)."""
    args = ["snakemake", "-n", "--forceall", "--nolock", target, "--quiet", "rules"]
    if configfiles:
        args += ["--configfile", *configfiles]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"LTR_BENCH_CALIBRATION": "off", "PATH": __import__("os").environ["PATH"]})
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = proc.stdout.split("Job stats:")[1].split("total")[0]
    return Counter({m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)})


# Each case is one `snakemake -n` (3-19 s): the default run keeps one per profile and the
# paper profile's small table; the other targets are `slow`.
SLOW = pytest.mark.slow


@pytest.mark.parametrize(("profile", "target"), [("default", "all"), pytest.param("paper", "all", marks=SLOW),
                                                 ("scale", "all"),
                                                 pytest.param("default", "listsize_figure", marks=SLOW),
                                                 pytest.param("default", "recall_heatmap", marks=SLOW),
                                                 ("paper", "arf_table2"), pytest.param("default", "freeze", marks=SLOW),
                                                 ("compare", "compare"),
                                                 pytest.param("default", "neuralndcg_table2", marks=SLOW),
                                                 pytest.param("default", "arf_table9", marks=SLOW),
                                                 pytest.param("default", "annealing_figure", marks=SLOW),
                                                 pytest.param("paper", "letor_curves", marks=SLOW),
                                                 pytest.param("paper", "arf_table6", marks=SLOW),
                                                 pytest.param("paper", "cd_diagram", marks=SLOW)])
def test_jobs_equal_snakemakes_dag(profile, target):
    from bench.costs.plan import job_count

    expected = snakemake_counts(target, PROFILES[profile])
    total = sum(expected.values())
    expected.pop(target, None)  # the target rule itself (all, or a named table/figure)
    jobs = target_jobs(load_config(*PROFILES[profile]), [target])
    got = Counter(job.rule for job in jobs)
    assert got == expected
    # what `ltr-bench plan` and `status` print beside their count (issue 42: 212 there, 213 here)
    assert f"counts {total:,}:" in job_count(len(jobs), [target])


def test_paper_profile_counts_of_the_issue():
    got = Counter(job.rule for job in target_jobs(load_config("config/paper.yaml"), ["all"]))
    # 2917 neural runs: the LETOR table has no sigmoid-scaled RMSE row (45 runs fewer, issue 22);
    # + 72: the recall heatmaps' models per (m, k), 12 per dataset not in the ARF table, x 2 x 3 seeds
    # + 162 for ARF Tables 6-8 (3 losses x 9 temperatures x 2 datasets x 3 seeds) and 2 for PiRank
    # Fig. 13 (the annealed and tau = 1e12 runs; Fig. 5's four runs are shared), issue 26
    # + 936 for the unified table's six rows of issue 35 (soft rank x 2, SoftSort, DiffSort, PiRank and ARF
    # with SoftSort) x 52 dataset folds x 3 seeds; + 468: its three Plackett-Luce sampling losses (PL-Rank,
    # Gumbel ApproxNDCG and NeuralSort) x 52 dataset folds x 3 seeds
    # + 312 for selecting ARF Table 2's tau x lr (3 losses x 27 points x 2 datasets x 3 seeds = 486, of
    # which the 162 at lr 1e-3 are Tables 6-8's runs; ARF's and NeuralSort's untuned runs, 2 x 2 x 3,
    # are no longer needed: L_Relax's stay, the heatmap's (30, 15) row) and + 48 for PiRank Table 1's
    # tau (2 losses x 4 new points x 2 datasets x 3 seeds; tau = 1000 is the table's own), issue 32
    # + 6 for ARF's point-wise Softmax row in ARF Table 2 (2 datasets x 3 seeds), issue 32
    # - 156 for ARF Table 2's grids of issue 41: tau also at 0.1 and 10 (+ 2 x 3 lr for ARF, + 2 for
    # L_Relax and for NeuralSort: 10 points), lr no longer searched for L_Relax and NeuralSort (- 2 x 18
    # points off Tables 6-8): 10 - 36 = -26 points x 2 datasets x 3 seeds
    # + equal-budget tuning, issue 40: each of the unified table's 26 neural and 2 GBDT methods
    # tries 20 configurations with one seed on Fold1 of each of its 12 datasets, then its chosen
    # one trains the other 2 seeds there and 3 seeds on every other fold: per method and dataset
    # 20 + 2 + 3 (F - 1) runs where it trained 3 F, i.e. 19 more: 19 x 26 x 12 and 19 x 2 x 12
    # - issue 43: those runs are no run jobs: a tuned method's are its tuning's two jobs' (tune: 20
    # configurations; tuned_runs: the other 2 + 3 (F - 1)), 34 per five-fold dataset (ten of them) and
    # 22 on Yahoo and Istella (one fold), 384 per method
    tuned_runs = 10 * (20 + 2 + 3 * 4) + 2 * (20 + 2)
    assert (got["train"], got["gbdt"], got["linear"], got["prepare"]) == (
        2917 + 72 + 162 + 2 + 936 + 468 + 312 + 48 + 6 - 156 + 19 * 26 * 12 - 26 * tuned_runs,
        359 + 19 * 2 * 12 - 2 * tuned_runs, 45, 54)
    # per tuned method and dataset: its tuning and its chosen configuration's runs
    assert (got["tune"], got["tuned_runs"], got["tuning_summary"]) == (28 * 12, 28 * 12, 1)
    # + the ranking of the unified table across its 52 dataset folds (ranking_table, cd_diagram), issue 40
    assert (got["computed_table"], got["toy_sort"], got["coverage"], got["quality_cost"], got["ranking"]) == (
        4, 1, 1, 1, 1)
    # one choice per (table, dataset, fold) with a grid: ARF Table 2 and PiRank Table 1 on two datasets
    assert (got["select"], got["selection_table"]) == (4, 3)  # and the unified table's tuning, issue 40


def test_a_shared_run_is_one_job_needed_by_every_target():
    jobs = target_jobs(load_config(), ["arf_table2", "recall_heatmap"])
    shared = [j for j in jobs if j.rule == "train" and j.targets == ["arf_table2", "recall_heatmap"]]
    assert shared and len({j.output for j in jobs}) == len(jobs)


def test_unknown_or_disabled_targets_are_config_errors():
    config = load_config()
    with pytest.raises(ConfigError, match="unknown target 'tabel'"):
        expand_targets(config, ["tabel"])
    with pytest.raises(ConfigError, match="not enabled"):
        expand_targets(load_config("config/paper.yaml", "config/scale.yaml"), ["arf_table2"])


@pytest.mark.parametrize("overlay", ["scale", "letor", "mslr-sample", "compare-example"])
def test_every_shipped_overlay_plans_its_study(overlay):
    """Each config file the repo ships, merged as its header says, gives the jobs of ``all``
    (without Snakemake: seconds). The MSLR-sample overlay turned the unified table off but not
    the quality-cost figure that draws it, which only its slow end-to-end test noticed."""
    base = [] if overlay == "compare-example" else ["config/paper.yaml"]
    jobs = target_jobs(load_config(*base, f"config/{overlay}.yaml"), ["all"])
    assert any(job.rule == "report" for job in jobs)
