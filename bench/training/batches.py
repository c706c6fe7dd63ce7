"""Batches: device-resident splits, per-epoch training lists, fixed evaluation lists, scoring.

Training lists are drawn afresh every epoch from the run's seeded CPU generator
(:func:`epoch_lists`); evaluation lists are built once per split (:func:`eval_lists`),
full queries or the protocol's seeded ``L_test`` sub-sample
(:func:`bench.data.sublists.seeded_sublists`), sorted by length to limit padding.
"""

from __future__ import annotations

import mmap
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from bench.data.sublists import seeded_sublists
from bench.training.device import autocast

EVAL_MAX_SLOTS = 1 << 16


@dataclass
class SplitData:
    """One split's arrays as tensors on the storage device (GPU when it fits; on the CPU the
    features and labels are the read-only memory mapping of the prepared fold)."""

    features: Tensor  # [N, F] float32
    labels: Tensor  # [N] float32
    offsets: Tensor  # [Q+1] int64
    qidx: Tensor  # [N] int64, the query of each row
    pos_in_query: Tensor  # [N] int64, the row's position within its query
    labels_np: np.ndarray
    offsets_np: np.ndarray
    qids: np.ndarray
    mapped: tuple[np.ndarray, ...] = ()  # the prepared arrays the CPU tensors share memory with

    @property
    def n_queries(self) -> int:
        return self.offsets.numel() - 1

    def release_pages(self) -> None:
        """Drop this split's mapped pages from the process's resident set (``MADV_DONTNEED``).

        The mapping stays valid: the pages stay in the page cache and a later read maps them
        again, with the same bytes (the files are mapped read-only, so nothing private is lost).
        A run calls it for the training split before it scores the test split, so its peak is
        the larger of (train + vali) and (vali + test) mapped, not the whole fold: on an
        MSLR-sized fold that is 0.4 GB less. A copied (converted or GPU) split has no mapping here.
        """
        for array in self.mapped:
            region = _mapping_of(array)
            if region is not None:
                region.madvise(mmap.MADV_DONTNEED)


def split_to_tensors(split: Any, store: torch.device) -> SplitData:
    """A prepared split (memory-mapped numpy) as tensors on ``store``, its arrays not copied.

    On the CPU the features and labels tensors *are* the read-only mapping of the prepared
    files: batches are gathered from it, so the process holds each page once (the page cache
    the kernel can drop) instead of a private copy of every split; the values are the same
    bytes either way. Nothing writes to a split's tensors (gathering and indexing make new
    ones); a write would fault on the read-only pages rather than change the data. On CUDA
    (``store`` a GPU) the mapping is copied to the device once. Arrays of another dtype than
    the trainer's (float32 features and labels, int64 offsets) are converted, i.e. copied.
    """
    features = _mapped_tensor(split.features, np.float32)
    labels_np = np.asarray(split.labels, dtype=np.float32)
    offsets_np = np.asarray(split.offsets, dtype=np.int64)
    lengths = torch.from_numpy(np.diff(offsets_np))
    offsets = _mapped_tensor(offsets_np, np.int64)
    qidx = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    pos = torch.arange(qidx.numel()) - offsets[qidx]
    return SplitData(
        features.to(store),
        _mapped_tensor(labels_np, np.float32).to(store),
        offsets.to(store),
        qidx.to(store),
        pos.to(store),
        labels_np,
        offsets_np,
        np.asarray(split.qids, dtype=np.int64),
        tuple(a for a in (split.features, split.labels) if _mapping_of(a) is not None),
    )


def _mapping_of(array: Any) -> mmap.mmap | None:
    """The ``mmap`` an array (a ``np.memmap`` or a view of one) reads from, else None."""
    base = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base if hasattr(mmap, "MADV_DONTNEED") else None


def _mapped_tensor(array: np.ndarray, dtype: type) -> Tensor:
    """``array`` as a CPU tensor sharing its memory (a read-only mapping stays read-only).

    ``torch.from_numpy`` warns on a non-writable array that writing to the tensor is
    undefined; the split tensors are only read (see :func:`split_to_tensors`), so that one
    warning is silenced here and nowhere else.
    """
    base = np.asarray(array, dtype=dtype)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(base)


