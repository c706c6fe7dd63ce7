"""The metric conventions a config may choose: the one list of each (stdlib only).

:mod:`bench.metrics` implements them and checks its arguments against these tuples; the
config (:mod:`bench.config`) accepts exactly these values for ``evaluation.empty_query``,
``evaluation.ties``, ``evaluation.convention`` and a job's ``metrics`` mapping. The config
schema types these keys as strings and leaves their values to this module, so the choices
are written once (the schema holds their defaults).

- ``EMPTY_QUERY_CHOICES``: how a query without a relevant document scores (1, 0, or dropped);
- ``TIES_CHOICES``: tied scores ranked in file order (``stable``) or averaged over their
  orderings (``expected``);
- ``CONVENTIONS``: the suite's default grading and LETOR's official evaluation scripts.
"""

from __future__ import annotations

EMPTY_QUERY_CHOICES = ("one", "zero", "drop")
TIES_CHOICES = ("stable", "expected")
CONVENTIONS = ("default", "letor3", "letor4")
#: what ``evaluation.convention`` takes besides a convention: each dataset's own
DATASET_CONVENTION = "dataset"

#: config key (last part) -> its choices
CHOICES = {"empty_query": EMPTY_QUERY_CHOICES, "ties": TIES_CHOICES, "convention": CONVENTIONS}
