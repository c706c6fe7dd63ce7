"""The Snakemake workflow: lint, targeted planning, profiles, early config errors, compare.

Dry runs use ``--nolock`` so they work beside a running study; the compare test runs in a
copy of the workflow under ``tmp_path`` against the committed frozen baselines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


def snakemake(*args: str, cwd: Path = ROOT, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["snakemake", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def _jobs(output: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job a dry run prints."""
    jobs = []
    for block in re.split(r"\n(?=\s*(?:local)?rule \w+:)", output):  # a group's jobs are indented
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not head:
            continue
        wc = re.search(r"wildcards: (.+)", block)
        wildcards = dict(p.split("=", 1) for p in wc.group(1).split(", ")) if wc else {}
        res = re.search(r"resources: (.+)", block)
        wildcards["_resources"] = res.group(1) if res else ""
        jobs.append((head.group(1), wildcards))
    return jobs


def test_lint_reports_nothing():
    proc = snakemake("--lint")
    assert proc.returncode == 0, proc.stderr
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr


def test_named_table_target_plans_only_what_it_needs():
    proc = snakemake("-n", "--nolock", "--forceall", "pirank_table1")
    assert proc.returncode == 0, proc.stderr
    jobs = _jobs(proc.stdout)
    runs = [w for rule, w in jobs if rule in ("train", "gbdt")]
    assert len(runs) == 6 * 2  # six methods, two seeds, one synthetic stand-in dataset
    assert {w["experiment"] for w in runs} == {"pirank"}
    assert {w["dataset"] for w in runs} == {"syn-web"}  # MSLR and Yahoo roles share one stand-in
    rules = {rule for rule, _ in jobs}
    assert {"prepare", "evaluate", "stats", "table", "pirank_table1"} <= rules
    assert not rules & {"figure", "perf_scaling", "report", "fetch"}
    assert all("gpu=0" in w["_resources"] for rule, w in jobs if rule == "train")


def test_letor_table_plans_least_squares_runs_with_the_linear_rule():
    proc = snakemake("-n", "--nolock", "--forceall", "sinkprop_letor")
    assert proc.returncode == 0, proc.stderr
    jobs = _jobs(proc.stdout)
    by_rule = {}
    for rule, w in jobs:
        if rule in ("train", "gbdt", "linear"):
            by_rule.setdefault(rule, set()).add((w["method"], w["fold"]))
    folds = {"Fold1", "Fold2"}
    assert by_rule["linear"] == {("linear_regression", f) for f in folds}
    assert {m for m, _ in by_rule["train"]} == {"sinkprop", "listnet", "ranknet", "rmse"}
    assert {m for m, _ in by_rule["gbdt"]} == {"lambdamart"}


def test_paper_profile_plans_real_datasets_with_gpu_resources():
    proc = snakemake("-n", "--nolock", "--forceall", "pirank_table1", "--configfile=config/paper.yaml")
    assert proc.returncode == 0, proc.stderr
    jobs = _jobs(proc.stdout)
    assert {w["source"] for rule, w in jobs if rule == "fetch"} == {"mslr-web30k", "yahoo-set1"}
    train = [w for rule, w in jobs if rule == "train"]
    assert {w["dataset"] for w in train} == {"mslr-web30k", "yahoo-set1"}
    assert {w["fold"] for w in train} == {"Fold1"}
    # (methods + 4 more tau points of PiRank and NeuralSort each, selected on validation) x datasets x seeds
    assert len(train) == (6 + 2 * 4) * 2 * 3
    assert all("gpu=1" in w["_resources"] for w in train)


