r"""Scoring models: ``[B, L, F]`` features + ``[B, L]`` mask -> ``[B, L]`` scores.

Two scorers, chosen by ``model.type`` in the run config (:data:`SCORERS`, built by
:func:`build_model` from a resolved model: its keys, types, bounds and defaults are the config
schema's ``mlp_model`` and ``context_aware_model``, filled by
:func:`bench.config.run.resolve_model`; the defaults are given in brackets below):

``mlp`` -- the MLP of PiRank (Swezey et al. 2021, Table 2): ``F -> h_1 -> ... -> h_n -> 1``,
each hidden layer ``Linear -> BatchNorm -> ReLU -> Dropout`` (:class:`UniformDropout`). Keys: ``hidden`` (list of
ints, ``[1024, 512, 256]``), ``batch_norm`` (true), ``dropout`` (0.3), ``output_activation``
(null or ``tanh``).
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
for Istella), ``blocks`` transformer encoder blocks (2) with ``heads`` attention
heads (1), feed-forward width ``hidden`` (384), ``dropout`` (0.1),
then a final layer norm and ``Linear(d, 1)``. Self-attention runs over the items of one
list with padded items excluded as keys (``src_key_padding_mask``), so a real item's score
never depends on padding. Blocks are pre-norm (``x + f(LayerNorm(x))``, as in allRank's
implementation) and there is no positional encoding: the score of an item depends on the
set of items in its list, not on their order. ``output_activation: tanh`` applies
``tanh`` to the scores (the NeuralNDCG paper does this for NeuralNDCG only).

**One logit per grade.** With ``n_outputs = C > 1`` a scorer's last layer has ``C`` units and
it returns ``[B, L, C]`` (padded slots 0); :class:`ExpectedGrade` wraps such a scorer for the
point-wise grade classifier (:mod:`bench.losses.grades`): its ``logits`` are what the loss
trains on, its ``forward`` the expected grade :math:`\sum_{c=0}^{C-1} c\,\mathrm{softmax}(z)_c`,
the score every ranking, validation and test pass uses. :func:`build_model` builds it when
given ``grades`` (from the loss, never from the model config).

>>> import torch
>>> spec = {"type": "mlp", "hidden": [8, 4], "batch_norm": True, "dropout": 0.0, "output_activation": None}
>>> model = build_model(spec, n_features=5).eval()
>>> x = torch.randn(2, 3, 5); mask = torch.tensor([[True, True, False], [True, False, False]])
>>> model(x, mask).shape
torch.Size([2, 3])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn


def _output(scores: Tensor, activation: str | None) -> Tensor:
    return torch.tanh(scores) if activation == "tanh" else scores


def real_rows(x: Tensor, mask: Tensor) -> Tensor:
    """``x[mask]`` for ``x [..., F]`` and a boolean ``mask`` over its leading dimensions: the
    same rows in the same order, gathered by ``index_select`` on the flat positions (about 2.5x
    faster than boolean indexing on the CPU, where a training step gathers a batch's rows)."""
    return x.reshape(-1, x.shape[-1]).index_select(0, mask.reshape(-1).nonzero().squeeze(1))


class UniformDropout(nn.Module):
    r"""Inverted dropout whose keep mask is drawn as uniforms: ``y = x * [u >= p] / (1 - p)``,
    ``u ~ U[0, 1)`` from the global torch generator (``torch.rand_like``), the identity in eval mode.

    The same distribution as :class:`torch.nn.Dropout` (each unit kept with probability
    ``1 - p`` and scaled by ``1 / (1 - p)``, so ``E[y] = x``) and the same generator (the run's
    ``dropout`` draws, checkpointed with it), but a different draw: ``nn.Dropout``'s CPU
    ``bernoulli_`` takes about 3x the time of ``rand_like`` for the same mask, a tenth of a
    small MLP's whole training step (measured: docs/performance.md, "The training step").
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = float(p)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.rand_like(x).ge_(self.p).to(x.dtype).mul_(1.0 / (1.0 - self.p))
        return x * keep

    def extra_repr(self) -> str:
        return f"p={self.p}"


class MLPScorer(nn.Module):
    """PiRank's MLP scorer; batch norm statistics over real items only (module docstring)."""

    def __init__(
        self,
        n_features: int,
        hidden: list[int] | tuple[int, ...],
        *,
        batch_norm: bool,
        dropout: float,
        output_activation: str | None,
        n_outputs: int = 1,
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
                layers.append(UniformDropout(dropout))
            width = size
        layers.append(nn.Linear(width, n_outputs))
        self.net = nn.Sequential(*layers)
        self.output_activation = output_activation
        self.n_outputs = n_outputs

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Scores ``[B, L]`` (``[B, L, C]`` with ``C = n_outputs > 1``); padded slots are 0 and
        never touch the batch statistics."""
        real = self.net(real_rows(x, mask))
        if self.n_outputs == 1:
            out = torch.zeros(mask.shape, dtype=real.dtype, device=real.device)
            return _output(out.masked_scatter(mask, real.squeeze(-1)), self.output_activation)
        out = torch.zeros((*mask.shape, self.n_outputs), dtype=real.dtype, device=real.device)
        out = out.masked_scatter(mask.unsqueeze(-1).expand_as(out), real)
        return _output(out, self.output_activation)


class ContextAwareRanker(nn.Module):
    """Transformer encoder over the items of a list, padding-masked attention."""

    def __init__(
        self,
        n_features: int,
        *,
        input_proj: int,
        hidden: int,
        blocks: int,
        heads: int,
        dropout: float,
        output_activation: str | None,
        n_outputs: int = 1,
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
        self.out = nn.Linear(input_proj, n_outputs)
        self.output_activation = output_activation
        self.n_outputs = n_outputs

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """Scores ``[B, L]`` (``[B, L, C]`` with ``C = n_outputs > 1``); a padded slot is never
        attended to and scores 0."""
        # a list with no real item would make every attention row empty (NaN); let such a
        # list attend to its first slot instead; its scores are zeroed below anyway
        empty = ~mask.any(dim=-1, keepdim=True)
        first = torch.zeros_like(mask)
        first[..., 0] = True
        attend = mask | (empty & first)
        h = self.encoder(self.proj(x), src_key_padding_mask=~attend)
        scores = self.out(self.norm(h))
        if self.n_outputs == 1:
            scores = scores.squeeze(-1)
        real = mask if self.n_outputs == 1 else mask.unsqueeze(-1)
        scores = torch.where(real, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
        return _output(scores, self.output_activation)


class ExpectedGrade(nn.Module):
    r"""A scorer with one logit per label grade, ranking by the expected grade.

    ``logits(x, mask)`` is the wrapped scorer's ``[B, L, C]`` output (what a
    ``"grade_logits"`` loss trains on); ``forward(x, mask)`` is
    :math:`\sum_{c=0}^{C-1} c\,\mathrm{softmax}(z)_c`, ``[B, L]``, 0 on padded slots.

    >>> torch.manual_seed(0) and None
    >>> spec = {"type": "mlp", "hidden": [4], "batch_norm": False, "dropout": 0.0, "output_activation": None}
    >>> model = build_model(spec, n_features=3, grades=5).eval()
    >>> x = torch.randn(1, 2, 3); mask = torch.tensor([[True, False]])
    >>> model.logits(x, mask).shape, model(x, mask).shape
    (torch.Size([1, 2, 5]), torch.Size([1, 2]))
    >>> expected = (torch.softmax(model.logits(x, mask)[0, 0], -1) * torch.arange(5.0)).sum()
    >>> bool(torch.isclose(model(x, mask)[0, 0], expected)), model(x, mask)[0, 1].item()
    (True, 0.0)
    """

    def __init__(self, scorer: nn.Module, grades: int) -> None:
        super().__init__()
        self.scorer = scorer
        self.grades = grades

    def logits(self, x: Tensor, mask: Tensor) -> Tensor:
        return self.scorer(x, mask)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        z = self.logits(x, mask)
        values = torch.arange(self.grades, dtype=z.dtype, device=z.device)
        expected = (torch.softmax(z, dim=-1) * values).sum(dim=-1)
        return torch.where(mask, expected, torch.zeros((), dtype=expected.dtype, device=expected.device))


SCORERS: dict[str, type[nn.Module]] = {"mlp": MLPScorer, "context_aware": ContextAwareRanker}


def build_model(cfg: dict[str, Any], n_features: int, *, grades: int | None = None) -> nn.Module:
    """The scorer a resolved model describes: ``SCORERS[cfg["type"]]`` with the other keys;
    with ``grades`` (a ``"grade_logits"`` loss's class count) the scorer has that many outputs,
    wrapped in :class:`ExpectedGrade`."""
    kwargs = {k: v for k, v in cfg.items() if k != "type"}
    if grades is None:
        return SCORERS[cfg["type"]](n_features, **kwargs)
    return ExpectedGrade(SCORERS[cfg["type"]](n_features, n_outputs=grades, **kwargs), grades)
