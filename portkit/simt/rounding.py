"""``round`` in a simulated kernel, as numba-cuda compiles it."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

INT64 = np.int64
FLOAT64 = np.float64


def typed_round(value: Any, ndigits: Any = None) -> Any:
    """``round`` as numba-cuda compiles it: ``round(x)`` of a float is an int64 (half to
    even); ``round(x, n)`` keeps x's float type, scaling by ``10.0 ** n`` in float64 and
    breaking exact ties to even (numba-cuda's ``round_ndigits``)."""
    if not isinstance(value, (float, np.floating)):
        return value if ndigits is None else INT64(builtins.round(int(value), int(ndigits)))
    if ndigits is None:
        return INT64(builtins.round(float(value)))
    kind = type(value) if isinstance(value, np.floating) else FLOAT64
    x, digits = float(value), int(ndigits)
    if math.isinf(x) or math.isnan(x):
        return kind(x)
    if digits >= 0:
        pow1, pow2 = (10.0 ** (digits - 22), 1e22) if digits > 22 else (10.0**digits, 1.0)
        y = (x * pow1) * pow2
        if math.isinf(y):
            return kind(x)
    else:
        pow1 = 10.0 ** (-digits)
        y = x / pow1
    z = float(builtins.round(y))
    if math.fabs(y - z) == 0.5:
        z = 2.0 * builtins.round(y / 2.0)
    z = (z / pow2) / pow1 if digits >= 0 else z * pow1
    return kind(z)