def epoch_lists(data: SplitData, list_size: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """This epoch's training lists and query order, from ``gen`` (a CPU generator).

    Returns ``rows [Q, list_size]`` (row ids into the split, -1 for padding; a query longer
    than ``list_size`` keeps a uniformly random subset, every query's items in random order)
    and ``order [Q]`` (a random permutation of queries). Vectorised: one random permutation
    of all rows, one stable sort by query, one scatter.
    """
    store = data.features.device
    n = data.qidx.numel()
    shuffled = torch.randperm(n, generator=gen).to(store)
    by_query = torch.argsort(data.qidx[shuffled], stable=True)
    rows = shuffled[by_query]  # grouped by query (ascending), random within each query
    keep = data.pos_in_query < list_size
    lists = torch.full((data.n_queries, list_size), -1, dtype=torch.int64, device=store)
    lists[data.qidx[keep], data.pos_in_query[keep]] = rows[keep]
    order = torch.randperm(data.n_queries, generator=gen).to(store)
    return lists, order


def gather(data: SplitData, rows: Tensor, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Features ``[B, L, F]``, labels ``[B, L]`` (0 on padding) and mask for row ids ``[B, L]``."""
    mask = rows >= 0
    flat = rows.clamp(min=0).reshape(-1)
    # index_select on flat row ids: the same copy as features[safe], about 3x faster on the CPU
    x = data.features.index_select(0, flat).view(*rows.shape, data.features.shape[1])
    y = torch.where(mask, data.labels.index_select(0, flat).view(rows.shape),
                    torch.zeros((), dtype=data.labels.dtype, device=rows.device))
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True), mask.to(device, non_blocking=True)


@dataclass
class EvalLists:
    """Fixed evaluation lists of a split: full queries or an ``L_test`` sub-sample."""

    doc_index: np.ndarray  # [M] rows of the split that are evaluated, grouped by query
    offsets: np.ndarray  # [Q+1] over doc_index
    batches: list[tuple[Tensor, Tensor]]  # (rows [b, Lmax] on store, positions [b, Lmax] on device)


def eval_lists(data: SplitData, device: torch.device, *, list_size: int | None, batch_lists: int,
               dataset: str, fold: str, split: str) -> EvalLists:
    """Build the evaluation batches once: queries sorted by length to limit padding."""
    if list_size is None:
        doc_index = np.arange(data.labels_np.size, dtype=np.int64)
        offsets = data.offsets_np
    else:
        doc_index, offsets = seeded_sublists(data.offsets_np, list_size, dataset=dataset, fold=fold, split=split)
    lengths = np.diff(offsets)
    by_len = np.argsort(lengths, kind="stable")
    doc_t = torch.from_numpy(doc_index)
    batches = []
    start, n_q = 0, lengths.size
    while start < n_q:  # one iteration per batch
        stop = min(start + batch_lists, n_q)
        width = max(int(lengths[by_len[stop - 1]]), 1)
        stop = start + max(1, min(stop - start, EVAL_MAX_SLOTS // width))
        qs = by_len[start:stop]
        width = max(int(lengths[qs].max()), 1)
        ar = np.arange(width)
        valid = ar[None, :] < lengths[qs][:, None]
        pos = np.where(valid, offsets[qs][:, None] + ar[None, :], -1)
        pos_t = torch.from_numpy(pos)
        rows = torch.where(pos_t >= 0, doc_t[pos_t.clamp(min=0)], -1)
        batches.append((rows.to(data.features.device), pos_t.to(device)))
        start = stop
    return EvalLists(doc_index, offsets, batches)


@torch.no_grad()
def score_lists(model: nn.Module, data: SplitData, ev: EvalLists, device: torch.device, amp: bool, *,
                on_cpu: bool = False) -> np.ndarray:
    """Scores of the evaluated documents ``[M]`` (``ev.doc_index`` order), float32
    (``amp``/``on_cpu``: :func:`bench.training.device.autocast`)."""
    model.eval()
    out = torch.zeros(ev.doc_index.size, dtype=torch.float32, device=device)
    for rows, pos in ev.batches:
        x, _, mask = gather(data, rows, device)
        with autocast(device, amp, on_cpu=on_cpu):
            s = model(x, mask).float()
        out[pos[mask]] = s[mask]
    return out.cpu().numpy()
