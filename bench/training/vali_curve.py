r"""The validation curve on cut lists: what PiRank's Figs. 5 and 8-12 plot, recorded per epoch.

PiRank evaluates its ablation runs with TF-Ranking on validation lists of ``L = 100``
documents, and its Fig. 5 plots :math:`1 - \hat\ell` -- one minus the relaxed loss on those
lists -- beside the hard NDCG@10 of the same lists. With ``train.vali_curve_list_size: L`` a
run records, after every epoch's validation, on the validation queries cut to ``L`` documents
(the seeded sub-sample of :func:`bench.data.sublists.seeded_sublists`, the same for every
method and seed):

- ``vali_L<L>_loss``: the run's loss, at the epoch's temperature, averaged over evaluation
  batches of ``train.batch_size`` lists (taken in the length order of the evaluation lists):
  the mean of the batches' losses, as TF-Ranking's evaluation reports its loss. For a loss
  trained without straight-through estimation (``straight_through: false``) this is the relaxed
  value, so ``1 - vali_L<L>_loss`` is the relaxed metric of Fig. 5;
- ``vali_L<L>_<metric>``: every validation metric of the run on those lists.

Nothing here trains, draws from the run's generators or changes the model (eval mode, no
gradient; a stochastic loss gets its own generator, seeded ``derive_seed(..., "vali_curve")``),
so the run's other outputs are bit-identical with and without the curve (tested). Runs that no
figure needs do not set the key and record nothing more (:func:`bench.config.plan.run_config`
sets it for the temperature figure's runs only).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from bench.seeds import derive_seed
from bench.training.batches import EvalLists, SplitData, eval_lists, gather
from bench.training.common import evaluate_split
from bench.training.device import autocast
from bench.training.loss import LossCall


def curve_lists(split: SplitData, device: torch.device, train: dict[str, Any], *, dataset: str,
                fold: str) -> EvalLists | None:
    """The validation lists cut to ``train.vali_curve_list_size`` in batches of ``train.batch_size``
    lists (None when the key is unset)."""
    size = train.get("vali_curve_list_size")
    if size is None:
        return None
    return eval_lists(split, device, list_size=int(size), batch_lists=int(train["batch_size"]),
                      dataset=dataset, fold=fold, split="vali")


def column_prefix(list_size: int) -> str:
    """``vali_L<L>_``: the curve columns' prefix (``vali_L100_loss``, ``vali_L100_ndcg@10``, ...)."""
    return f"vali_L{int(list_size)}_"


@torch.no_grad()
def curve_row(model: nn.Module, loss_call: LossCall, split: SplitData, ev: EvalLists, *, device: torch.device,
              amp: bool, on_cpu: bool = False, tau: float | None, parts: tuple, list_size: int,
              metrics: dict[str, Any], names: list[str]) -> dict[str, float]:
    """The curve columns of one epoch (module docstring): the mean batch loss and the metrics."""
    from bench.metrics import summarize

    model.eval()
    gen = torch.Generator(device=device).manual_seed(derive_seed(*parts, "vali_curve"))
    scores = torch.zeros(ev.doc_index.size, dtype=torch.float32, device=device)
    batch_losses = []
    for rows, pos in ev.batches:
        x, y, mask = gather(split, rows, device)
        with autocast(device, amp, on_cpu=on_cpu):
            out = loss_call.scorer_outputs(model, x, mask)
            s = out if loss_call.grades is None else model(x, mask)
        batch_losses.append(loss_call(out.float(), y, mask, tau=tau, gen=gen).float())
        scores[pos[mask]] = s.float()[mask]
    frame = evaluate_split(scores.cpu().numpy(), split.labels_np[ev.doc_index], ev.offsets, metrics, names=names)
    prefix = column_prefix(list_size)
    loss = float(torch.stack(batch_losses).mean()) if batch_losses else float("nan")
    return {f"{prefix}loss": loss, **{f"{prefix}{m}": v for m, v in summarize(frame, names).items()}}
