r"""Scoring models: ``[B, L, F]`` features + ``[B, L]`` mask -> ``[B, L]`` scores.

Two scorers, chosen by ``model.type`` in the run config (see :func:`build_model`):

``mlp`` -- the MLP of PiRank (Swezey et al. 2021, Table 2): ``F -> h_1 -> ... -> h_n -> 1``,
each hidden layer ``Linear -> BatchNorm -> ReLU -> Dropout``. Keys: ``hidden`` (list of
ints, default ``[1024, 512, 256]``), ``batch_norm`` (default ``true``), ``dropout``
(default ``0.3``), ``output_activation`` (``null`` or ``tanh``).
The ablation network of the same table is ``hidden: [256, 256, 128, 128, 64, 64],
batch_norm: false, dropout: 0``.

**Batch norm and padding.** A batch of lists is padded to a common length; the padded
slots hold copies of some real document (the trainer gathers index 0 there), so letting
them into the batch statistics would bias the mean and variance towards whatever happens to
be gathered, and the bias would change with ``L_train``. The MLP therefore scores only the
real items: it selects ``x[mask]`` (shape ``[n_real, F]``), runs an ordinary MLP whose
``BatchNorm1d`` sees exactly the real items of the batch, and scatters the scores back;
padded slots get score 0. So ``mean = (1/n_real) sum_{real i} x_i`` and likewise the
variance, the running statistics used at evaluation are updated from real items only, and
the result is invariant to how much padding a batch carries (see ``tests/test_models.py``).

``context_aware`` -- the Context-Aware Ranker (Pobrotyn et al. 2020) as configured in the
NeuralNDCG paper: a linear input projection ``F -> d`` (``input_proj``, 96 for Web30K, 128
for Istella), ``blocks`` transformer encoder blocks (default 2) with ``heads`` attention
heads (default 1), feed-forward width ``hidden`` (default 384), ``dropout`` (default 0.1),
then a final layer norm and ``Linear(d, 1)``. Self-attention runs over the items of one
list with padded items excluded as keys (``src_key_padding_mask``), so a real item's score
never depends on padding. Blocks are pre-norm (``x + f(LayerNorm(x))``, as in allRank's
implementation) and there is no positional encoding: the score of an item depends on the
set of items in its list, not on their order. ``output_activation: tanh`` applies
``tanh`` to the scores (the NeuralNDCG paper does this for NeuralNDCG only).

>>> import torch
>>> model = build_model({"type": "mlp", "hidden": [8, 4]}, n_features=5).eval()
>>> x = torch.randn(2, 3, 5); mask = torch.tensor([[True, True, False], [True, False, False]])
>>> model(x, mask).shape
torch.Size([2, 3])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

MLP_DEFAULTS: dict[str, Any] = {
    "type": "mlp",
    "hidden": [1024, 512, 256],
    "batch_norm": True,
    "dropout": 0.3,
    "output_activation": None,
}
CONTEXT_AWARE_DEFAULTS: dict[str, Any] = {
    "type": "context_aware",
    "input_proj": 96,
    "hidden": 384,
    "blocks": 2,
    "heads": 1,
    "dropout": 0.1,
    "output_activation": None,
}
_DEFAULTS = {"mlp": MLP_DEFAULTS, "context_aware": CONTEXT_AWARE_DEFAULTS}
_ACTIVATIONS = (None, "tanh")


def _output(scores: Tensor, activation: str | None) -> Tensor:
    return torch.tanh(scores) if activation == "tanh" else scores


class MLPScorer(nn.Module):
    """PiRank's MLP scorer; batch norm statistics over real items only (module docstring)."""

    def __init__(
        self,
        n_features: int,
        hidden: list[int] | tuple[int, ...] = (1024, 512, 256),
        *,
        batch_norm: bool = True,
        dropout: float = 0.3,
        output_activation: str | None = None,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = n_features
        for size in hidden:
            layers.append(nn.Linear(width, size))
            if batch_norm:
                layers.append(nn.BatchNorm1d(size))
            layers.append(nn.ReLU())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = size
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)
        self.output_activation = output_activation

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Scores ``[B, L]``; padded slots are 0 and never touch the batch statistics."""
        real = self.net(x[mask]).squeeze(-1)
        out = torch.zeros(mask.shape, dtype=real.dtype, device=real.device)
        out = out.masked_scatter(mask, real)
        return _output(out, self.output_activation)


class ContextAwareRanker(nn.Module):
    """Transformer encoder over the items of a list, padding-masked attention."""

    def __init__(
        self,
        n_features: int,
        *,
        input_proj: int = 96,
        hidden: int = 384,
        blocks: int = 2,
        heads: int = 1,
        dropout: float = 0.1,
        output_activation: str | None = None,
    ) -> None:
        super().__init__()
        self.proj = nn.Linear(n_features, input_proj)
        layer = nn.TransformerEncoderLayer(
            d_model=input_proj,
            nhead=heads,
            dim_feedforward=hidden,
            dropout=dropout,
            activation="relu",
            batch_first=True,
            norm_first=True,
        )
        # nested tensors would take a different kernel path in eval mode; one path only
        self.encoder = nn.TransformerEncoder(layer, num_layers=blocks, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(input_proj)
        self.out = nn.Linear(input_proj, 1)
        self.output_activation = output_activation

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Scores ``[B, L]``; a padded slot is never attended to and scores 0."""
        # a list with no real item would make every attention row empty (NaN); let such a
        # list attend to its first slot instead; its scores are zeroed below anyway
        empty = ~mask.any(dim=-1, keepdim=True)
        first = torch.zeros_like(mask)
        first[..., 0] = True
        attend = mask | (empty & first)
        h = self.encoder(self.proj(x), src_key_padding_mask=~attend)
        scores = self.out(self.norm(h)).squeeze(-1)
        scores = torch.where(mask, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
        return _output(scores, self.output_activation)


def resolve_model_config(cfg: dict[str, Any] | None, *, key: str = "model") -> dict[str, Any]:
    """Fill defaults for ``cfg['type']`` and reject unknown keys, naming ``key.<name>``.

    >>> resolve_model_config({"type": "context_aware", "input_proj": 128})["hidden"]
    384
    >>> resolve_model_config({"type": "mlp", "width": 3})
    Traceback (most recent call last):
    ...
    ValueError: model.width: unknown key for model type 'mlp'; known keys: batch_norm, dropout, hidden, output_activation, type
    """
    cfg = dict(cfg or {})
    kind = cfg.get("type", "mlp")
    if kind not in _DEFAULTS:
        raise ValueError(f"{key}.type: unknown model type {kind!r}; choose one of {sorted(_DEFAULTS)}")
    defaults = _DEFAULTS[kind]
    for name in cfg:
        if name not in defaults:
            known = ", ".join(sorted(defaults))
            raise ValueError(f"{key}.{name}: unknown key for model type {kind!r}; known keys: {known}")
    out = {**defaults, **cfg, "type": kind}
    if out["output_activation"] not in _ACTIVATIONS:
        raise ValueError(f"{key}.output_activation: must be null or 'tanh', got {out['output_activation']!r}")
    if not 0.0 <= float(out["dropout"]) < 1.0:
        raise ValueError(f"{key}.dropout: must be in [0, 1), got {out['dropout']!r}")
    if kind == "mlp":
        hidden = out["hidden"]
        if not isinstance(hidden, (list, tuple)) or not all(isinstance(h, int) and h > 0 for h in hidden):
            raise ValueError(f"{key}.hidden: must be a list of positive integers, got {hidden!r}")
        out["hidden"] = list(hidden)
    else:
        for name in ("input_proj", "hidden", "blocks", "heads"):
            if not isinstance(out[name], int) or out[name] <= 0:
                raise ValueError(f"{key}.{name}: must be a positive integer, got {out[name]!r}")
        if out["input_proj"] % out["heads"]:
            raise ValueError(
                f"{key}.heads: input_proj ({out['input_proj']}) must be divisible by heads ({out['heads']})"
            )
    return out


def build_model(cfg: dict[str, Any] | None, n_features: int, *, key: str = "model") -> nn.Module:
    """Build the scorer described by ``cfg`` (defaults filled by :func:`resolve_model_config`)."""
    c = resolve_model_config(cfg, key=key)
    if c["type"] == "mlp":
        return MLPScorer(
            n_features,
            c["hidden"],
            batch_norm=bool(c["batch_norm"]),
            dropout=float(c["dropout"]),
            output_activation=c["output_activation"],
        )
    return ContextAwareRanker(
        n_features,
        input_proj=c["input_proj"],
        hidden=c["hidden"],
        blocks=c["blocks"],
        heads=c["heads"],
        dropout=float(c["dropout"]),
        output_activation=c["output_activation"],
    )
