"""Worker process of ``ltr-bench perf kernels``: times one checkout's loss kernels on request.

Run by :mod:`bench.perf.kernels` as ``python -c <this file's source> <json config>`` with the
working directory and ``PYTHONPATH`` set to a checkout of the repository, so ``bench`` below
is *that* checkout's package (the current tree or the ``--baseline`` one) while this protocol
code is the same on both sides. It uses only what every checkout has: ``bench.losses.get``.

Config (argv[1], JSON): ``batch``, ``length``, ``seed``, ``threads``, ``kernels`` (names).
Protocol: one JSON object per line on stdin, one reply per line on stdout.

* ``{"op": "time", "name": n}`` -> ``{"s": seconds}``: one forward + backward of loss ``n``
  on fresh leaf copies of the scores (``perf_counter``, CUDA never used: CPU build).
* ``{"op": "check", "name": n, "path": p}`` -> ``{"value": v}``; the value and the gradient
  with respect to the scores are saved to ``p`` with ``torch.save``.
* ``{"op": "quit"}`` ends the worker.

The first line it prints is ``{"ready": true, "bench": <path of the imported package>, ...}``
so the caller can check which checkout it measures.
"""

from __future__ import annotations

import json
import sys
import time

import torch


def make_inputs(batch: int, length: int, seed: int, dtype: torch.dtype = torch.float32,
                device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scores ~ N(0, 1), labels uniform on 0..4, full lists, from one seeded CPU generator
    (the same numbers on every device); also the inputs of ``ltr-bench perf losses``.

    >>> s, y, m = make_inputs(2, 3, 0); tuple(s.shape), y.dtype, bool(m.all())
    ((2, 3), torch.float32, True)
    """
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(batch, length, generator=gen, dtype=dtype).to(device)
    labels = torch.randint(0, 5, (batch, length), generator=gen).to(dtype).to(device)
    return scores, labels, torch.ones(batch, length, dtype=torch.bool, device=device)


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    torch.set_num_threads(int(config["threads"]))
    import bench
    from bench import losses

    scores, labels, mask = make_inputs(int(config["batch"]), int(config["length"]), int(config["seed"]))
    fns = {name: losses.get(name) for name in config["kernels"]}

    def reply(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    def run(name: str) -> tuple[float, torch.Tensor, torch.Tensor]:
        s = scores.clone().requires_grad_(True)
        torch.manual_seed(int(config["seed"]))  # a sampled loss draws the same noise on both sides
        start = time.perf_counter()
        value = fns[name](s, labels, mask)
        value.backward()
        return time.perf_counter() - start, value.detach(), s.grad

    reply({"ready": True, "bench": bench.__file__, "torch": torch.__version__, "threads": torch.get_num_threads()})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        if cmd["op"] == "time":
            reply({"s": run(cmd["name"])[0]})
        elif cmd["op"] == "check":
            _, value, grad = run(cmd["name"])
            torch.save({"value": value, "grad": grad}, cmd["path"])
            reply({"value": value.item()})
        else:
            reply({"error": f"unknown op {cmd['op']!r}"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
