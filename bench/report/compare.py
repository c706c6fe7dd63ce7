r"""The compare page: each new loss against each frozen baseline, and the new losses against each other.

``ltr-bench compare-table`` (:mod:`bench.report.cli`) builds ``reports/compare/<dataset>.md``
(and ``.html``) from the statistics of :func:`bench.stats.versus` and
:func:`bench.stats.significance`; nothing here computes a statistic.

**Blocks**, per metric of the frozen protocol:

1. for every new loss, its mean ± std over seeds in the title and one row per frozen
   baseline, strongest first (by the baseline's mean on that metric): the baseline's mean ±
   std, Δ = new − baseline (metric units), its paired bootstrap CI, the two-sided paired
   test's p-value Holm-adjusted over the baselines (▲ significantly better, ▼ significantly
   worse: the sign of Δ read by the metric's direction), and per-query wins/ties/losses of the
   new loss;
2. with several new losses, every pair of them once (Holm over the pairs);
3. how far a re-run of the baselines on this machine landed from the frozen files (the
   default study's record, :func:`bench.frozen.check_reproduced`), when it was measured;
4. every method with the paper tables' marks (best + not significantly worse than it).

**Several losses, one page.** Every loss compared on a dataset is kept in the **ledger**
``results/compare/<dataset>/losses/<method>.parquet`` (its per-query results, digest-checked)
and ``<method>.json`` (loss, params, label, the protocol hash it was trained under, when).
A compare adds or replaces its own losses there and renders every ledger entry trained under
the current protocol, so a second loss compared later appears beside the first; entries of
another protocol are named in the caption and left out. Delete an entry's two files to drop
it from the page.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from bench.atomic import write_files
from bench.metrics import conventions_caption, higher_is_better
from bench.report.tables import TEST_NAMES, Block, Cell, Table, build_table, decimals, metric_label
from bench.results import read_frame, write_frame

LEDGER = "losses"  # under results/compare/<dataset>/
TWO_SIDED = {name: text.replace("one-sided", "two-sided") for name, text in TEST_NAMES.items()}


# ----------------------------------------------------------------------------- the ledger


def ledger_entries(ledger: str | Path) -> dict[str, dict[str, Any]]:
    """Method -> its ledger record (``<method>.json``), every entry of one dataset."""
    folder = Path(ledger)
    if not folder.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}


def read_ledger(ledger: str | Path, protocol_hash: str, replacing: list[str]) -> tuple[pd.DataFrame, dict, list]:
    """``(per-query frame, records, left out)`` of the ledger's entries trained under
    ``protocol_hash``, except ``replacing`` (the losses this compare brings again); ``left out``
    names the entries of another protocol."""
    frames, kept, left_out = [], {}, []
    for method, record in ledger_entries(ledger).items():
        if method in replacing:
            continue
        if record["protocol_hash"] != protocol_hash:
            left_out.append(f"{record.get('label', method)} (protocol {record['protocol_hash'][:12]})")
            continue
        frames.append(read_frame(Path(ledger) / f"{method}.parquet"))
        kept[method] = record
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), kept, left_out


def write_ledger(ledger: str | Path, new: pd.DataFrame, specs: dict[str, dict[str, Any]], protocol_hash: str) -> None:
    """Add (or replace) each new loss's per-query results and record."""
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for method, frame in new.groupby("method", sort=True):
        spec = specs.get(str(method), {})
        write_frame(frame.reset_index(drop=True), Path(ledger) / f"{method}.parquet")
        record = {"method": str(method), "label": spec.get("label", str(method)), "loss": spec.get("loss"),
                  "params": spec.get("params", {}), "protocol_hash": protocol_hash, "compared_at": stamp,
                  "budget": spec.get("budget", 1), "chosen_label": spec.get("chosen_label", "default (not tuned)"
                                                                             if spec.get("budget", 1) == 1 else "not recorded")}
        write_files({Path(ledger) / f"{method}.json": (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()})


# ----------------------------------------------------------------------------- the page


def _num(value: float, metric: str, *, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:{'+' if signed else ''}.{decimals(metric)}f}"


def _mean(mean: float, std: float, metric: str, several: bool) -> str:
    return f"{_num(mean, metric)} ± {_num(std, metric)}" if several else _num(mean, metric)


def _p(row: dict[str, Any]) -> str:
    """The adjusted p-value, with ▲/▼ when significant: the sign of Δ by the metric's direction."""
    p = row["p_adjusted"]
    text = "< 0.001" if p < 0.001 else f"{p:.3f}"
    if row["significant"]:
        better = (row["diff"] > 0) == higher_is_better(row["metric"])
        text += " ▲" if better else " ▼"
    return text


def _row(row: dict[str, Any], first: str, several: bool, *, ref_mean: bool = True) -> list[Cell]:
    metric = row["metric"]
    cells = [Cell(first)]
    if ref_mean:
        cells.append(Cell(_mean(row["ref_mean"], row["ref_std_over_seeds"], metric, several)))
    cells += [Cell(_num(row["diff"], metric, signed=True)),
              Cell(f"[{_num(row['ci_low'], metric, signed=True)}, {_num(row['ci_high'], metric, signed=True)}]"),
              Cell(_p(row), bold=bool(row["significant"])),
              Cell(f"{row['wins']} / {row['ties']} / {row['losses']}")]
    return cells


def confidence(alpha: float, family: int, simultaneous: bool) -> float:
    """The level of each CI of a family of ``family`` comparisons: Bonferroni's 1 - alpha/family
    when the p-values are adjusted for multiplicity (so the family's intervals hold together at
    1 - alpha, as the adjusted p-values do), else 1 - alpha.

    >>> confidence(0.05, 10, True), confidence(0.05, 10, False), confidence(0.05, 1, True)
    (0.995, 0.95, 0.95)
    """
    return 1 - alpha / max(family, 1) if simultaneous else 1 - alpha


def _ci_sentence(stats: dict[str, Any], n_baselines: int, n_new: int) -> str:
    """What the CI column is: simultaneous (Bonferroni) intervals when the p-values are Holm-adjusted."""
    boot = f"paired percentile bootstrap over queries ({stats['n_boot']} resamples)"
    if stats["correction"] != "holm":
        return f"its {1 - stats['alpha']:.0%} CI: {boot}."
    level = confidence(stats["alpha"], n_baselines, True)
    pairs = n_new * (n_new - 1) // 2
    also = (f"; the new losses' pairs at {confidence(stats['alpha'], pairs, True):.2%}" if pairs > 1 else "")
    return (f"its CI is simultaneous over the {n_baselines} baselines of each new loss and metric: each interval at "
            f"{level:.2%} = 1 − {stats['alpha']}/{n_baselines} (Bonferroni{also}), so the family holds at "
            f"{1 - stats['alpha']:.0%} together, as its Holm-adjusted p-values do; a {boot}. An interval that "
            "excludes 0 is a Bonferroni-significant difference; Holm's step-down p can also flag one whose interval "
            "touches 0, and near alpha the bootstrap interval and the t-test's p can disagree.")


def versus_blocks(baselines: pd.DataFrame, pairs: pd.DataFrame, metrics: list[str], new: list[str],
                  labels: dict[str, str], several: bool, *, simultaneous: bool = False) -> list[Block]:
    """Blocks 1 and 2 of the module docstring."""
    ci = "simultaneous CI of Δ" if simultaneous else "95 % CI of Δ"
    blocks = []
    for metric in metrics:
        for method in new:
            rows = baselines[(baselines.metric == metric) & (baselines.method == method)]
            if rows.empty:
                continue
            rows = rows.sort_values("ref_mean", ascending=not higher_is_better(metric), kind="stable")
            head = rows.iloc[0]
            title = (f"{metric_label(metric)}: {labels.get(method, method)} (new, "
                     f"{_mean(head['mean'], head['std_over_seeds'], metric, several)}) vs each frozen baseline")
            header = ["Baseline (strongest first)", "mean ± std" if several else "mean", "Δ new − baseline",
                      ci, "p (Holm)", "W / T / L"]
            blocks.append(Block(title, header, [_row(r, labels.get(r["reference"], r["reference"]), several)
                                                for r in rows.to_dict("records")]))
        rows = pairs[pairs.metric == metric] if not pairs.empty else pairs
        if len(rows):
            header = ["New loss vs new loss", "Δ first − second", ci, "p (Holm)", "W / T / L"]
            body = [_row(r, f"{labels.get(r['method'], r['method'])} vs {labels.get(r['reference'], r['reference'])}",
                         several, ref_mean=False) for r in rows.to_dict("records")]
            blocks.append(Block(f"{metric_label(metric)}: the new losses against each other", header, body))
    return blocks


def budget_block(manifest: dict[str, Any], records: dict[str, dict[str, Any]], new: list[str], baselines: list[str],
                 labels: dict[str, str]) -> tuple[Block, str]:
    """Both sides' tuning budgets (configurations tried, the chosen one) and the warning when
    they differ: a new loss trained once against tuned baselines wins or loses by configuration.

    >>> manifest = {"tuning": {"fold": "Fold1", "methods": {"b": {"budget": 3, "chosen_label": "lr = 0.01"}}}}
    >>> block, warning = budget_block(manifest, {"n": {"budget": 1, "chosen_label": "default (not tuned)"}}, ["n"],
    ...                               ["b"], {})
    >>> [[c.text for c in row] for row in block.rows]
    [['n (new)', '1', 'default (not tuned)'], ['b', '3', 'lr = 0.01']]
    >>> warning[:60]
    'Unequal budgets: n tried 1 configuration, the baselines 3 (o'
    """
    tuned = (manifest.get("tuning") or {}).get("methods", {})
    rows, sides = [], {}
    for method in new:
        rec = records.get(method, {})
        sides[method] = int(rec.get("budget", 1))
        fallback = "default (not tuned)" if sides[method] == 1 else "not recorded"
        rows.append([Cell(f"{labels.get(method, method)} (new)"), Cell(str(sides[method])),
                     Cell(str(rec.get("chosen_label", fallback)))])
    frozen = []
    for method in baselines:
        facts = tuned.get(method, {"budget": 1, "chosen_label": "default (not tuned)"})
        frozen.append(int(facts["budget"]))
        rows.append([Cell(labels.get(method, method)), Cell(str(facts["budget"])), Cell(str(facts["chosen_label"]))])
    split = (manifest.get("tuning") or {}).get("fold")
    title = "Tuning budgets: configurations each method tried" + (f" on {split}'s validation split" if split else "")
    block = Block(title, ["Method", "configurations", "chosen"], rows)
    shown = sorted(set(frozen))
    baseline_text = "/".join(map(str, shown))
    unequal = [m for m, b in sides.items() if set(frozen) != {b}]
    if not unequal:
        return block, ""
    names = ", ".join(f"{labels.get(m, m)} tried {sides[m]} configuration{'s' if sides[m] > 1 else ''}" for m in unequal)
    advice = ("give the loss a search space (compare.losses.<i>.search) to tune it with the baselines' budget"
              if max(shown, default=1) > min(sides.values()) else
              "the baselines were frozen with fewer configurations: re-freeze them under the current tuning budget")
    return block, (f"Unequal budgets: {names}, the baselines {baseline_text} (on the same validation split): the "
                   f"difference may come from tuning, not from the loss; {advice}.")


def reproduction_block(record: dict[str, Any] | None, metrics: list[str], labels: dict[str, str]) -> Block | None:
    """Block 3: per metric, the largest per-query and mean differences of a re-run here."""
    if not record or not record.get("methods"):
        return None
    header = ["Metric", "largest per-query |Δ| (method)", "largest |Δ mean| (method)", "tolerance across platforms"]
    rows = []
    tolerance = record.get("tolerance") or {}
    for metric in metrics:
        per_query = max(record["methods"], key=lambda d: d["max_abs"][metric])
        mean = max(record["methods"], key=lambda d: abs(d["mean_diff"][metric]))
        rows.append([Cell(metric_label(metric)),
                     Cell(_worst(per_query["max_abs"][metric], per_query["method"], metric, labels)),
                     Cell(_worst(mean["mean_diff"][metric], mean["method"], metric, labels, signed=True)),
                     Cell(_num(tolerance[metric], metric) if metric in tolerance else "not judged")])
    return Block("The frozen baselines re-run on this machine (the default study) vs the frozen files", header, rows)


def _worst(value: float, method: str, metric: str, labels: dict[str, str], *, signed: bool = False) -> str:
    """A largest difference and the method it belongs to (none when every method is identical)."""
    text = _num(value, metric, signed=signed)
    return f"{text} ({labels.get(method, method)})" if value != 0 else f"{text} (every method identical)"


def _platform(facts: dict[str, Any] | None) -> str:
    if not facts:
        return "an unrecorded platform"
    libs = facts.get("libraries", {})
    return (f"{facts.get('cpu')} ({facts.get('torch_cpu_capability')} kernels, {len(facts.get('cpu_isa', []))} SIMD "
            f"flags{', ' + str(facts['isa_variables']) if facts.get('isa_variables') else ''}; torch {libs.get('torch')}, "
            f"{facts.get('torch_threads')} thread(s))")


def provenance_sentences(manifest: dict[str, Any], here: dict[str, Any], record: dict[str, Any] | None,
                         manifest_sha: str, differences: list[str]) -> str:
    """Where and from what code the baselines were frozen, what their bits depend on, and how a
    re-run here lands (or that none was measured)."""
    code = manifest["code_version"]
    dirty = " with uncommitted changes" if code.get("git_dirty") else ""
    parts = [f"Frozen baselines: {len(manifest['methods'])} methods frozen {manifest['created_at']} at commit "
             f"{str(code['git_commit'])[:10]}{dirty} on {_platform(manifest.get('platform'))}; their per-query bits "
             f"depend on {manifest.get('bits_depend_on', 'the code, the protocol, the data and the platform')}."]
    if differences:
        parts.append(f"This machine differs from the freezing one in: {', '.join(differences)} ({_platform(here)}), so a "
                     "re-run here gives other bits.")
    else:
        parts.append("This machine has the freezing platform's facts: a re-run here with the same code gives the same bits.")
    if record and record.get("manifest_sha256") == manifest_sha and record.get("line"):
        parts.append(f"Checked by the default study on this machine: {record['line']}.")
    else:
        parts.append("No re-run of the baselines on this machine was measured yet (`snakemake --cores 2 all` checks "
                     "them: results/compare/<dataset>/reproduced.json).")
    return " ".join(parts)


def page(versus_baselines: pd.DataFrame, versus_pairs: pd.DataFrame, marks: pd.DataFrame, spec: dict[str, Any],
         *, new: list[str], baselines: list[str], provenance: str, record: dict[str, Any] | None,
         left_out: list[str], manifest: dict[str, Any] | None = None,
         ledger: dict[str, dict[str, Any]] | None = None) -> Table:
    """The page as one :class:`bench.report.tables.Table` (module docstring); ``manifest`` the
    frozen baselines' (their tuning), ``ledger`` each new loss's record (its budget)."""
    labels = spec.get("labels", {})
    metrics = list(spec["metrics"])
    stats = {"test": "t", "correction": "holm", "alpha": 0.05, "n_boot": 1000, **spec.get("stats", {})}
    seeds = spec["protocol"]["seeds"]
    several = len(seeds) > 1
    ev = {"empty_query": "one", "ties": "stable", **spec["protocol"].get("evaluation", {})}
    corr = "Holm-Bonferroni-adjusted" if stats["correction"] == "holm" else "not adjusted"
    caption = [
        f"Each new loss trained under the frozen protocol (hash {spec['protocol_hash'][:12]}) on {spec['dataset']} "
        f"and tested against each of the {len(baselines)} frozen baselines, per metric.",
        (f"Mean ± standard deviation over {len(seeds)} seeds of the per-seed means;" if several else "One seed;")
        + " test queries of all folds pooled, each query's value averaged over the seeds.",
        "Δ = new − baseline mean in metric units (ARP: lower is better, so a negative Δ favours the new loss); "
        + _ci_sentence(stats, len(baselines), len(new)),
        f"p: {TWO_SIDED.get(stats['test'], stats['test'])} on the per-query values, {corr} over the baselines of "
        f"each new loss and metric{' (the new losses against each other: over their pairs)' if len(new) > 1 else ''}; "
        f"bold ▲ / ▼: significantly better / worse at alpha = {stats['alpha']} (the sign of Δ gives the direction).",
        "W / T / L: test queries where the new loss (the first) is better / equal within 1e-12 / worse.",
        "Baselines strongest first, by their mean on each metric.",
        conventions_caption(ev["empty_query"], ev["ties"], ev.get("convention", "default"), metrics=metrics),
        provenance,
    ]
    if left_out:
        caption.append(f"Left out (compared under another protocol; compare them again to include them): "
                       f"{', '.join(left_out)}.")
    caption.append("Last block: every method with the paper tables' marks (bold: the best mean and every method not "
                   "significantly worse than it by the one-sided test against the best; underlined: the best).")
    budgets, warning = budget_block(manifest or {}, ledger or {}, new, baselines, labels)
    caption.insert(1, warning or "Budgets: every compared loss tried as many configurations as each baseline, on the "
                   "same validation split (the budgets block).")
    blocks = versus_blocks(versus_baselines, versus_pairs, metrics, new, labels, several,
                           simultaneous=stats["correction"] == "holm")
    blocks.insert(0, budgets)
    extra = reproduction_block(record, metrics, labels)
    if extra is not None:
        blocks.append(extra)
    marks_spec = {"name": "marks", "datasets": [{"name": spec["dataset"]}], "metrics": metrics, "seeds": seeds,
                  "methods": [{"name": m, "label": f"{labels.get(m, m)} (new)"} for m in new]
                  + [{"name": m, "label": labels.get(m, m)} for m in baselines]}
    for block in build_table(marks, marks_spec).blocks:
        blocks.append(Block(f"Every method with the paper tables' marks: {block.title}", block.header, block.rows))
    title = f"New loss{'es' if len(new) > 1 else ''} vs the frozen baselines on {spec['dataset']}"
    return Table(f"compare_{spec['dataset']}", title, " ".join(caption), blocks)
