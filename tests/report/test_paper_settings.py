"""The papers' stated settings against the paper profile, and the captions' "Differences from the paper".

``bench/report/paper_settings.yaml`` records what each paper states (with the section); the config
marks every value a paper does not state, or that the suite sets otherwise, in a ``choices``
mapping where the value is set. The check (:func:`bench.report.paper_settings.check_paper_profile`)
must pass on ``config/paper.yaml`` and must fail, naming the key, for each way of breaking it.
"""

from __future__ import annotations

import copy

import pytest

from bench.config import plan
from bench.config import validate as cv
from bench.errors import ConfigError
from bench.report.paper_settings import check_paper_profile, load_paper_settings
from bench.report.tables import caption
from helpers import ROOT


@pytest.fixture(scope="module")
def paper() -> dict:
    return cv.load_config(ROOT / "config" / "paper.yaml")


def test_every_paper_table_has_its_papers_settings(paper):
    settings = load_paper_settings()
    for table in plan.enabled_tables(paper):
        if plan.TABLE_SOURCES.get(table):
            assert paper["tables"][table]["protocol"] in settings, table


def test_the_paper_profile_marks_every_value_its_papers_do_not_state(paper):
    assert check_paper_profile(paper) == []


def _problems(paper: dict, edit) -> list[str]:
    config = copy.deepcopy(paper)
    edit(config)
    return check_paper_profile(config)


def test_a_value_that_differs_from_the_paper_must_be_listed(paper):
    def edit(c):
        c["protocols"]["pirank"]["train"]["batch_size"] = 32

    problems = _problems(paper, edit)
    assert len(problems) == 1 and problems[0].startswith("protocols.pirank: train.batch_size = 32 (on mslr-web30k")
    assert "PiRank states 16 (Table 2, benchmark)" in problems[0]


def test_an_unstated_value_must_be_listed(paper):
    def edit(c):
        del c["protocols"]["neuralndcg"]["choices"]["seeds"]

    assert _problems(paper, edit) == [
        "protocols.neuralndcg: seeds = [0] (on mslr-web30k, istella): NeuralNDCG does not state it; "
        "list it in protocols.neuralndcg.choices"]


def test_a_listed_choice_the_paper_states_as_configured_is_refused(paper):
    def edit(c):
        c["protocols"]["arf"]["choices"]["train.epochs"] = "not really a choice"

    assert _problems(paper, edit) == [
        "protocols.arf.choices: train.epochs: ARF states the configured value (Sec. 5.1: until 6 epochs have been "
        "trained): not a choice"]


def test_a_dataset_option_that_differs_must_be_listed_in_that_dataset(paper):
    def edit(c):
        del c["datasets"]["istella-arf"]["choices"]["options.normalize"]

    problems = _problems(paper, edit)
    assert len(problems) == 1 and problems[0].startswith("datasets.istella-arf: options.normalize = signlog1p")
    assert "ARF states log1p" in problems[0]


def test_a_stated_method_setting_must_be_written_as_stated(paper):
    def edit(c):
        c["methods"]["approxndcg_a1"]["params"]["alpha"] = 10.0

    assert _problems(paper, edit) == [
        "protocols.neuralndcg: methods.approxndcg_a1.params.alpha = 10.0: NeuralNDCG states 1.0 (Sec. 5.4: alpha = 1); "
        "write it, or list it in protocols.neuralndcg.choices"]


def test_a_stated_key_that_is_no_setting_is_refused(paper):
    settings = copy.deepcopy(load_paper_settings())
    settings["arf"]["stated"]["train.batch_sise"] = {"value": 16, "where": "nowhere"}
    problems = check_paper_profile(paper, settings)
    assert len(problems) == 1 and "ARF states train.batch_sise, which is not a checked setting" in problems[0]


@pytest.mark.parametrize("where, key", [("protocols", "train.batch_sise"), ("datasets", "options.normalise"),
                                        ("protocols", "methods.no_such_method.params.k")])
def test_a_choice_must_name_a_setting(where, key):
    name = "arf" if where == "protocols" else "mslr-web30k"
    with pytest.raises(ConfigError, match=f"config key '{where}.{name}.choices': '{key}'"):
        cv.load_config(ROOT / "config" / "paper.yaml", overrides={where: {name: {"choices": {key: "why"}}}})


def test_captions_list_the_differences_on_the_papers_data_only(paper):
    arf = caption(plan.table_spec(paper, "arf_table2"), True)
    assert "Differences from the paper (values it does not state are this suite's choices): " in arf
    assert ("train.batch_size = 16 (not stated for the accuracy runs (Table 9 times an epoch at 'a batch size of "
            "20,000', unit not named): PiRank's 16 lists)") in arf
    assert "Istella (ARF filter): options.normalize = signlog1p (ARF's log1p" in arf
    # MSLR's log1p + z-score is PiRank's difference, but NeuralNDCG states it: only PiRank's caption lists it
    pirank = caption(plan.table_spec(paper, "pirank_table1"), True)
    neuralndcg = caption(plan.table_spec(paper, "neuralndcg_table3"), True)
    assert "MSLR-WEB30K: options.normalize = log1p_zscore" in pirank
    assert "options.normalize" not in neuralndcg and "MSLR-WEB30K: options.log1p_columns = auto" in neuralndcg
    assert "methods.rmse.params.n_levels" in neuralndcg and "methods.softmax_pointwise" not in neuralndcg
    default = cv.load_config()
    for table in plan.enabled_tables(default):  # synthetic stand-ins: nothing to compare with the paper
        assert "Differences from the paper" not in caption(plan.table_spec(default, table), False), table
