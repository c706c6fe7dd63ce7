"""Ranking losses of ltr-bench, addressed by name through one registry.

>>> from bench import losses
>>> "lambdaloss" in losses.names()
True

See :mod:`bench.losses.registry` for naming rules (built-ins, ``__losses__`` plug-ins,
``"package.module:function"``) and ``docs/losses.md`` for the definitions.
"""

from bench.losses.registry import (
    BUILTIN,
    LossInfo,
    get,
    grade_outputs,
    has_parameters,
    info,
    names,
    register,
    signature,
)

__all__ = ["BUILTIN", "LossInfo", "get", "grade_outputs", "has_parameters", "info", "names", "register", "signature"]
