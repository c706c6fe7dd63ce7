"""docs/paper-scale.md states the paper profile's job and measurement counts: they are the code's.

The sentences are read with a regular expression (numbers with thousands separators), so a
change to the paper profile (a table, a grid of hyperparameters) that changes the counts fails
here until the document says the new numbers.
"""

from __future__ import annotations

import re
from collections import Counter

from bench.config.jobs import target_jobs
from bench.config.validate import load_config
from bench.costs import plan as planning
from bench.costs.calibration import Calibration, Device
from helpers import ROOT

DOC = ROOT / "docs" / "paper-scale.md"


def _number(pattern: str) -> int:
    text = " ".join(DOC.read_text(encoding="utf-8").split())  # sentences may wrap
    match = re.search(pattern, text, re.IGNORECASE)
    assert match, f"docs/paper-scale.md has no sentence matching {pattern!r}"
    return int(match.group(1).replace(",", ""))


def test_the_documented_job_counts_are_the_codes():
    jobs = target_jobs(load_config("config/paper.yaml"), ["all"])
    rules = Counter(job.rule for job in jobs)
    assert _number(r"The paper profile is ([\d,]+) jobs") == len(jobs)
    assert _number(r"([\d,]+) neural runs") == rules["train"]
    assert _number(r"([\d,]+) GBDT runs") == rules["gbdt"]
    assert _number(r"([\d,]+) least-squares fits") == rules["linear"]
    assert _number(r"([\d,]+) prepared folds") == rules["prepare"]


def test_the_documented_number_of_measurements_is_the_codes():
    config = load_config("config/paper.yaml")
    planned = planning.build_plan(config, ["all"], Calibration(Device("cpu", "any", 1)))
    assert _number(r"from an empty cache it takes ([\d,]+) measurements") == len(planning.missing(planned))
