"""The choices the config offers that a lower layer implements: one list of each (stdlib only).

The config schema types these keys as strings and holds their defaults; the values allowed are
these tuples, which the modules that implement them check their arguments against and the
config (:mod:`bench.config`) accepts:

- ``EMPTY_QUERY_CHOICES`` (``evaluation.empty_query``, a job's ``metrics.empty_query``): how a
  query without a relevant document scores (1, 0, or dropped) -- :mod:`bench.metrics`;
- ``TIES_CHOICES`` (``...ties``): tied scores ranked in file order (``stable``) or averaged over
  their orderings (``expected``) -- :mod:`bench.metrics`;
- ``CONVENTIONS`` (``...convention``, ``datasets.<name>.convention``, ``tables.<name>.convention``):
  the suite's default grading, LETOR's official evaluation scripts, TF-Ranking's and allRank's
  metrics -- :mod:`bench.metrics`;
- ``TESTS``, ``CORRECTIONS`` (``stats.test``, ``stats.correction``): the paired test and the
  multiple-comparison correction -- :mod:`bench.stats`.
"""

from __future__ import annotations

EMPTY_QUERY_CHOICES = ("one", "zero", "drop")
TIES_CHOICES = ("stable", "expected")
CONVENTIONS = ("default", "letor3", "letor4", "tfranking", "allrank")
#: the conventions that keep score ties in file order (LETOR's scripts), so ``ties`` must be ``stable``
#: where they grade; the tools' conventions (tfranking, allrank) fix their own tie rule
STABLE_TIES_CONVENTIONS = ("letor3", "letor4")
#: what ``evaluation.convention`` takes besides a convention: each dataset's own
DATASET_CONVENTION = "dataset"
TESTS = ("t", "wilcoxon", "permutation")
CORRECTIONS = ("holm", "none")

#: config key (its last part) -> its choices
CHOICES = {"empty_query": EMPTY_QUERY_CHOICES, "ties": TIES_CHOICES, "convention": CONVENTIONS, "test": TESTS,
           "correction": CORRECTIONS}
