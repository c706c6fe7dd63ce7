"""The stated cost of each built-in loss: forward + backward of one list of ``n`` items, at the
loss's default hyperparameters, as a function of ``n`` (cut-offs, iteration counts and tree
depths are constants).

The forms are those :func:`bench.report.figures.stated_slope` reads (``n``, ``n log n``,
``n log^2 n``, ``n^2``, ``n^3``); ``ltr-bench perf scaling`` compares each curve's measured
log-log slope with the slope the stated form has over the measured list sizes
(``docs/performance.md``, "Measured exponents against stated costs").
``tests/losses/test_registry.py`` checks that every built-in loss (``registry.BUILTIN``) has an
entry here and that each entry parses; a plug-in or user loss without one is timed, its verdict
"no stated cost". Why each form, briefly:

* ``n``: one pass over the list (softmax, ListNet, RMSE; PL-Rank, whose samples place the top
  ``k`` items only);
* ``n log n``: a sort dominates (ListMLE's label order; PiRank at depth 1 and ARF-relax, whose
  NeuralSort row sums come from a sort plus ``O(k n)`` for ``k`` rows; SoftSort's ``k`` rows;
  the permutahedron projections: a sort and an ``O(n)`` isotonic regression);
* ``n log^2 n``: the bitonic network carries the gains through ``O(log^2 n)`` layers;
* ``n^2``: all pairs or a full ``n x n`` matrix (pairwise losses, ApproxNDCG's sigmoid sums,
  Sinkhorn iterations, all NeuralSort rows).
"""

from __future__ import annotations

STATED_COMPLEXITY: dict[str, str] = {
    "pirank_ndcg": "n log n",
    "pirank_arp": "n^2",  # k = None: all n rows
    "neuralndcg": "n^2",
    "neuralndcg_transposed": "n^2",
    "sinkprop": "n^2",
    "arf": "n^2",  # L_global uses every row
    "arf_relax": "n log n",
    "approxndcg": "n^2",
    "lambdaloss": "n^2",
    "lambda_recall": "n^2",
    "lambda_opa": "n^2",
    "ranknet": "n^2",
    "listnet": "n",
    "neuralsort_ce": "n^2",
    "softmax": "n",
    "listmle": "n log n",
    "rmse": "n",
    "softrank_ndcg": "n log n",
    "softrank_spearman": "n log n",
    "softsort_ndcg": "n log n",
    "diffsort_ndcg": "n log^2 n",  # bitonic (odd_even: n^2)
    "softmax_pointwise": "n",  # one softmax over the C grades per item: O(n C), ARF Table 9's O(n l)
    "plrank_ndcg": "n",  # n_samples draws of the top k = 10 places (a partial sort), prefix sums over k
    "gumbel_approxndcg": "n^2",  # ApproxNDCG on sample_size perturbed copies
    "gumbel_neuralsort_ce": "n^2",  # the NeuralSort cross entropy on sample_size perturbed copies
}


def stated_complexity(name: str) -> str:
    """The stated cost of loss ``name``, or ``""`` when none is stated (a user's loss).

    >>> stated_complexity("softrank_ndcg"), stated_complexity("my.module:loss")
    ('n log n', '')
    """
    return STATED_COMPLEXITY.get(name, "")
