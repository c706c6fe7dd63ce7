"""``--config`` strings in the config's free-form mappings, read back with their YAML type.

Snakemake reads ``--config key=value`` as an int, a float, a boolean or YAML at the top level,
but a nested mapping with YAML's ``BaseLoader``, which keeps every scalar a string:
``'methods={pirank_ndcg_t1000: {params: {tau: 100.0}}}'`` arrives as ``{"tau": "100.0"}``.
Where the schema types a key, :func:`bench.config.validate.coerce_typed_strings` reads it back.
The free-form mappings the schema leaves to their consumer are read back here: a neural method's
``params`` (by its loss's signature, :func:`bench.config.losses.check_losses`), a GBDT method's
``params`` (by the library's default parameters) and a dataset's ``options`` (no defaults:
those of ``bench.data.prepare`` are not imported into the Snakefile's process; no option takes
a string that reads as a number, a boolean or null).

The rule, per key of such a mapping:

- a key whose default is a string keeps a string as it is: the parameter takes strings (a
  sigmoid name ``"cauchy"``, and a deliberate ``"1.0"`` too);
- any other key (default a number, a boolean or null, not a literal, no default, or a name
  only ``**kwargs`` takes) reads a string as a config file reads it unquoted
  (:func:`yaml_scalar`) and takes that value when it is a number, a boolean or null; any other
  string stays a string (``cauchy``, ``nan``). Strings inside a list or mapping under the key
  are read the same way (``k: [5, 10]`` -> ``[5, 10]``).

As for the schema's keys, the default and not the quoting decides: a quoted ``"100.0"`` in a
config file reaches the workflow exactly as ``--config``'s ``100.0`` does, so both are 100.0.

>>> params = {"tau": "100.0", "k": "10", "straight_through": "false", "relaxation": "softsort"}
>>> type_strings(params, {"tau": 5.0, "k": None, "straight_through": True, "relaxation": "neuralsort"})
>>> params
{'tau': 100.0, 'k': 10, 'straight_through': False, 'relaxation': 'softsort'}
>>> params = {"sigmoid": "1.0", "grades": ["1", "2e-1"]}
>>> type_strings(params, {"sigmoid": "cauchy"}); params
{'sigmoid': '1.0', 'grades': [1, 0.2]}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

#: a number as YAML 1.2 writes it; PyYAML (YAML 1.1) reads 1e-2 and 1.0e5 (no dot, no exponent sign) as strings
_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def yaml_scalar(text: str) -> Any:
    """``text`` as a config file's YAML reads it unquoted when that is a number, a boolean or
    null (``"100.0"`` -> 100.0, ``"true"`` -> True, ``"null"`` -> None); else ``text`` itself.

    >>> yaml_scalar("3"), yaml_scalar("1e-2"), yaml_scalar("~"), yaml_scalar("cauchy"), yaml_scalar("nan")
    (3, 0.01, None, 'cauchy', 'nan')
    """
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str) and _NUMBER.fullmatch(text.strip()):
        return float(text)
    return value if value is None or isinstance(value, (bool, int, float)) else text


def type_strings(mapping: dict[str, Any], defaults: Mapping[str, Any]) -> None:
    """Read back the strings of a free-form ``mapping`` by the module docstring's rule, in place;
    ``defaults``: each key's default where one is known."""
    for key, value in mapping.items():
        if not isinstance(defaults.get(key), str):
            mapping[key] = _typed(value)


def _typed(value: Any) -> Any:
    if isinstance(value, str):
        return yaml_scalar(value)
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    return value