def test_slurm_profile_puts_gpus_on_gpu_rules_only():
    # the profile does not force GPUs: the study config asks for them (config/paper.yaml does)
    proc = snakemake("-n", "--nolock", "--forceall", "--profile", "workflows/profiles/slurm", "unified_table",
                     "--config", "gpu=True")
    assert proc.returncode == 0, proc.stderr
    jobs = _jobs(proc.stdout)
    # the unified table's methods are all tuned: a tuning's two jobs train their runs, on the GPU
    # for a neural method (as its runs' rule, train), on the CPU partition for a GBDT method
    from bench.config import plan
    from bench.config.validate import load_config

    config = load_config()
    neural = [(rule, w) for rule, w in jobs if rule in ("tune", "tuned_runs")
              and plan.run_rule(config, "unified", w["method"].removesuffix("+tuned")) == "train"]
    assert neural and all("gpu=1" in w["_resources"] and "slurm_partition=gpu" in w["_resources"] for _, w in neural)
    gbdt = [w["_resources"] for rule, w in jobs if rule in ("tune", "tuned_runs") and (rule, w) not in neural]
    assert gbdt and not any("gpu=1" in r or "slurm_partition=gpu" in r for r in gbdt)
    others = [w["_resources"] for rule, w in jobs if rule in ("evaluate", "stats", "table")]
    assert others and not any("gpu=1" in r or "slurm_partition=gpu" in r for r in others)
    profile = yaml.safe_load((ROOT / "workflows/profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm"


def test_invalid_config_fails_before_any_job_naming_the_key(tmp_path):
    proc = snakemake("-n", "--nolock", "all", "--config", "threads=zero")
    assert proc.returncode != 0
    assert "config key 'threads'" in proc.stderr + proc.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("protocols:\n  unified:\n    train:\n      epoch: 3\n")
    proc = snakemake("-n", "--nolock", "all", f"--configfile={bad}")
    assert proc.returncode != 0
    assert "protocols.unified.train.epoch" in proc.stderr + proc.stdout


COPIED = ("Snakefile", "environment.yml", "workflows", "config", "examples", "results/frozen",
          "bench/report/paper_numbers.yaml", "docs/coverage.md")  # the coverage rule renders it


def _copy_workflow(root: Path) -> Path:
    """Copy the workflow (and the committed frozen baselines) to ``root`` and return it."""
    for rel in COPIED:
        src = ROOT / rel
        if src.is_dir():
            shutil.copytree(src, root / rel)
        else:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
    return root


@pytest.mark.slow
def test_missing_manual_dataset_says_where_to_put_the_archive(tmp_path):
    root = _copy_workflow(tmp_path / "study")  # runs a real job: keep it out of the checkout
    flag = root / "results" / "fetched" / "yahoo-set1.done"
    proc = snakemake("--cores", "1", "results/fetched/yahoo-set1.done", "--configfile=config/paper.yaml",
                     "--config", f"raw_dir={tmp_path / 'raw'}", cwd=root)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr + (root / "results/logs/fetch/yahoo-set1.log").read_text()
    assert "yahoo" in text.lower() and str(tmp_path / "raw") in text and "dataset.tgz" in text
    assert not flag.exists()


# ----------------------------------------------------------------------------- compare



def test_a_changed_method_reruns_its_own_runs_and_no_other(tmp_path):
    """A planned run's config is no file of its own: the run job gets it on its command line
    (`--config-json`) and Snakemake keeps it among the job's params. So changing a method's entry
    reruns that method's runs, another method's change leaves them alone, and the digest the run
    records tells `ltr-bench status` whose config it was made with."""
    from bench.config import plan
    from bench.config.validate import load_config

    root = _copy_workflow(tmp_path / "study")
    run = "results/runs/pirank_ablation/syn-web/Fold1/pirank_ndcg_L10/seed0"
    proc = snakemake("--cores", "2", plan.run_record(run), cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recorded = json.loads((root / run / "run.json").read_text())["run_config_sha256"]
    assert recorded == plan.run_config_digest(load_config(), "pirank_ablation", "syn-web", "pirank_ndcg_L10")

    def planned(change: str) -> list[tuple[str, dict[str, str]]]:
        (root / "change.yaml").write_text(change)
        proc = snakemake("-n", "--nolock", plan.run_record(run), "--configfile", "change.yaml", cwd=root)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [(rule, w) for rule, w in _jobs(proc.stdout) if rule == "train"]

    assert planned("methods:\n  pirank_ndcg_L20:\n    params: {tau: 4.0}\n") == []  # another method's entry
    [(_, wildcards)] = planned("methods:\n  pirank_ndcg_L10:\n    params: {tau: 4.0}\n")  # its own entry
    assert wildcards["method"] == "pirank_ndcg_L10" and wildcards["seed"] == "0"
    changed = load_config(str(root / "change.yaml"))
    assert recorded != plan.run_config_digest(changed, "pirank_ablation", "syn-web", "pirank_ndcg_L10")

# `compare` end to end (10-15 s each; they share this folder, so they are `slow` together; the
# refusals themselves are unit-tested in tests/test_frozen.py)
@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A copy of the workflow (and the committed frozen baselines) to run compare in."""
    return _copy_workflow(tmp_path_factory.mktemp("study"))


def _compare(study: Path, *extra: str) -> subprocess.CompletedProcess:
    return snakemake("--cores", "2", "compare", "--configfile=config/compare-example.yaml", *extra, cwd=study)


@pytest.mark.slow
def test_compare_trains_only_the_new_loss_and_tables_it_against_the_frozen_baselines(study):
    manifest = json.loads((study / "results/frozen/default/syn-web/manifest.json").read_text())
    (study / "reports").mkdir(exist_ok=True)
    (study / "reports/report.html").write_text("<html></html>")  # an earlier study's report
    proc = _compare(study)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # it ends naming the compare page, not the study's report
    lines = (proc.stdout + proc.stderr).splitlines()
    ours = [line for line in lines if line.startswith(("The compare page", "The study's report", "Tables and figures"))]
    assert ours == [f"The compare page: {(study / 'reports/compare/syn-web.html').resolve()} (the new losses against "
                    "every frozen baseline; open it in a browser, the Markdown is beside it)"], ours
    runs = sorted(p.relative_to(study / "results/runs").as_posix() for p in (study / "results/runs").rglob("scores.npy"))
    # the new loss tries the baselines' budget (3 configurations, tuning seed 0), then its chosen
    # configuration trains the other seed (config/compare-example.yaml's `search`, issue 40)
    assert runs == sorted(f"compare/syn-web/Fold1/{m}/seed{s}/scores.npy" for m, s in (
        ("squared_hinge", 0), ("squared_hinge+cfg2", 0), ("squared_hinge+cfg3", 0), ("squared_hinge+tuned", 1)))
    md = (study / "reports/compare/syn-web.md").read_text()
    assert "| Pairwise squared hinge (examples/my_loss.py) (new) |" in md
    labels = yaml.safe_load((study / "config/default.yaml").read_text())["methods"]
    for method in manifest["methods"]:
        assert f"| {labels[method]['label']} |" in md
    assert f"frozen protocol (hash {manifest['protocol_hash'][:12]})" in md
    assert md.count("vs each frozen baseline") == len(manifest["protocol"]["metrics"])
    stats = pd.read_parquet(study / "results/stats/compare/syn-web.parquet")  # the page's numbers
    assert set(stats.method) == {"squared_hinge"} and set(stats.reference) == set(manifest["methods"])
    assert stats.groupby("metric").size().eq(len(manifest["methods"])).all()
    assert (stats.p_adjusted >= stats.p_value).all()


@pytest.mark.slow
def test_compare_refuses_a_changed_protocol(study):
    changed = study / "changed.yaml"
    changed.write_text("protocols:\n  unified:\n    train:\n      epochs: 2\n")
    proc = snakemake("--cores", "2", "compare", "--configfile", "config/compare-example.yaml", "changed.yaml",
                     cwd=study)
    assert proc.returncode != 0
    frozen_epochs = yaml.safe_load((ROOT / "config/default.yaml").read_text())["protocols"]["unified"]["train"]["epochs"]
    assert f"train.epochs: frozen {frozen_epochs}, current 2" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_compare_refuses_a_tampered_frozen_file(study):
    target = study / "results/frozen/default/syn-web/baselines/ranknet.parquet"
    original = target.read_bytes()
    frame = pd.read_parquet(target)
    frame.loc[0, "ndcg@10"] = 1.0 - frame.loc[0, "ndcg@10"]
    frame.to_parquet(target, index=False)
    try:
        proc = _compare(study, "--forcerun", "check_frozen")
        assert proc.returncode != 0
        assert "ranknet.parquet fails its checksum" in proc.stdout + proc.stderr
    finally:
        target.write_bytes(original)


@pytest.mark.slow
def test_compare_refuses_changed_data(study):
    meta_path = study / "results/prepared/syn-web/Fold1/meta.json"
    original = meta_path.read_text()
    meta = json.loads(original)
    meta["fingerprint"] = "0" * 64  # as if prepare had produced different arrays
    meta_path.write_text(json.dumps(meta))
    try:
        proc = _compare(study, "--forcerun", "check_frozen")
        assert proc.returncode != 0
        assert "dataset fingerprint of syn-web Fold1 differs" in proc.stdout + proc.stderr
    finally:
        meta_path.write_text(original)


# ----------------------------------------------------------------------------- the full study


@pytest.mark.slow
def test_all_on_the_default_profile_produces_every_table_figure_and_the_report(tmp_path):
    _copy_workflow(tmp_path)  # the one list of what the workflow reads (it had its own, without docs/coverage.md)
    started = time.perf_counter()
    proc = snakemake("--cores", "2", "all", cwd=tmp_path, timeout=3600)
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for table in ("pirank_table1", "neuralndcg_table3", "arf_table2", "listsize_table3", "sinkprop_letor",
                  "unified_table"):
        for fmt in ("md", "tex", "html"):
            assert (tmp_path / f"reports/tables/{table}.{fmt}").stat().st_size > 0
    for figure in ("scaling_figure", "temperature_figure", "listsize_figure", "recall_heatmap", "neuralndcg_curves"):
        assert (tmp_path / f"reports/figures/{figure}.png").read_bytes()[:4] == b"\x89PNG"
        assert (tmp_path / f"reports/figures/{figure}.pdf").read_bytes()[:4] == b"%PDF"
    assert (tmp_path / "reports/report.html").stat().st_size > 10_000
    assert f"The study's report: {(tmp_path / 'reports/report.html').resolve()}" in proc.stdout + proc.stderr
    # issue 42: every title and full caption readable without JavaScript, and each entry its own
    from bench.report.text import NOSCRIPT_ID, figure_entry, table_entry

    report = (tmp_path / "reports/report.html").read_text(encoding="utf-8")
    section = report[report.index(f'<noscript id="{NOSCRIPT_ID}">'):report.index("</noscript>")]
    pages = sorted((tmp_path / "reports/tables").glob("*.html"))
    assert len(pages) >= 14
    for entry in [*map(table_entry, pages), *map(figure_entry, (tmp_path / "reports/figures").glob("*.png"))]:
        assert entry.title in section and entry.caption in section and "drawn without a title" not in entry.title
    assert report.count("Hyperparameter selection of ARF") >= 2  # the selection table's own caption, in the app too
    # ARF's row selected on validation (issue 32): the selection table marks the chosen point
    assert "| **✓** |" in (tmp_path / "reports/tables/arf_table2_selection.md").read_text(encoding="utf-8")
    print(f"snakemake --cores 2 all: {elapsed:.0f} s")


# ----------------------------------------------------------------------------- the frozen baselines, reproduced


@pytest.mark.slow
def test_the_study_fails_naming_the_refreeze_when_a_baseline_loss_changes(tmp_path):
    """CI's guard, proved: freeze one baseline on this machine (a one-epoch protocol keeps it
    short), the study's check passes per query identical; a one-line change to that baseline's
    loss in this temporary copy makes the check fail, naming the command that re-freezes."""
    from helpers import copy_checkout

    root = copy_checkout(tmp_path / "study")
    shutil.rmtree(root / "results" / "frozen")
    small = root / "small.yaml"
    small.write_text("protocols:\n  unified:\n    train: {epochs: 1}\nfreeze:\n  methods: [softmax]\n")
    target = "results/compare/syn-web/reproduced.json"
    assert snakemake("--cores", "2", "freeze", f"--configfile={small}", cwd=root).returncode == 0
    proc = snakemake("--cores", "2", target, f"--configfile={small}", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "frozen baselines reproduced: 1/1 methods, per query identical" in proc.stdout + proc.stderr
    loss = root / "bench" / "losses" / "listwise.py"
    head, line, tail = loss.read_text().partition("def softmax(")
    old = "    per_list = -(target * masked_log_softmax(s, mask)).sum(dim=-1)\n"
    assert old in tail  # the one line changed: Softmax's scores scaled by 1.01
    loss.write_text(head + line + tail.replace(old, old.replace("masked_log_softmax(s,", "masked_log_softmax(1.01 * s,")))
    proc = snakemake("--cores", "2", target, f"--configfile={small}", "--forcerun", "tune", "tuned_runs", cwd=root)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "frozen baselines NOT reproduced on the platform they were frozen on: 1/1 methods differ per query" in out
    assert "re-freeze: `snakemake --cores 2 freeze --forcerun train gbdt linear tune tuned_runs`" in out
    # the run's last lines name the failed job's own error, not only "check log file(s)"
    assert "ltr-bench: check_reproduced job failed: ltr-bench check-reproduced: error: frozen baselines NOT" in out
