"""Numba decorators that cache compiled code when they can and still work when they cannot.

``cache=True`` writes the compiled machine code next to the source (``__pycache__``) or, when
that directory is read-only, into numba's user-wide cache directory. If neither is writable
numba refuses to decorate at all; then we compile without caching instead of failing, so a
read-only install only pays the compile time on each process start.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numba


def njit(func: Callable | None = None, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)`` with a graceful fallback to ``cache=False``.

    Usable bare (``@njit``) or with options (``@njit(parallel=True)``).
    """

    def decorate(func: Callable) -> Callable:
        try:
            return numba.njit(cache=True, **options)(func)
        except RuntimeError as exc:  # "cannot cache function ...: no locator available"
            warnings.warn(f"numba cache unavailable for {func.__qualname__}: {exc}", stacklevel=2)
            return numba.njit(cache=False, **options)(func)

    return decorate if func is None else decorate(func)
