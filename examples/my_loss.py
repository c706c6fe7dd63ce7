r"""A worked example of a user loss: the pairwise squared hinge.

To benchmark your own loss, write one function with the suite's loss signature, in any
importable module (this repository's root is on ``PYTHONPATH`` for every training job), and
name it ``package.module:function`` in ``compare.losses`` (see ``config/compare-example.yaml``):

.. code-block:: yaml

    compare:
      losses:
        - name: squared_hinge          # the method name in tables and run directories
          loss: "examples.my_loss:pairwise_squared_hinge"
          params: {margin: 1.0}        # keyword hyperparameters of the function

then ``snakemake --cores 2 compare --configfile config/compare-example.yaml`` trains only it,
under the frozen protocol, and renders ``reports/compare/<dataset>.md`` against every frozen
baseline.

The loss: over the ordered pairs of real items with :math:`y_i > y_j`,

.. math:: \ell = \frac{1}{|P|} \sum_{(i, j) \in P} \max(0,\ m - (s_i - s_j))^2,

averaged per list and then over the lists that have at least one such pair (a list without
one contributes nothing; if no list contributes the value is ``0 * scores.sum()`` so that
``backward()`` still works). Padded items (``mask`` False) never enter a pair, so padding
changes neither the value nor the gradient. O(L^2) memory per list, like RankNet.

>>> import torch
>>> s = torch.tensor([[2.0, 0.5, 0.0]]); y = torch.tensor([[2.0, 1.0, 0.0]])
>>> m = torch.ones(1, 3, dtype=torch.bool)
>>> round(pairwise_squared_hinge(s, y, m).item(), 4)  # pairs: (1.5->0), (2.0->0), (0.5->0.25)
0.0833
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.losses._common import masked_mean_over_lists


def pairwise_squared_hinge(scores: Tensor, labels: Tensor, mask: Tensor, *, margin: float = 1.0) -> Tensor:
    """Mean squared hinge over the pairs ``y_i > y_j`` of each list (module docstring)."""
    diff = scores.unsqueeze(-1) - scores.unsqueeze(-2)  # [B, L, L]: s_i - s_j
    pair = (labels.unsqueeze(-1) > labels.unsqueeze(-2)) & mask.unsqueeze(-1) & mask.unsqueeze(-2)
    hinge = torch.clamp(margin - diff, min=0.0) ** 2
    zero = torch.zeros((), dtype=scores.dtype, device=scores.device)
    n_pairs = pair.sum(dim=(-1, -2))
    per_list = torch.where(pair, hinge, zero).sum(dim=(-1, -2)) / n_pairs.clamp(min=1)
    return masked_mean_over_lists(per_list, n_pairs > 0, scores)
