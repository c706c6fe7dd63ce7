"""What a neural run and a GBDT run share: load the fold, evaluate a split, write the run.

Both run kinds go load -> train -> evaluate -> record: :func:`load_fold` reads the prepared
fold (a missing or broken one is a :class:`~bench.errors.ConfigError` naming
``--prepared``), :func:`evaluate_split` computes per-query metrics through
:func:`bench.metrics.evaluate` (the suite's only metric code path), :meth:`RunFold.protocol`
is the method-independent part of what the run is comparable on, and :func:`write_result`
adds the provenance header (:func:`bench.provenance.run_header`) to the trainer's own facts
and writes the run directory (:func:`bench.results.write_run`). Nothing here imports torch.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.errors import ConfigError, IntegrityError, UsageError
from bench.provenance import run_header
from bench.results import label_metrics, write_run

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def log(msg: str) -> None:
    """A run's note on stderr (the workflow sends it to the job's log file)."""
    print(msg, file=sys.stderr, flush=True)


def check_device(requested: str) -> None:
    """``--device`` must be one of :data:`DEVICE_CHOICES` (see :mod:`bench.training.device`)."""
    if requested not in DEVICE_CHOICES:
        raise UsageError(f"--device: must be auto, cpu or cuda, got {requested!r}")


@dataclass
class RunFold:
    """One run's prepared fold and identity."""

    prepared: Any  # bench.data.PreparedFold
    prepared_dir: str | os.PathLike
    method: str
    seed: int

    @property
    def dataset(self) -> str:
        return str(self.prepared.meta["dataset"])

    @property
    def fold(self) -> str:
        return str(self.prepared.meta["fold"])

    @property
    def identity(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "fold": self.fold, "method": self.method, "seed": int(self.seed)}

    def protocol(self, kind: str, seeding: str, **fields: Any) -> dict[str, Any]:
        """The run's protocol: kind, dataset, fold, preprocessing, ``fields``, seed, seeding."""
        return {"kind": kind, "dataset": self.dataset, "fold": self.fold,
                "preprocessing": self.prepared.meta.get("options"), **fields,
                "seed": int(self.seed), "seeding": seeding}


def load_fold(prepared_dir: str | os.PathLike, *, method: str, seed: int) -> RunFold:
    """The prepared fold of a run; a missing or unreadable one names ``--prepared``."""
    from bench.data import load_prepared

    try:
        prepared = load_prepared(prepared_dir)  # every file checked against its digest (bench.atomic.integrity)
    except IntegrityError:
        raise  # names the file and the rebuild command already
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(f"--prepared: {exc}") from exc
    return RunFold(prepared, prepared_dir, method, int(seed))


def evaluate_split(
    scores: np.ndarray,
    labels: np.ndarray,
    offsets: np.ndarray,
    metrics: dict[str, Any],
    *,
    names: list[str] | None = None,
    query_ids: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per-query metrics through :func:`bench.metrics.evaluate`, the suite's only metric code,
    under the run's convention (``metrics["convention"]``: its protocol's, ``default`` when absent)."""
    from bench.metrics import evaluate_with_convention

    return evaluate_with_convention(
        np.asarray(scores),
        np.asarray(labels),
        np.asarray(offsets),
        list(names if names is not None else metrics["names"]),
        metrics.get("convention", "default"),
        empty_query=metrics["empty_query"],
        ties=metrics["ties"],
        query_ids=query_ids,
    )


@dataclass
class RunOutput:
    """What a trainer produced: test scores, their per-query frame, the curve, run facts."""

    scores: np.ndarray  # one per test document (NaN where the protocol scored none)
    frame: pd.DataFrame  # evaluate's per-query frame of the test split
    curve: pd.DataFrame
    facts: dict[str, Any]  # run.json keys beyond the header: device, timing, result, ...


def write_result(out_dir: str | os.PathLike, run: RunFold, output: RunOutput, *, kind: str,
                 config: dict[str, Any], device_requested: str, protocol: dict[str, Any],
                 run_config_sha256: str | None = None) -> Path:
    """Provenance header + the trainer's facts -> ``run.json``; write the run directory.
    ``run_config_sha256``: the digest of the run config the job was given
    (:func:`bench.config.run.run_config_digest`; None for a library call without one)."""
    header = run_header(kind=kind, identity=run.identity, config=config, device_requested=device_requested,
                        protocol=protocol, fingerprint=run.prepared.fingerprint, prepared_dir=run.prepared_dir)
    if run_config_sha256 is not None:
        header["run_config_sha256"] = run_config_sha256
    graded = config.get("metrics") if isinstance(config, dict) else None
    convention = graded.get("convention", "default") if isinstance(graded, dict) else "default"
    metrics = label_metrics(output.frame, **run.identity, convention=convention)
    return write_run(out_dir, scores=output.scores, metrics=metrics, curve=output.curve,
                     run_info={**header, **output.facts})
