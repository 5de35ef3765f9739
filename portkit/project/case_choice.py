"""Which case a one-case command (``portkit sim``, ``portkit diff --size``) runs: a named
case, or the op's largest ordinary case that the simulator runs quickly, reshaped and
reseeded as asked."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from portkit.errors import PortkitError, TooLarge
from portkit.project.cases import Case

if TYPE_CHECKING:
    from portkit.project.discovery import Op

# Biggest default case: a few thousand simulated threads keep `portkit sim` near a second.
DEFAULT_MAX_ELEMENTS = 4096
# Bytes a simulated case needs per input element: about 16 copies of the data (inputs,
# clones, outputs, reference, gradients) and the simulator's shadows. Measured: 2^22
# float32 elements took ~95 (sigmoid) and ~110 (softmax) bytes each at peak.
COPIES_PER_ELEMENT = 16
BOOKKEEPING_PER_ELEMENT = 48


def choose_case(
    op: Op,
    case_name: str | None,
    dtype: str | None,
    shape: tuple[int, ...] | None,
    seed: int | None,
) -> Case:
    """The named case, or the op's largest ordinary case of ``dtype`` that the simulator
    runs quickly, reshaped and reseeded as asked. ``dtype`` None: float32, or the named
    case's."""
    if not case_name:
        dtype = dtype or "float32"
    if not case_name and dtype not in op.definition.dtypes:
        raise PortkitError(
            f"op {op.name} does not accept {dtype}; it takes {', '.join(op.definition.dtypes)}"
        )
    if case_name:
        case = op.case(case_name)
        if dtype is not None and dtype != case.dtype:
            raise PortkitError(
                f"--dtype {dtype} conflicts with --case {case_name}, a {case.dtype} case: drop one"
            )
    else:
        ordinary = [
            c
            for c in op.definition.cases
            if c.dtype == dtype and not (c.gpu_only or c.large or c.special or c.gradcheck)
        ]
        small = [c for c in ordinary if c.numel <= DEFAULT_MAX_ELEMENTS]
        if not small:
            raise PortkitError(f"op {op.name} has no {dtype} case small enough to simulate")
        case = max(small, key=lambda c: c.numel)
    if not case_name and dtype is not None and case.dtype != dtype:
        case = replace(case, dtype=dtype)
    if shape is not None:
        rank = {len(s) for s in case.shapes}
        if len(rank) > 1:
            raise PortkitError(
                f"op {op.name}'s inputs have different shapes ({'/'.join(map(str, sorted(rank)))}"
                f"-D); --shape and --size give every input the same one: pick a case with --case"
            )
        if rank != {len(shape)}:
            raise PortkitError(
                f"op {op.name} takes {'/'.join(map(str, sorted(rank)))}-D inputs; "
                f"the requested shape {'x'.join(map(str, shape))} is {len(shape)}-D"
            )
        case = replace(case, shapes=(shape,) * len(case.shapes))
    if seed is not None:
        case = replace(case, seed=seed)
    return replace(case, gpu_only=False, large=False)


def memory_needed(case: Case) -> int:
    """Roughly the bytes simulating ``case`` takes at its peak."""
    itemsize = max(_itemsize(d) for d in (case.input_dtypes or (case.dtype,)))
    elements = sum(_numel(shape) for shape in case.shapes)
    return elements * (COPIES_PER_ELEMENT * itemsize + BOOKKEEPING_PER_ELEMENT)


def available_memory() -> int | None:
    """Bytes the kernel says can be allocated without swapping (None: unknown)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(op: Op, case: Case) -> None:
    """Refuse, before allocating anything, a case that cannot fit in available memory."""
    needed, available = memory_needed(case), available_memory()
    if available is not None and needed > available:
        shapes = " ".join("x".join(map(str, s)) for s in case.shapes)
        raise TooLarge(
            f"op {op.name} on inputs {shapes} {case.dtype} needs about {_gib(needed)} "
            f"(inputs, outputs and the simulator's bookkeeping); this machine has "
            f"{_gib(available)} available: pick a smaller --size or --shape"
        )


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


def _itemsize(dtype: str) -> int:
    bits = "".join(c for c in dtype if c.isdigit())
    return int(bits) // 8 if bits else 1  # bool: one byte


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"
