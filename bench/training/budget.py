"""A neural run's budget: steps per epoch, epochs and steps (torch-free: cost projections read it).

>>> Budget.of({"batch_size": 16, "epochs": None, "max_steps": 100_000}, 18_919)
Budget(steps_per_epoch=1183, n_epochs=85, max_steps=100000)
>>> Budget.of({"batch_size": 64, "epochs": 100, "max_steps": None}, 18_919)
Budget(steps_per_epoch=296, n_epochs=100, max_steps=29600)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Budget:
    """Steps per epoch and the run's epoch and step budgets (whichever ends first)."""

    steps_per_epoch: int
    n_epochs: int
    max_steps: int

    @classmethod
    def of(cls, tc: dict[str, Any], n_queries: int) -> Budget:
        steps_per_epoch = math.ceil(n_queries / tc["batch_size"])
        n_epochs = tc["epochs"] if tc["epochs"] is not None else math.ceil(tc["max_steps"] / steps_per_epoch)
        if tc["max_steps"] is not None:
            n_epochs = min(n_epochs, math.ceil(tc["max_steps"] / steps_per_epoch))
        max_steps = tc["max_steps"] if tc["max_steps"] is not None else n_epochs * steps_per_epoch
        return cls(steps_per_epoch, n_epochs, max_steps)

    @property
    def total_steps(self) -> int:
        """The steps the run takes when patience does not stop it: the first budget reached."""
        return min(self.max_steps, self.n_epochs * self.steps_per_epoch)
