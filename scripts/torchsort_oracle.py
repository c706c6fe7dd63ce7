"""Regenerate tests/fixtures/torchsort/soft_ops.json: torchsort's soft rank and soft sort.

torchsort (PyPI, a PyTorch port of the authors' fast-soft-sort) is the oracle of
``bench/losses/permutahedron.py``. It builds a C++ extension against the installed torch at
install time, so it is not a test dependency (it is the optional extra ``perf-peers``):

    pip install --no-build-isolation torchsort==0.1.10   # needs a C++ compiler; nvcc off PATH for CPU only
    python scripts/torchsort_oracle.py

torchsort ranks and sorts ascending, has no masks and takes 2-d inputs; the suite's operators
are descending and masked, so for each list the fixture stores torchsort's ``soft_rank(-theta)``
(descending ranks) and ``-soft_sort(-theta)`` (descending sort) of the list's real items, with
the vector-Jacobian product of a cotangent, laid out in the suite's convention (ranks at the
input positions, the sort's ``n`` real values first; padding 0, its gradient 0). Values are
Python floats (``repr``, exact); a value torchsort returns as NaN or infinite is stored as
``NaN`` / ``Infinity`` (Python's json reads them back).

Groups (``group`` of each case; every case has rows of ``theta``, ``cotangent`` and ``mask``):

* ``base``: the first 24 cases, unchanged from the first fixture: n = 2, 5, 17, 64, eps 0.1, 1,
  10, full-precision N(0, 4) scores, no ties, no padding (same seed, same draws);
* ``ties``: scores rounded to one decimal (n = 12, 300, 1000: most scores tied);
* ``masked``: padded lists, padding scattered through each row, rows of different lengths
  (down to 1 real item) in one batch;
* ``long``: n = 1000 with four-decimal scores, eps 0.01 (L2) and 0.05 (KL);
* ``small-eps``: n = 64, eps 0.01;
* ``nonfinite``: where torchsort's KL gradient is not finite: ``theta = (1, 0)`` at eps 0.01
  in float32 (``dtype``; the other cases are float64) and in float64, and 50 scores ~ N(0, 100)
  at eps 0.01 in float64.

Scores of the new groups are rounded to a few decimals and cotangents to two, which keeps the
file small (under 1 MB) and the inputs exact in the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torchsort

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "torchsort" / "soft_ops.json"
BASE = [(n, eps, reg) for n in (2, 5, 17, 64) for eps in (0.1, 1.0, 10.0) for reg in ("l2", "kl")]


def _torchsort(theta: torch.Tensor, cotangent: torch.Tensor, mask: torch.Tensor, eps: float, reg: str) -> dict:
    """torchsort's values and vector-Jacobian products, list by list over the real items, our layout."""
    rank, rank_vjp = torch.zeros_like(theta), torch.zeros_like(theta)
    sort, sort_vjp = torch.zeros_like(theta), torch.zeros_like(theta)
    for r in range(theta.shape[0]):
        idx = torch.nonzero(mask[r]).flatten()
        n = len(idx)
        for name, out, vjp in (("rank", rank, rank_vjp), ("sort", sort, sort_vjp)):
            x = theta[r, idx].clone().unsqueeze(0).requires_grad_(True)
            if name == "rank":
                value = torchsort.soft_rank(-x, reg, eps)
                cot = cotangent[r, idx].unsqueeze(0)
                out[r, idx] = value.detach()[0]
            else:
                value = -torchsort.soft_sort(-x, reg, eps)
                cot = cotangent[r, :n].unsqueeze(0)  # the sort's output positions are 0..n-1
                out[r, :n] = value.detach()[0]
            (value * cot).sum().backward()
            assert x.grad is not None
            vjp[r, idx] = x.grad[0]
    return {"rank": rank.tolist(), "rank_vjp": rank_vjp.tolist(), "sort": sort.tolist(), "sort_vjp": sort_vjp.tolist()}


