r"""Chunks of lists that fit in the CPU's cache, for the losses' ``[B, L, L]`` passes.

A loss that makes several passes over a ``[B, L, L]`` block (a Sinkhorn kernel, pairwise
score differences) streams it from memory on every pass once the block outgrows the cache.
Run chunk by chunk of lists instead, each chunk's passes read its block from cache: at
B = 16, L = 1000 on a 32 MiB L3 about 3x faster per Sinkhorn pass, and LambdaLoss (forward +
backward) in 0.57x and RankNet in 0.76x of the whole-batch time (measured side by side,
``docs/performance.md``).

The budget is a quarter of the CPU's largest data cache (Linux sysfs): the chunk's block and
what the pass writes beside it share the rest with the other core's work. Off the CPU, or
where the cache size is unknown, everything is one chunk. Chunking is a schedule only: a
caller must give every list the same bits whatever the chunk around it (each caller's tests
compare chunked and whole-batch results with ``torch.equal``).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

CACHE_ROOT = Path("/sys/devices/system/cpu/cpu0/cache")


def largest_cache_bytes(root: Path = CACHE_ROOT) -> int | None:
    """Size of this CPU's largest data cache in bytes (Linux sysfs), ``None`` where unknown."""
    sizes = []
    for index in root.glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


@functools.cache
def chunk_budget_bytes() -> int | None:
    """A quarter of the largest cache (for the Sinkhorn kernel, 2 lists of L = 1000 on a
    32 MiB L3; 1, 3 and 4 lists measured 1.2-1.5x slower); ``None`` where it is unknown."""
    size = largest_cache_bytes()
    return None if size is None else size // 4


def list_chunks(batch: int, list_bytes: int, device: torch.device, *, lone_lists: bool = False) -> list[slice]:
    """Consecutive slices of the ``batch`` lists that together hold at most the budget
    (:func:`chunk_budget_bytes`), ``list_bytes`` each.

    One chunk (``[slice(None)]``) off the CPU, where the cache size is unknown, or when the
    whole batch fits. A list larger than the budget alone gets one chunk for the whole batch
    (nothing is in cache either way), unless ``lone_lists``: then every list is a chunk of
    its own (for passes that each touch only part of ``list_bytes`` at a time, so that one
    list's buffers still gain from the cache).

    >>> from unittest import mock
    >>> with mock.patch(f"{__name__}.chunk_budget_bytes", lambda: 100):
    ...     list_chunks(5, 40, torch.device("cpu")), list_chunks(5, 150, torch.device("cpu"), lone_lists=True)[:2]
    ([slice(0, 2, None), slice(2, 4, None), slice(4, 6, None)], [slice(0, 1, None), slice(1, 2, None)])
    """
    budget = chunk_budget_bytes() if device.type == "cpu" else None
    if budget is None or list_bytes == 0 or batch * list_bytes <= budget:
        return [slice(None)]
    if list_bytes > budget and not lone_lists:
        return [slice(None)]
    n = max(1, budget // list_bytes)
    return [slice(i, i + n) for i in range(0, batch, n)]
