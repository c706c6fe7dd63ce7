"""Regenerate tests/fixtures/torchsort/soft_ops.json: torchsort's soft rank and soft sort.

torchsort (PyPI, a PyTorch port of the authors' fast-soft-sort) is the oracle of
``bench/losses/permutahedron.py``. It builds a C++ extension against the installed torch at
install time, so it is not a test dependency; run this script in a separate environment:

    python -m venv /tmp/ts && . /tmp/ts/bin/activate
    pip install torch numpy setuptools wheel
    pip install --no-build-isolation torchsort==0.1.10   # needs a C++ compiler; nvcc off PATH for CPU only
    python scripts/torchsort_oracle.py

torchsort ranks and sorts ascending; the suite's operators are descending, so the fixture
stores ``soft_rank(-theta)`` (descending ranks) and ``-soft_sort(-theta)`` (descending sort)
for each seeded input, with the vector-Jacobian product of a seeded cotangent. Float64.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torchsort

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "torchsort" / "soft_ops.json"
CASES = [(n, eps, reg) for n in (2, 5, 17, 64) for eps in (0.1, 1.0, 10.0) for reg in ("l2", "kl")]


def main() -> None:
    rng = np.random.default_rng(20200713)
    cases = []
    for n, eps, reg in CASES:
        theta = torch.tensor(rng.normal(size=(3, n)) * 2.0, dtype=torch.float64)
        cotangent = torch.tensor(rng.normal(size=(3, n)), dtype=torch.float64)
        entry = {"n": n, "epsilon": eps, "regularization": reg, "theta": theta.tolist(), "cotangent": cotangent.tolist()}
        for name, op in (("rank", lambda t, reg=reg, eps=eps: torchsort.soft_rank(-t, reg, eps)),
                         ("sort", lambda t, reg=reg, eps=eps: -torchsort.soft_sort(-t, reg, eps))):
            x = theta.clone().requires_grad_(True)
            out = op(x)
            (out * cotangent).sum().backward()
            entry[name] = out.detach().tolist()
            entry[f"{name}_vjp"] = x.grad.tolist()
        cases.append(entry)
    meta = {"torchsort": getattr(torchsort, "__version__", "0.1.10"), "torch": torch.__version__}
    OUT.write_text(json.dumps({"generator": meta, "cases": cases}) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