def _case(group: str, theta: np.ndarray, cotangent: np.ndarray, mask: np.ndarray, eps: float, reg: str,
          dtype: torch.dtype = torch.float64) -> dict:
    t = torch.tensor(theta, dtype=dtype)
    c = torch.tensor(cotangent, dtype=dtype)
    m = torch.tensor(mask, dtype=torch.bool)
    entry = {"group": group, "n": int(m.shape[1]), "epsilon": eps, "regularization": reg,
             "dtype": str(dtype).removeprefix("torch."), "theta": t.tolist(), "cotangent": c.tolist(),
             "mask": m.to(torch.int64).tolist()}
    entry.update(_torchsort(t, c, m, eps, reg))
    return entry


def _scattered_mask(rng: np.random.Generator, width: int, lengths: list[int]) -> np.ndarray:
    """Rows with ``lengths[r]`` real items at random positions (padding scattered through the row)."""
    mask = np.zeros((len(lengths), width), dtype=bool)
    for r, n in enumerate(lengths):
        mask[r, rng.choice(width, size=n, replace=False)] = True
    return mask


def main() -> None:
    rng = np.random.default_rng(20200713)
    cases = []
    for n, eps, reg in BASE:  # the first fixture's draws, in its order
        theta = rng.normal(size=(3, n)) * 2.0
        cotangent = rng.normal(size=(3, n))
        cases.append(_case("base", theta, cotangent, np.ones((3, n), dtype=bool), eps, reg))
    rng = np.random.default_rng(43)

    def cot(shape: tuple[int, int]) -> np.ndarray:
        return np.round(rng.normal(size=shape), 2)

    for rows, n, eps, reg in [(2, 12, 0.1, "l2"), (2, 12, 0.01, "kl"), (1, 300, 1.0, "l2"), (1, 300, 0.1, "kl"),
                              (1, 1000, 0.5, "l2"), (1, 1000, 1.0, "kl")]:
        theta = np.round(rng.normal(size=(rows, n)) * 1.5, 1)
        cases.append(_case("ties", theta, cot((rows, n)), np.ones((rows, n), dtype=bool), eps, reg))
    for width, lengths, eps, reg in [(40, [40, 23, 7, 1, 2], 0.3, "l2"), (40, [40, 23, 7, 1, 2], 0.3, "kl"),
                                     (40, [31, 12, 2, 39, 5], 0.01, "l2"), (40, [31, 12, 2, 39, 5], 0.01, "kl"),
                                     (400, [400, 250], 1.0, "l2"), (400, [333, 398], 1.0, "kl")]:
        theta = np.round(rng.normal(size=(len(lengths), width)) * 2.0, 3)
        cases.append(_case("masked", theta, cot(theta.shape), _scattered_mask(rng, width, lengths), eps, reg))
    for n, eps, reg in [(1000, 0.01, "l2"), (1000, 0.05, "kl")]:
        theta = np.round(rng.normal(size=(1, n)) * 2.0, 4)
        cases.append(_case("long", theta, cot((1, n)), np.ones((1, n), dtype=bool), eps, reg))
    for reg in ("l2", "kl"):
        theta = np.round(rng.normal(size=(3, 64)), 4)
        cases.append(_case("small-eps", theta, cot((3, 64)), np.ones((3, 64), dtype=bool), 0.01, reg))
    pair = np.array([[1.0, 0.0]])
    for dtype in (torch.float32, torch.float64):
        cases.append(_case("nonfinite", pair, np.array([[1.0, 2.0]]), np.ones((1, 2), dtype=bool), 0.01, "kl", dtype))
    theta = np.round(rng.normal(size=(1, 50)) * 10.0, 2)
    cases.append(_case("nonfinite", theta, cot((1, 50)), np.ones((1, 50), dtype=bool), 0.01, "kl"))
    meta = {"torchsort": getattr(torchsort, "__version__", "0.1.10"), "torch": torch.__version__}
    OUT.write_text(json.dumps({"generator": meta, "cases": cases}) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT} ({OUT.stat().st_size / 1e6:.2f} MB)")
    for case in cases:
        bad = [k for k in ("rank", "rank_vjp", "sort", "sort_vjp") if not np.isfinite(np.array(case[k])).all()]
        if bad:
            print(f"  {case['group']} n={case['n']} eps={case['epsilon']} {case['regularization']} {case['dtype']}: "
                  f"torchsort not finite in {', '.join(bad)}")


if __name__ == "__main__":
    main()
