"""``numba.cuda.libdevice`` as a simulated kernel sees it.

numba's libdevice functions are Python stubs whose body is a docstring: called on the
CPU they return None, which a store into a float array turns into NaN, silently. Here
the C math functions compute as ``math.*`` does in the simulator (``portkit_math.h``, the
same bits as the CPU twin; ``expf`` is ``exp`` in float32), and rounding, min/max
(``umin``: the bits compared unsigned, as the GPU) and bit counts exactly. Every other
one (the ``fast_`` approximations, pointer or tuple results, rounding-mode intrinsics)
is a one-line error naming it, never a wrong value. Per thread: the lockstep engine hands
such a kernel over.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from portkit.errors import KernelError
from portkit.simt import floatmath
from portkit.simt.poison import Poison, PoisonUsed
from portkit.simt.scalars import INT64

MODULE = "numba.cuda.libdevice"
_SCALARS = {
    name: np.dtype(name) for name in ("float32", "float64", "int32", "int64", "uint32", "uint64")
}
_C_MATH = set(floatmath.ARITY)  # the C math functions portkit_math.h computes


def _round_half_away(x: Any) -> Any:
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole)


# Exact in NumPy, as C computes them (fmax/fmin: the other operand where one is NaN).
_FLOAT_EXACT: dict[str, Callable[..., Any]] = {
    "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": _round_half_away, "fmax": np.fmax, "fmin": np.fmin,
    "copysign": np.copysign,
}  # fmt: skip
_MASK = {32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}
_INTEGER: dict[str, Callable[..., int]] = {
    "abs": abs, "llabs": abs, "min": min, "max": max, "umin": min, "umax": max,
    "llmin": min, "llmax": max, "ullmin": min, "ullmax": max,
}  # fmt: skip
_BITS: dict[str, Callable[[int, int], int]] = {
    "popc": lambda v, w: bin(v & _MASK[w]).count("1"),
    "clz": lambda v, w: w - (v & _MASK[w]).bit_length(),
    "ffs": lambda v, w: ((v & _MASK[w]) & -(v & _MASK[w])).bit_length(),
    "brev": lambda v, w: int(f"{v & _MASK[w]:0{w}b}"[::-1], 2),
}


def is_libdevice(value: Any) -> bool:
    """A function of ``numba.cuda.libdevice`` (one of its stubs)."""
    return callable(value) and getattr(value, "__module__", None) == MODULE


def is_libdevice_module(value: Any) -> bool:
    return isinstance(value, types.ModuleType) and value.__name__ == MODULE


def simulated_libdevice(value: Any) -> Callable[..., Any] | None:
    """The simulated form of a libdevice stub, or None for anything else."""
    if not is_libdevice(value):
        return None
    return _simulated(value.__name__, value.__doc__ or "")


@functools.cache
def _simulated(name: str, doc: str) -> Callable[..., Any]:
    kinds = [_SCALARS.get(kind) for kind in re.findall(r":type \w+: (\w+)", doc)]
    found = re.search(r":rtype: (\w+)", doc)
    result = _SCALARS.get(found.group(1)) if found else None
    # (not ``None in kinds``: NumPy takes None for float64, so dtype("float64") == None)
    params = [kind for kind in kinds if kind is not None]
    compute = None
    if result is not None and params and len(params) == len(kinds):
        compute = _compute(name, result, params)
    if compute is None or result is None:
        return _refused(name)
    returns: np.dtype = result
    run: Callable[..., Any] = compute

    def call(*args: Any) -> Any:
        for arg in args:
            if type(arg) is Poison:
                raise PoisonUsed(arg, f"used as an argument of libdevice.{name}")
        if len(args) != len(params):
            raise KernelError(f"libdevice.{name} takes {len(params)} arguments")
        value = run(*(kind.type(arg) for kind, arg in zip(params, args)))
        return INT64(value) if returns.kind in "iu" else returns.type(value)

    call.__name__ = name
    return call


def _compute(name: str, result: np.dtype, params: list[np.dtype]) -> Callable[..., Any] | None:
    if result.kind == "f":
        base = name[:-1] if result == np.float32 and name.endswith("f") else name
        if base in _C_MATH:
            return lambda *a: floatmath.compute(base, result, *a)[()]
        if base in _FLOAT_EXACT:
            return lambda *a: _FLOAT_EXACT[base](*a)
        return None
    if name in _INTEGER:
        # umin, ullmax...: numba declares signed types; the GPU compares the bits unsigned
        unsigned = _MASK[params[0].itemsize * 8] if name.startswith("u") else -1
        return lambda *a: _wrapped(_INTEGER[name](*(int(x) & unsigned for x in a)), result)
    base = name.removesuffix("ll")
    if base in _BITS and len(params) == 1:
        bits = params[0].itemsize * 8
        return lambda x: _wrapped(_BITS[base](int(x), bits), result)
    return None


def _wrapped(value: int, dtype: np.dtype) -> int:
    """``value`` as the result type holds it (two's complement where signed)."""
    return int(np.array(value & _MASK[dtype.itemsize * 8], np.uint64).astype(dtype))


def _refused(name: str) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        raise KernelError(
            f"numba.cuda.libdevice.{name} is not simulated: portkit's simulator computes the "
            "libdevice functions it can match exactly (C math, rounding, min/max, bit "
            "counts); run this kernel on a GPU, or use math.* or cuda.* for it"
        )

    call.__name__ = name
    return call
