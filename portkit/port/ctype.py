"""C types of numba types, and C's usual arithmetic conversions over them.

A type here is a numba type standing for the C type of the same name: ``int32`` is
``int``, ``uint32`` is ``unsigned`` (what ``threadIdx.x`` is in C), ``float16`` is
``__half``. A *vector* is one type per typed signature of a function; the draft's
template parameters are the vectors that vary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Vec = tuple  # one numba type per typed signature

_NAMES = {
    "bool": "bool",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "uint16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned",
    "int64": "long long",
    "uint64": "unsigned long long",
    "float16": "__half",
    "__nv_bfloat16": "__nv_bfloat16",
    "float32": "float",
    "float64": "double",
}
HALF_NAMES = ("float16", "__nv_bfloat16")


def unliteral(t: Any) -> Any:
    from numba.core import types

    return types.unliteral(t)


def c_name(t: Any) -> str | None:
    """The C spelling of numba type ``t`` (a scalar), None for anything else."""
    return _NAMES.get(str(unliteral(t)))


def is_half(t: Any) -> bool:
    return str(unliteral(t)) in HALF_NAMES


def has_half(vec: Vec) -> bool:
    return any(is_half(t) for t in vec)


def is_float(t: Any) -> bool:
    from numba.core import types

    t = unliteral(t)
    return isinstance(t, types.Float) or is_half(t)


def is_integer(t: Any) -> bool:
    from numba.core import types

    return isinstance(unliteral(t), (types.Integer, types.Boolean))


def is_array(t: Any) -> bool:
    from numba.core import types

    return isinstance(t, types.Array)


def widened(t: Any) -> Any:
    """The type C computes a value of ``t`` in: half precision widens to float."""
    from numba.core import types

    return types.float32 if is_half(t) else unliteral(t)


def _rank(t: Any) -> tuple[int, bool]:
    from numba.core import types

    t = unliteral(t)
    if isinstance(t, types.Boolean):
        return 1, False
    return t.bitwidth, not t.signed


def c_promote(a: Any, b: Any) -> Any:
    """The type of ``a op b`` in C (the usual arithmetic conversions), half widened."""
    from numba.core import types

    a, b = widened(a), widened(b)
    if is_float(a) or is_float(b):
        floats = [t for t in (a, b) if is_float(t)]
        return max(floats, key=lambda t: t.bitwidth)
    ranks = [_rank(a), _rank(b)]
    ranks = [(max(bits, 32), uns if bits >= 32 else False) for bits, uns in ranks]
    bits = max(r[0] for r in ranks)
    # Of equal width, unsigned wins (int + unsigned is unsigned in C).
    unsigned = any(r == (bits, True) for r in ranks)
    return types.Integer.from_bitwidth(bits, signed=not unsigned)


def vec_map(fn: Callable[..., Any], *vecs: Vec) -> Vec:
    return tuple(fn(*items) for items in zip(*vecs))
