"""What a simulated kernel answers to numba's per-signature resource queries
(``kernel.overloads[sig]``, ``get_regs_per_thread()``, ``max_cooperative_grid_blocks``):
numba compiles one variant per argument-type signature; the simulator compiles nothing,
so each signature a kernel was declared with or launched with gets an overload whose
answers are a GPU's plausible ones for the simulated device (device.py)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from portkit.simt.device import blocks_per_sm, current_device

REGISTERS_PER_THREAD = 32  # what a small kernel typically gets; numba reports ptxas's count


class SimulatedOverload:
    """One signature's "compiled" kernel."""

    def __init__(self, name: str, argtypes: tuple[Any, ...], shared_bytes: int) -> None:
        self.name = name
        self.argument_types = argtypes
        self.signature = argtypes
        self.regs_per_thread = REGISTERS_PER_THREAD
        self.const_mem_size = 0
        self.shared_mem_per_block = shared_bytes
        self.max_threads_per_block = current_device().MAX_THREADS_PER_BLOCK
        self.local_mem_per_thread = 0

    def max_cooperative_grid_blocks(self, blockdim: Any, dynsmemsize: int = 0) -> int:
        """Blocks a cooperative launch of this block size may have: all resident at once."""
        threads = (
            functools.reduce(operator.mul, blockdim, 1) if isinstance(blockdim, tuple) else blockdim
        )
        device = current_device()
        shared = self.shared_mem_per_block + dynsmemsize
        return blocks_per_sm(device.spec, int(threads), shared) * device.spec.sms

    def __repr__(self) -> str:
        return f"<simulated overload {self.name}{self.argument_types}>"


def declared_signatures(signature: Any) -> list[tuple[Any, ...]]:
    """The argument-type tuples of ``cuda.jit(sig)``'s ``sig`` (one or a list)."""
    from numba.core.sigutils import normalize_signature

    many = signature if isinstance(signature, list) else [signature]
    found = []
    for each in many:
        args, _ = normalize_signature(each)
        found.append(tuple(args))
    return found


def argument_types(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """numba's types of a launch's arguments (None where one has no numba type)."""
    from numba import typeof

    try:
        return tuple(typeof(getattr(a, "_ary", a)) for a in args)
    except (ValueError, TypeError):
        return None


class Overloads:
    """The ``overloads`` and ``get_*`` queries of ``SimulatedKernel`` (numba's names)."""

    __name__: str
    overloads: dict[tuple[Any, ...], SimulatedOverload]
    specialized: bool

    def add_overload(self, argtypes: tuple[Any, ...] | None, shared_bytes: int = 0) -> None:
        if argtypes is not None and argtypes not in self.overloads:
            self.overloads[argtypes] = SimulatedOverload(self.__name__, argtypes, shared_bytes)

    def _query(self, attribute: str, signature: Any) -> Any:
        if signature is not None:
            args = getattr(signature, "args", signature)
            return getattr(self.overloads[tuple(args)], attribute)
        if self.specialized:
            return getattr(next(iter(self.overloads.values())), attribute)
        return {sig: getattr(o, attribute) for sig, o in self.overloads.items()}

    def get_regs_per_thread(self, signature: Any = None) -> Any:
        return self._query("regs_per_thread", signature)

    def get_const_mem_size(self, signature: Any = None) -> Any:
        return self._query("const_mem_size", signature)

    def get_shared_mem_per_block(self, signature: Any = None) -> Any:
        return self._query("shared_mem_per_block", signature)

    def get_max_threads_per_block(self, signature: Any = None) -> Any:
        return self._query("max_threads_per_block", signature)

    def get_local_mem_per_thread(self, signature: Any = None) -> Any:
        return self._query("local_mem_per_thread", signature)

    @property
    def signatures(self) -> list[tuple[Any, ...]]:
        return list(self.overloads)


@functools.cache
def _typing_context() -> Any:
    from numba.core.typing import Context

    return Context()


def _chosen(
    actual: tuple[Any, ...], signatures: Sequence[tuple[Any, ...]]
) -> tuple[Any, ...] | None:
    """The declared signature numba calls: the exact match, else the one whose
    conversions of the launch's types rate best (fewest unsafe, then safe, then
    promoting conversions: numba's overload rating), the first of equals."""
    from numba.core.typeconv import Conversion

    context = _typing_context()
    if actual in signatures:
        return actual
    best: tuple[tuple[int, ...], tuple[Any, ...]] | None = None
    for declared in signatures:
        if len(declared) != len(actual):
            continue
        counts = {Conversion.unsafe: 0, Conversion.safe: 0, Conversion.promote: 0}
        for formal, given in zip(declared, actual):
            if formal == given:
                continue
            kind = context.can_convert(given, formal)
            if kind is None:
                break
            if kind in counts:
                counts[kind] += 1
        else:
            order = (Conversion.unsafe, Conversion.safe, Conversion.promote)
            rating = tuple(counts[c] for c in order)
            if best is None or rating < best[0]:
                best = (rating, declared)
    return None if best is None else best[1]


def as_declared(
    kernel: str, args: Sequence[Any], signatures: Sequence[tuple[Any, ...]], one: bool = False
) -> list[Any]:
    """A launch's scalar arguments as numba passes them to a kernel declared with
    explicit signatures: converted to the declared type (a Python float for a float32
    parameter is rounded to float32, an int for an int8 one wraps). Arguments matching
    none of a list of signatures are numba's ``TypeError``; a kernel declared with one
    signature (``one``, numba's "specialized") takes them unchecked, an array of another
    dtype of the same size reinterpreted as the declared one, as numba passes it."""
    from numba.core import types
    from numba.np.numpy_support import as_dtype

    from portkit.simt.launch_errors import LaunchTypeError

    actual = argument_types(args)
    if actual is None:
        return list(args)  # an argument numba cannot type: the kernel says how it fails
    declared = _chosen(actual, signatures)
    if declared is None and one and len(signatures[0]) == len(actual):
        declared = signatures[0]
    if declared is None:
        shown = ", ".join(str(t) for t in actual)
        raise LaunchTypeError(
            f"kernel {kernel}: No matching definition for argument type(s) {shown}; "
            f"declared: {'; '.join(str(s) for s in signatures)}"
        )
    converted = []
    for value, kind in zip(args, declared):
        if isinstance(kind, (types.Number, types.Boolean)) and not isinstance(value, np.ndarray):
            with np.errstate(all="ignore"):
                value = np.asarray(value).astype(as_dtype(kind))[()]
        elif isinstance(kind, types.Array) and isinstance(value, np.ndarray):
            wanted = _dtype_of(kind.dtype)
            if wanted is not None and wanted != value.dtype:
                if wanted.itemsize == value.dtype.itemsize:
                    value = value.view(wanted)
        converted.append(value)
    return converted


def _dtype_of(kind: Any) -> np.dtype | None:
    from numba.np.numpy_support import as_dtype

    try:
        return np.dtype(as_dtype(kind))
    except Exception:  # a numba type NumPy has no dtype for: keep the array as it is
        return None
