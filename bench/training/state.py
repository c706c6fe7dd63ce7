"""The training loop's state and the resumable checkpoint.

After every epoch ``<checkpoint_dir>/last.pt`` (default: the sibling directory ``.<out_dir
name>.ckpt``, :func:`default_checkpoint_dir`) is written atomically with the model,
optimiser, loss parameters (e.g. ARF's alpha), RNG states (as tensors), epoch, step, best
score and weights, and the curve so far; it loads with ``torch.load(..., weights_only=True)``.
Re-running an interrupted run resumes from it and ends with the same result as an
uninterrupted run. A checkpoint written for a different config, method, seed, dataset
fingerprint or device type (:func:`checkpoint_key`) is ignored (with a note) and training
starts afresh.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from bench.atomic import write_bytes
from bench.provenance import canonical_json
from bench.results import training_timing

CHECKPOINT_FORMAT = 2  # 2: training time and documents (train_seconds, train_docs)


@dataclass
class TrainState:
    """What changes from epoch to epoch (and is restored on resume)."""

    epoch: int = 0  # epochs completed
    step: int = 0  # optimiser steps taken
    best: float | None = None  # best validation score so far
    best_epoch: int = 0
    best_state: dict[str, Tensor] | None = None  # the model's weights at ``best_epoch``
    bad: int = 0  # epochs since the last improvement
    curve: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    elapsed: float = 0.0  # seconds spent in earlier process segments (resume)
    resumed_from: int | None = None
    train_seconds: float = 0.0  # wall-clock of the training passes (validation excluded), all segments
    train_docs: int = 0  # real documents trained on (padding not counted), all segments

    def record(self, score: float, higher: bool, model: nn.Module) -> None:
        """Count one finished epoch's validation ``score``; keep the weights when it is the best."""
        self.epoch += 1
        if _better(score, self.best, higher):
            self.best, self.best_epoch, self.bad = score, self.epoch, 0
            self.best_state = clone_state(model)
        else:
            self.bad += 1

    def checkpoint_fields(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step": self.step,
            "done": self.done,
            "best": {"score": self.best, "epoch": self.best_epoch, "model": self.best_state},
            "bad_epochs": self.bad,
            "curve": self.curve,
            "train_seconds": self.train_seconds,
            "train_docs": self.train_docs,
        }

    @classmethod
    def from_checkpoint(cls, ck: dict[str, Any]) -> TrainState:
        return cls(epoch=ck["epoch"], step=ck["step"], best=ck["best"]["score"], best_epoch=ck["best"]["epoch"],
                   best_state=ck["best"]["model"], bad=ck["bad_epochs"], curve=ck["curve"], done=ck["done"],
                   elapsed=ck["elapsed_s"], resumed_from=ck["epoch"], train_seconds=ck["train_seconds"],
                   train_docs=ck["train_docs"])

    def training_facts(self, steps_per_epoch: int) -> dict[str, Any]:
        """run.json's training-only timing (:func:`bench.results.training_timing`):
        ``train_seconds`` (the training passes' wall-clock, validation, checkpoints and the
        test pass excluded), ``train_docs`` (real documents trained on), ``train_docs_per_s``,
        and ``seconds_per_epoch`` per ``steps_per_epoch`` steps (one full epoch's worth: a step
        budget may end the last epoch early). None when no step ran.

        >>> TrainState(step=30, train_seconds=6.0, train_docs=3000).training_facts(10)
        {'train_seconds': 6.0, 'train_docs': 3000, 'train_docs_per_s': 500.0, 'seconds_per_epoch': 2.0}
        """
        return training_timing(self.train_seconds, self.train_docs, self.step / steps_per_epoch)


@dataclass
class Trainables:
    """What the optimiser and the random draws change: saved and restored as one unit."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_module: nn.Module | None
    list_gen: torch.Generator
    loss_gen: torch.Generator
    device: torch.device

    def checkpoint_fields(self) -> dict[str, Any]:
        cuda = self.device.type == "cuda"
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "loss": self.loss_module.state_dict() if self.loss_module is not None else {},
            "rng": {
                "lists": self.list_gen.get_state(),
                "loss": self.loss_gen.get_state(),
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if cuda else [],
            },
        }

    def restore(self, ck: dict[str, Any]) -> None:
        self.model.load_state_dict(ck["model"])
        self.optimizer.load_state_dict(ck["optimizer"])
        if self.loss_module is not None:
            self.loss_module.load_state_dict(ck["loss"])
        self.list_gen.set_state(ck["rng"]["lists"])
        self.loss_gen.set_state(ck["rng"]["loss"])
        torch.set_rng_state(ck["rng"]["torch"])
        if self.device.type == "cuda" and ck["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(ck["rng"]["cuda"])


def _better(a: float, b: float | None, higher: bool) -> bool:
    if math.isnan(a):
        return False
    return b is None or (a > b if higher else a < b)


def clone_state(module: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def checkpoint_key(cfg: dict[str, Any], method: str, seed: int, fingerprint: str, device: torch.device) -> str:
    """What a checkpoint must match to be resumed: config, method, seed, data, device type."""
    ident = {"config": cfg, "method": method, "seed": int(seed), "data": fingerprint, "device": device.type}
    return hashlib.sha256(canonical_json(ident).encode()).hexdigest()


def default_checkpoint_dir(out_dir: Path) -> Path:
    """``.<name>.ckpt`` next to the run directory (outside it: the run dir is atomic)."""
    return out_dir.with_name(f".{out_dir.name}.ckpt")


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write the checkpoint atomically. Serialised in memory first: ``torch.save`` to a full disk
    fails with its zip writer's ``RuntimeError``, a plain write with the system's "no space
    left", which :func:`bench.atomic.write_bytes` turns into one line naming the checkpoint."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    write_bytes(path, buffer.getvalue())


def load_checkpoint(path: Path, key: str, log: Callable[[str], None]) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: start afresh rather than fail
        log(f"ignoring unreadable checkpoint {path} ({type(exc).__name__}: {exc}); starting afresh")
        return None
    if state.get("format") != CHECKPOINT_FORMAT or state.get("key") != key:
        log(f"ignoring checkpoint {path}: written for a different config/data/seed/device; starting afresh")
        return None
    return state
