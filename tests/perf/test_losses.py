"""The loss perf harness at tiny sizes: a well-formed table, atomic output, clear errors.

No wall-time assertions (targets are printed, never asserted: docs/performance.md): only
structure, and that every reference computes the same value as its loss (the table's
``rel. diff`` column).
"""

from __future__ import annotations

import textwrap

import pytest

from bench import losses
from bench.cli import main
from bench.losses.complexity import stated_complexity
from bench.perf import losses as perf
from bench.perf import reference as perf_reference
from bench.perf.suites import SUITES


def _rows(text: str) -> list[list[str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_perf_losses_writes_a_well_formed_table(tmp_path, capsys):
    out = tmp_path / "reports" / "perf" / "losses.md"
    rc = main(["perf", "losses", "--device", "cpu", "--lengths", "6,9", "--batch", "2", "--repeats", "1",
               "--out", str(out), "--dtype", "float64"])
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Loss performance") and text in capsys.readouterr().out  # printed and written
    rows = _rows(text)
    header, rule, body = rows[0], rows[1], rows[2:]
    assert header == perf.COLUMNS and all(set(c) == {"-"} for c in rule)
    assert all(len(r) == len(header) for r in body)
    assert [(r[0], r[1]) for r in body] == [(str(n), name) for n in (6, 9) for name in losses.names()]
    for r in body:
        assert float(r[2]) > 0 and "error" not in " ".join(r)
        if r[1] in perf_reference.REFERENCES:
            assert r[5] == "2" and r[8].endswith("x") and float(r[9]) < 1e-9, r
        else:
            assert r[4] == f"none (O({stated_complexity(r[1])}) loss)"  # the stated cost, e.g. O(n log n)
    assert not list(out.parent.glob(".*.tmp"))  # atomic write left no temporary behind


def test_a_failing_loss_is_reported_in_its_row_and_the_exit_status(tmp_path, monkeypatch):
    (tmp_path / "bad_losses.py").write_text(
        textwrap.dedent(
            """
            def broken(scores, labels, mask):
                raise RuntimeError("boom")
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "t.md"
    rc = main(["perf", "losses", "--device", "cpu", "--lengths", "5", "--batch", "1", "--repeats", "1",
               "--losses", "bad_losses:broken,rmse", "--out", str(out)])
    assert rc == 1
    rows = _rows(out.read_text(encoding="utf-8"))[2:]
    assert rows[0][1] == "bad_losses:broken" and rows[0][2] == "error: RuntimeError: boom"
    assert rows[1][1] == "rmse" and float(rows[1][2]) > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--lengths", "1000,x"], "--lengths must be comma-separated integers"),
        (["--lengths", "1"], "--lengths needs values >= 2"),
        (["--losses", "nope"], "--losses: unknown loss 'nope'"),
        (["--batch", "0"], "--batch and --repeats must be >= 1"),
    ],
)
def test_bad_arguments_are_cli_errors(tmp_path, capsys, argv, message):
    rc = main(["perf", "losses", "--device", "cpu", "--out", str(tmp_path / "x.md"), *argv])
    assert rc == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x.md").exists()


def test_reference_subset_rule():
    # index lists: pair budget / n^2 lists, at least 1, at most B
    assert perf.reference_lists("ranknet", "index", 1000, 16, 4, 2048, 2_000_000) == 2
    assert perf.reference_lists("ranknet", "index", 3375, 16, 4, 2048, 2_000_000) == 1
    assert perf.reference_lists("ranknet", "index", 100, 16, 4, 2048, 2_000_000) == 16
    # dense: memory budget / (matrices x n^2 x itemsize)
    assert perf.reference_lists("neuralndcg", "dense", 1000, 16, 4, 2048, 0) == 7  # 70 matrices of 4 MB
    assert perf.reference_lists("pirank_ndcg", "dense", 3375, 16, 4, 2048, 0) == 3


def test_perf_suites_are_a_registry_of_subcommands():
    assert "losses" in SUITES
    suite = SUITES["losses"]
    assert suite.report is perf.report_losses and callable(suite.add_arguments)
