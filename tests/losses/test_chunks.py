"""Chunks of lists (``bench.losses.chunks``) and the pairwise losses run chunk by chunk.

Oracle for the chunked losses: the same loss with the whole batch as one chunk; equality is
bitwise (``torch.equal``, float32), since chunking is a schedule and must change no value.
"""

from __future__ import annotations

import pytest
import torch

from bench.losses import chunks as chunks_module
from bench.losses.lambdaloss import lambda_opa, lambda_recall, lambdaloss
from bench.losses.pairwise import logistic_pair_sum, pair_mask
from bench.losses.ranknet import ranknet
from tests.losses.test_sorting import _value_and_grads, batch

CPU = torch.device("cpu")


def test_list_chunks_fit_the_budget(monkeypatch):
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: 100)
    list_chunks = chunks_module.list_chunks
    assert list_chunks(10, 30, CPU) == [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 12)]
    assert list_chunks(3, 30, CPU) == [slice(None)]  # the whole batch fits
    assert list_chunks(10, 101, CPU) == [slice(None)]  # one list alone does not
    assert list_chunks(3, 101, CPU, lone_lists=True) == [slice(0, 1), slice(1, 2), slice(2, 3)]
    assert list_chunks(1, 101, CPU, lone_lists=True) == [slice(0, 1)]
    assert list_chunks(10, 30, torch.device("meta")) == [slice(None)]  # not a CPU
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: None)
    assert list_chunks(10, 30, CPU) == [slice(None)]  # cache size unknown
    assert list_chunks(10, 101, CPU, lone_lists=True) == [slice(None)]


def test_largest_cache_is_read_from_sysfs(tmp_path):
    for index, kind, size in [(0, "Data", "32K"), (1, "Instruction", "64M"), (2, "Unified", "512K"),
                              (3, "Unified", "32768K")]:
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "type").write_text(kind + "\n")
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    assert chunks_module.largest_cache_bytes(tmp_path) == 32 << 20  # the instruction cache ignored
    assert chunks_module.largest_cache_bytes(tmp_path / "absent") is None


PAIRWISE = {
    "ranknet": lambda s, y, m: ranknet(s, y, m),
    "ranknet@5": lambda s, y, m: ranknet(s, y, m, k=5),
    "lambdaloss": lambda s, y, m: lambdaloss(s, y, m),
    "lambdaloss@5": lambda s, y, m: lambdaloss(s, y, m, k=5),
    "lambdaloss lambdarank": lambda s, y, m: lambdaloss(s, y, m, scheme="lambdarank", sigma=2.0),
    "lambdaloss ndcg_loss2pp@10": lambda s, y, m: lambdaloss(s, y, m, scheme="ndcg_loss2pp", k=10),
    "lambdaloss ranknet": lambda s, y, m: lambdaloss(s, y, m, scheme="ranknet"),
    "lambda_recall": lambda s, y, m: lambda_recall(s, y, m, k=3, m=5),
    "lambda_opa": lambda s, y, m: lambda_opa(s, y, m),
}


def _whole_and_chunked(monkeypatch, fn, s, lists_per_chunk):
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: None)
    whole = _value_and_grads(fn, s)
    width = s.shape[-1]
    # the pair sum asks for 3 [L, L] buffers per list
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: lists_per_chunk * 3 * width * width * 4)
    n_chunks = len(chunks_module.list_chunks(s.shape[0], 3 * width * width * 4, CPU, lone_lists=True))
    assert n_chunks == -(-s.shape[0] // lists_per_chunk)
    return whole, _value_and_grads(fn, s)


@pytest.mark.parametrize("name", sorted(PAIRWISE))
@pytest.mark.parametrize("lists_per_chunk", [1, 2, 3])
def test_chunking_the_pairwise_losses_changes_no_bit(monkeypatch, name, lists_per_chunk):
    s, y, m = batch([40, 3, 0, 1, 25, 40, 6], 40, seed=12, dtype=torch.float32)
    whole, chunked = _whole_and_chunked(monkeypatch, lambda x: PAIRWISE[name](x, y, m), s, lists_per_chunk)
    assert all(torch.equal(a, b) for a, b in zip(whole, chunked))


@pytest.mark.parametrize("lists_per_chunk", [1, 2])
def test_chunking_changes_no_bit_where_the_reductions_are_split_between_threads(monkeypatch, lists_per_chunk):
    """Lists of 300 (90,000 pairs, above torch's parallel grain): a chunk of one list splits
    its sums between the threads (where torch has 2 or more), the whole batch splits by
    lists, and a per-list sum over the pairs then differs in its last bits (0.004 of 2e4
    here when each chunk sums its own). The per-list sums are compared before any mean."""
    s, y, m = batch([300, 170, 300, 41, 299], 300, seed=5, dtype=torch.float32)
    w = torch.rand(5, 300, 300, generator=torch.Generator().manual_seed(2)) * pair_mask(y, m)
    for weights in (pair_mask(y, m), w):
        whole, chunked = _whole_and_chunked(monkeypatch, lambda x, w=weights: logistic_pair_sum(x, w, 1.0), s,
                                            lists_per_chunk)
        assert all(torch.equal(a, b) for a, b in zip(whole, chunked)), weights.dtype
    for name in ("ranknet", "lambdaloss", "lambdaloss@5"):
        fn = PAIRWISE[name]
        whole, chunked = _whole_and_chunked(monkeypatch, lambda x, fn=fn: fn(x, y, m), s, lists_per_chunk)
        assert all(torch.equal(a, b) for a, b in zip(whole, chunked)), name


def test_pair_weights_as_a_function_of_the_lists_equal_the_tensor(monkeypatch):
    """A weight builder (called per chunk) gives the same value and gradient as the whole tensor."""
    monkeypatch.setattr(chunks_module, "chunk_budget_bytes", lambda: 2 * 3 * 30 * 30 * 4)
    s, y, m = batch([30, 12, 30, 2, 30], 30, seed=8, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    w = torch.rand(5, 30, 30, generator=g) * pair_mask(y, m)
    calls = []

    def weights_of(c: slice) -> torch.Tensor:
        calls.append(c)
        return w[c]

    tensor = _value_and_grads(lambda x: logistic_pair_sum(x, w, 1.5), s)
    built = _value_and_grads(lambda x: logistic_pair_sum(x, weights_of, 1.5), s)
    assert all(torch.equal(a, b) for a, b in zip(tensor, built))
    assert calls == [slice(0, 2), slice(2, 4), slice(4, 6)]  # each chunk's weights built once, in order


def test_pair_sum_refuses_scores_that_are_not_a_batch_of_lists():
    with pytest.raises(ValueError, match=r"scores must be \[B, L\]"):
        logistic_pair_sum(torch.zeros(3), torch.zeros(3, 3), 1.0)
