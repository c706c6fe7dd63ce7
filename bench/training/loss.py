"""The loss a run trains with: the registry's callable plus its per-call extras.

:func:`make_loss` builds it through :func:`bench.losses.get` (which checks ``params``
against the loss's keyword-only hyperparameters) and records how a temperature schedule
reaches it and whether it takes the run's seeded generator (ListMLE's tie order), and what
the scorer feeds it: one score per item, or one logit per label grade
(``grades``, :attr:`bench.losses.LossInfo.outputs`; :func:`scorer_outputs`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from bench.errors import ConfigError
from bench.losses.hyperparameters import supplied_by_trainer
from bench.training.config import check


@dataclass
class LossCall:
    """A loss callable (hyperparameters already bound by the registry) plus per-call extras.

    The temperature of a ``tau_schedule`` is passed as the ``tau`` keyword when the
    callable takes one; for an ``nn.Module`` loss whose ``forward`` does not, it is set as
    the module's ``tau`` attribute before the call.
    """

    fn: Callable[..., Tensor]
    tau_mode: str  # "kwarg", "attribute" or "none"
    takes_generator: bool
    module: nn.Module | None  # set when the loss has trainable parameters
    grades: int | None = None  # a "grade_logits" loss: the scorer has this many outputs per item

    def __call__(self, scores: Tensor, labels: Tensor, mask: Tensor, *, tau: float | None, gen) -> Tensor:
        extra: dict[str, Any] = {}
        if tau is not None:
            if self.tau_mode == "kwarg":
                extra["tau"] = tau
            else:
                self.fn.tau = tau
        if self.takes_generator:
            extra["generator"] = gen
        return self.fn(scores, labels, mask, **extra)

    def scorer_outputs(self, model: nn.Module, x: Tensor, mask: Tensor) -> Tensor:
        """What the loss is computed on: the model's scores ``[B, L]``, or for a grade loss its
        logits ``[B, L, C]`` (:class:`bench.models.ExpectedGrade`, whose scores rank)."""
        return model.logits(x, mask) if self.grades is not None else model(x, mask)


def make_loss(cfg: dict[str, Any], method: str) -> LossCall:
    """Build the loss through :func:`bench.losses.get` (which checks ``params``)."""
    from bench import losses

    name = cfg["loss"]
    try:
        hyper = losses.signature(name)  # imports the loss: a missing module or function is the `loss` key's fault
    except ValueError as exc:
        raise ConfigError(f"methods.{method}.loss: {exc}") from exc
    supplied = supplied_by_trainer(tau_schedule=cfg["train"]["tau_schedule"] is not None)
    problems = hyper.problems(name, cfg["params"], supplied)
    if problems:
        key, message = problems[0]
        raise ConfigError(f"methods.{method}.params.{key}: {message}")
    try:
        fn = losses.get(name, **cfg["params"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"methods.{method}.params: {exc}") from exc
    module = fn if isinstance(fn, nn.Module) else None
    sig = inspect.signature(fn.forward if module is not None else fn)
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    tau_mode = "kwarg" if (var_kw or "tau" in sig.parameters) else "none"
    if tau_mode == "none" and module is not None and isinstance(getattr(module, "tau", None), (int, float)):
        tau_mode = "attribute"
    if cfg["train"]["tau_schedule"] is not None:
        check(tau_mode != "none", f"methods.{method}.train.tau_schedule", f"loss {name!r} has no 'tau' hyperparameter")
        check("tau" not in cfg["params"], f"methods.{method}.params.tau", "set either params.tau or train.tau_schedule")
    takes_gen = "generator" in sig.parameters and "generator" not in cfg["params"]
    has_params = module is not None and bool(losses.has_parameters(name))
    grades = losses.grade_outputs(name, **cfg["params"])
    return LossCall(fn, tau_mode, takes_gen, module if has_params else None, grades)
