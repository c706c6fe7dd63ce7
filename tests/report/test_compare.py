"""The compare page: each new loss against each frozen baseline, strongest first; the ledger
keeps every compared loss, so a second compare adds to the page; the numbers are those of
bench.stats.versus (tested against scipy in tests/test_stats.py), copied, never recomputed."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import frozen as fz
from bench.cli import main
from bench.report import compare as C
from bench.results import read_frame, write_frame

PROTOCOL = {"dataset": {"name": "syn"}, "seeds": [0, 1], "evaluation": {"empty_query": "one", "ties": "stable"},
            "metrics": ["ndcg@10", "arp"]}


def _frame(method: str, shift: float, n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(zlib.crc32(method.encode()))
    base = np.random.default_rng(0).uniform(0.2, 0.8, n)
    rows = []
    for seed in (0, 1):
        noise = rng.normal(0, 0.01, n)
        rows.append(pd.DataFrame({"dataset": "syn", "fold": "Fold1", "seed": seed, "method": method,
                                  "query": np.arange(n), "ndcg@10": base + shift + noise, "ndcg@10:dropped": False,
                                  "arp": 10 - 10 * (base + shift + noise), "arp:dropped": False}))
    return pd.concat(rows, ignore_index=True)


@pytest.fixture
def study(tmp_path):
    prepared = tmp_path / "prep" / "Fold1"
    prepared.mkdir(parents=True)
    (prepared / "meta.json").write_text(json.dumps({"fold": "Fold1", "fingerprint": "f" * 64}))
    baselines = pd.concat([_frame("weak", -0.1), _frame("strong", 0.05), _frame("middle", 0.0)], ignore_index=True)
    frozen = fz.freeze(baselines, tmp_path / "frozen", profile="test", dataset="syn", protocol=PROTOCOL,
                       prepared_dirs=[prepared], platform={"cpu": "x"})
    return tmp_path, frozen, prepared


def _compare(root: Path, frozen: Path, prepared: Path, name: str, shift: float, label: str) -> str:
    new = root / f"{name}.parquet"
    write_frame(_frame(name, shift), new)
    spec = {"dataset": "syn", "profile": "test", "metrics": PROTOCOL["metrics"], "protocol": PROTOCOL,
            "stats": {"n_boot": 200}, "labels": {"strong": "Strong", "middle": "Middle", "weak": "Weak", name: label},
            "threads": 1, "new_specs": {name: {"loss": f"m:{name}", "params": {}, "label": label}}}
    args = ["compare-table", "--frozen", str(frozen), "--new", str(new), "--prepared", str(prepared),
            "--spec", json.dumps(spec), "--ledger", str(root / "ledger"), "--reproduced", str(root / "none.json"),
            "--stats-out", str(root / "stats.parquet"), "--md", str(root / "page.md"), "--html", str(root / "page.html")]
    assert main(args) == 0
    return (root / "page.md").read_text()


def _block(md: str, title_start: str) -> list[str]:
    """The data rows of the first block whose title starts with ``title_start``."""
    part = md.split(f"#### {title_start}", 1)[1].split("####", 1)[0]
    return [line for line in part.splitlines() if line.startswith("| ") and "---" not in line][1:]


def test_a_second_compare_adds_its_loss_beside_the_first(study):
    root, frozen, prepared = study
    first = _compare(root, frozen, prepared, "alpha", 0.02, "Alpha")
    assert "Alpha (new" in first and "Beta (new" not in first and "against each other" not in first
    second = _compare(root, frozen, prepared, "beta", 0.08, "Beta")
    assert "#### NDCG@10: Alpha (new" in second and "#### NDCG@10: Beta (new" in second
    pair = _block(second, "NDCG@10: the new losses against each other")
    expected = _frame("alpha", 0.02)["ndcg@10"].mean() - _frame("beta", 0.08)["ndcg@10"].mean()  # both seeds, all queries
    assert len(pair) == 1 and pair[0].startswith(f"| Alpha vs Beta | {expected:+.4f} |")
    stats = read_frame(root / "stats.parquet")
    assert set(stats.method) == {"alpha", "beta"} and set(stats.family) == {"baselines", "new losses"}
    assert sorted(C.ledger_entries(root / "ledger")) == ["alpha", "beta"]
    # comparing Alpha again replaces its entry instead of adding a second one
    again = _compare(root, frozen, prepared, "alpha", 0.02, "Alpha, again")
    assert again.count("#### NDCG@10: Alpha, again (new") == 1 and "#### NDCG@10: Alpha (new" not in again


def test_each_block_lists_the_baselines_strongest_first_with_the_tests_numbers(study):
    root, frozen, prepared = study
    md = _compare(root, frozen, prepared, "alpha", 0.02, "Alpha")
    stats = read_frame(root / "stats.parquet").set_index(["metric", "reference"])
    for metric, title in (("ndcg@10", "NDCG@10: Alpha"), ("arp", "ARP ↓: Alpha")):
        rows = _block(md, title)
        assert [r.split(" | ")[0].lstrip("| ") for r in rows] == ["Strong", "Middle", "Weak"]  # ARP: smallest first
        strong = stats.loc[(metric, "strong")]
        cells = rows[0].strip("| ").split(" | ")
        digits = 4 if metric == "ndcg@10" else 3
        assert cells[2] == f"{strong['diff']:+.{digits}f}"
        assert cells[3] == f"[{strong['ci_low']:+.{digits}f}, {strong['ci_high']:+.{digits}f}]"
        assert cells[5] == f"{strong['wins']} / {strong['ties']} / {strong['losses']}"
        # Alpha is worse than Strong and better than Weak on both metrics: ▼ and ▲ whatever the direction
        assert "▼" in cells[4] and "▲" in rows[2]
    assert "two-sided paired t-test" in md and "Holm-Bonferroni-adjusted over the baselines" in md


def test_ledger_leaves_out_losses_of_another_protocol_and_names_them(tmp_path):
    C.write_ledger(tmp_path, _frame("old", 0.0), {"old": {"label": "Old loss"}}, "a" * 64)
    C.write_ledger(tmp_path, _frame("kept", 0.0), {}, "b" * 64)
    frame, records, left_out = C.read_ledger(tmp_path, "b" * 64, replacing=[])
    assert set(frame.method) == {"kept"} and list(records) == ["kept"]
    assert left_out == ["Old loss (protocol aaaaaaaaaaaa)"]
    frame, records, _ = C.read_ledger(tmp_path, "b" * 64, replacing=["kept"])
    assert frame.empty and records == {}


def test_the_page_says_where_the_baselines_were_frozen_and_how_a_rerun_here_lands(study):
    root, frozen, prepared = study
    manifest = fz.read_manifest(frozen)
    sha = fz.file_sha256(frozen / fz.MANIFEST)
    record = {"manifest_sha256": sha, "line": "frozen baselines reproduced: 3/3 methods, per query identical",
              "tolerance": {"ndcg@10": 0.01},
              "methods": [{"method": "strong", "max_abs": {"ndcg@10": 0.5, "arp": 2.0},
                           "mean_diff": {"ndcg@10": -0.002, "arp": 0.03}},
                          {"method": "weak", "max_abs": {"ndcg@10": 0.1, "arp": 4.0},
                           "mean_diff": {"ndcg@10": 0.004, "arp": -0.01}}]}
    text = C.provenance_sentences(manifest, {"cpu": "y"}, record, sha, ["cpu"])
    assert f"at commit {str(manifest['code_version']['git_commit'])[:10]}" in text
    assert "differs from the freezing one in: cpu" in text and "per query identical" in text
    assert "No re-run" in C.provenance_sentences(manifest, {"cpu": "x"}, None, sha, [])
    block = C.reproduction_block(record, ["ndcg@10", "arp"], {"strong": "Strong", "weak": "Weak"})
    cells = [[c.text for c in row] for row in block.rows]
    assert cells == [["NDCG@10", "0.5000 (Strong)", "+0.0040 (Weak)", "0.0100"],
                     ["ARP ↓", "4.000 (Weak)", "+0.030 (Strong)", "not judged"]]


def _tuned_study(tmp_path, budget: int):
    """Frozen baselines tuned with ``budget`` configurations each (their manifest says so)."""
    prepared = tmp_path / "prep" / "Fold1"
    prepared.mkdir(parents=True)
    (prepared / "meta.json").write_text(json.dumps({"fold": "Fold1", "fingerprint": "f" * 64}))
    baselines = pd.concat([_frame("weak", -0.1), _frame("strong", 0.05), _frame("middle", 0.0)], ignore_index=True)
    records = [{"fold": "Fold1", "seeds": [0], "budget": budget, "tuning": {"space_text": "train.lr log-uniform"},
                "methods": {m: {"chosen": f"{m}+cfg2", "chosen_label": "lr = 0.003", "chosen_settings": {"train.lr": 0.003},
                                "metric": "ndcg@10", "points": [{"name": f"{m}+cfg2", "mean": 0.5}]}}}
               for m in ("weak", "strong", "middle")]
    frozen = fz.freeze(baselines, tmp_path / "frozen", profile="test", dataset="syn", protocol=PROTOCOL,
                       prepared_dirs=[prepared], platform={"cpu": "x"}, tuning=records)
    return tmp_path, frozen, prepared


def test_the_manifest_records_each_baselines_tuning_and_the_page_states_both_budgets(tmp_path):
    root, frozen, prepared = _tuned_study(tmp_path, budget=3)
    manifest = fz.read_manifest(frozen)
    assert manifest["tuning"]["fold"] == "Fold1"
    assert manifest["tuning"]["methods"]["strong"] == {
        "budget": 3, "chosen": "strong+cfg2", "chosen_label": "lr = 0.003", "chosen_settings": {"train.lr": 0.003},
        "metric": "ndcg@10", "space": "train.lr log-uniform", "validation_mean": 0.5}
    md = _compare(root, frozen, prepared, "untuned", 0.02, "Untuned")  # new_specs without a budget: trained once
    budgets = _block(md, "Tuning budgets")
    assert budgets[0] == "| Untuned (new) | 1 | default (not tuned) |"
    assert "| Strong | 3 | lr = 0.003 |" in budgets
    assert "Unequal budgets: Untuned tried 1 configuration, the baselines 3" in md
    assert "give the loss a search space (compare.losses.<i>.search)" in md


def test_equal_budgets_raise_no_warning_and_the_intervals_are_simultaneous_over_the_baselines(tmp_path):
    root, frozen, prepared = _tuned_study(tmp_path, budget=3)
    new = root / "tuned.parquet"
    write_frame(_frame("tuned", 0.02), new)
    spec = {"dataset": "syn", "profile": "test", "metrics": PROTOCOL["metrics"], "protocol": PROTOCOL,
            "stats": {"n_boot": 200}, "labels": {"tuned": "Tuned"}, "threads": 1,
            "new_specs": {"tuned": {"loss": "m:tuned", "params": {}, "label": "Tuned", "budget": 3}}}
    args = ["compare-table", "--frozen", str(frozen), "--new", str(new), "--prepared", str(prepared),
            "--spec", json.dumps(spec), "--ledger", str(root / "ledger"), "--reproduced", str(root / "none.json"),
            "--stats-out", str(root / "stats.parquet"), "--md", str(root / "page.md")]
    assert main(args) == 0
    md = (root / "page.md").read_text()
    assert "Unequal budgets" not in md and "| Tuned (new) | 3 | not recorded |" in md
    assert "simultaneous CI of Δ" in md and "98.33% = 1 − 0.05/3" in md
    stats = read_frame(root / "stats.parquet")
    assert set(stats["confidence"]) == {1 - 0.05 / 3}  # three baselines: Bonferroni's level, as Holm adjusts p
    assert json.loads((root / "ledger" / "tuned.json").read_text())["budget"] == 3
