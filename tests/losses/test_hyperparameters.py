"""One rule for every loss's cut-off: ``k`` (and ARF's / Lambda Recall's ``m``) is an integer >= 1
(or ``None``, the whole list, where the loss allows it), checked by the one validator
:func:`bench.losses._common.check_k`. No loss rounds ``k=2.5`` to 2 or takes ``True`` for 1.

Parametrised over every registered loss whose signature has the hyperparameter, so a new
``@k`` loss is checked without being listed here.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from bench.losses import get, info, names
from bench.losses.registry import _is_module_class, _resolve

S = torch.tensor([[0.3, -0.2, 1.0, 0.5]], dtype=torch.float64)
Y = torch.tensor([[2.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
M = torch.ones(1, 4, dtype=torch.bool)


def _parameters(name: str) -> dict[str, inspect.Parameter]:
    obj = _resolve(info(name).target)
    return dict(inspect.signature(obj.__init__ if _is_module_class(obj) else obj).parameters)


def _with(hyper: str) -> list[str]:
    return [n for n in names() if hyper in _parameters(n)]


K_LOSSES = _with("k")
M_LOSSES = _with("m")
CASES = [(n, "k") for n in K_LOSSES] + [(n, "m") for n in M_LOSSES]


def _call(name: str, **hyper):
    """Build the loss and call it once: an nn.Module loss checks at construction, a function at the call."""
    loss = get(name, **hyper)
    if info(name).stochastic:
        return loss(S, Y, M, generator=torch.Generator().manual_seed(0))
    return loss(S, Y, M)


def test_the_cut_off_losses_are_all_found():
    assert set(K_LOSSES) >= {"pirank_ndcg", "pirank_arp", "neuralndcg", "neuralndcg_transposed", "sinkprop",
                             "arf", "arf_relax", "lambdaloss", "lambda_recall", "ranknet"}
    assert set(M_LOSSES) >= {"arf", "arf_relax", "lambda_recall"}


@pytest.mark.parametrize("name, hyper", CASES)
def test_none_is_the_whole_list_where_the_signature_allows_it_and_refused_elsewhere(name, hyper):
    if "None" in str(_parameters(name)[hyper].annotation):  # ``int | None``
        assert torch.isfinite(_call(name, **{hyper: None}))
    else:
        with pytest.raises(ValueError, match=rf"^{hyper} must be a positive integer, got None$"):
            _call(name, **{hyper: None})


@pytest.mark.parametrize("name, hyper", CASES)
def test_a_positive_integer_is_taken(name, hyper):
    assert torch.isfinite(_call(name, **{hyper: 2}))


# ----------------------------------------------------------------------------- counts

# counts and their least value: Sinkhorn iterations (0: the matrix as it is), tree levels
COUNTS = {"max_iter": 0, "n_iter": 0, "depth": 1}
COUNTS.update({"n_samples": 1, "sample_size": 1})  # sampled rankings (PL-Rank), Gumbel draws per list
COUNT_CASES = [(n, hyper) for hyper in COUNTS for n in _with(hyper)]


def test_the_counting_losses_are_all_found():
    assert {n for n, _ in COUNT_CASES} >= {"neuralndcg", "neuralndcg_transposed", "sinkprop", "pirank_ndcg",
                                           "pirank_arp"}
    assert {n for n, _ in COUNT_CASES} >= {"plrank_ndcg", "gumbel_approxndcg", "gumbel_neuralsort_ce"}


# what each kind of hyperparameter must be (the message's words) and the values it refuses
RULES = {**dict.fromkeys(("k", "m"), (r"a positive integer( or None)?", [2.5, 0, -1, True, 2.0, "2"])),
         **{hyper: (f"an integer >= {least}", [2.5, 2.0, True, "2", None, least - 1]) for hyper, least in COUNTS.items()}}
REFUSALS = [(name, hyper, bad) for name, hyper in CASES + COUNT_CASES for bad in RULES[hyper][1]]


@pytest.mark.parametrize("name, hyper, bad", REFUSALS, ids=[f"{n}-{h}={b!r}" for n, h, b in REFUSALS])
def test_every_loss_refuses_a_bad_cut_off_or_count_alike(name, hyper, bad):
    """A cut-off or a count (iterations, tree depth) is an integer, never rounded: 2.5 once ran 2 iterations."""
    with pytest.raises(ValueError, match=rf"^{hyper} must be {RULES[hyper][0]}, got {bad!r}$"):
        _call(name, **{hyper: bad})


@pytest.mark.parametrize("name, hyper", COUNT_CASES)
def test_the_least_count_is_taken(name, hyper):
    assert torch.isfinite(_call(name, **{hyper: COUNTS[hyper]}))  # one below it is among REFUSALS
