"""Benchmark shapes the op did not declare: ``--shape``, ``--size``, and a GPU-sized
scaling of the largest case for an op without ``bench=`` cases.

The rule, in the words ``portkit bench --help`` and docs/bench.md use:

- **The template** is the op's largest case (most elements in its first input) among
  its ``bench=`` and check cases (of two as large, the one in ``--dtype``, else
  float32); with ``--shape``, among the cases whose inputs have the ranks given. With
  ``--dtype`` the template's floating-point inputs take that dtype.
- **``--shape 4096x4096``** gives the first input that shape; ``--shape 8x1024,1024x64``
  gives the first inputs theirs, one shape per input, in order.
- **``--size N``** gives the first input at least N elements: its leading dimension (rows,
  batch) becomes ceil(N / the other dimensions'), the others keep the template's sizes.
- **Without either, an op without ``bench=`` cases** (and without large or GPU-only
  ones) is timed at its largest case with the leading dimension multiplied by the
  smallest power of two that makes the inputs at least ``AUTO_BYTES``; the table says
  "scaled from" that case.
- **Every other input follows**: a dimension of an input not given (a layernorm weight,
  a cross entropy's targets) takes the new size of the given dimension it equals in
  *every* case of the op with the same ranks (the weight always equals x's columns); a
  dimension that equals none keeps its size (a kernel size). An integer input's upper
  bound (``int_range``) that equals a dimension in every case follows it the same way
  (class indices below the number of columns). A dimension that equals two given
  dimensions of different new sizes in every case is ambiguous: an error names it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from portkit.errors import PortkitError
from portkit.project.cases import Case
from portkit.project.dtypes import DTYPES, is_float

if TYPE_CHECKING:
    from portkit.project.discovery import Op

# The inputs of an automatically scaled case reach the copy roofline's buffer
# (portkit.bench.machine: 256 MiB, five times an H100's L2): at ~3 TB/s such a call
# runs for ~100 us or more, so a launch's few us are noise, and its data cannot sit in
# L2 between the flush and the kernel.
AUTO_BYTES = 256 << 20
MAX_ELEMENTS = 1 << 40  # no machine holds an input larger than this
ITEMSIZE = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
    "int16": 2, "int32": 4, "int64": 8, "bool": 1,
}  # fmt: skip
Shapes = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class ScaledCase(Case):
    """A case made from another at a new shape; ``origin`` names that case."""

    origin: str = ""


def case_origin(case: Case) -> str | None:
    """The case a benchmark case was scaled from (None for a declared case)."""
    return case.origin if isinstance(case, ScaledCase) else None


# -- the command line ----------------------------------------------------------------------


def parse_shapes(text: str) -> Shapes:
    """``4096x4096`` or ``8x1024,1024x64`` (one shape per leading input)."""
    shapes = []
    for part in text.lower().replace(" ", "").split(","):
        if not re.fullmatch(r"\d+(x\d+)*", part):
            raise PortkitError(
                f"--shape is like 4096x4096, or 8x1024,1024x64 for the first inputs; got {text!r}"
            )
        shape = tuple(int(d) for d in part.split("x"))
        if min(shape) < 1 or math.prod(shape) > MAX_ELEMENTS:
            raise PortkitError(f"--shape {text}: dimensions are 1 or more, 2^40 elements at most")
        shapes.append(shape)
    return tuple(shapes)


def parse_size(text: str) -> int:
    """``67108864`` or ``2^26``: elements of the first input."""
    match = re.fullmatch(r"(\d+)(?:\^(\d{1,2}))?", text.replace(" ", ""))
    value = int(match[1]) ** int(match[2] or 1) if match else 0
    if not 1 <= value <= MAX_ELEMENTS:
        raise PortkitError(
            f"--size is a number of elements from 1 to 2^40, like 67108864 or 2^26; got {text!r}"
        )
    return value


# -- the rule ------------------------------------------------------------------------------


def template(op: Op, ranks: Sequence[int] = (), dtype: str | None = None) -> Case:
    """The case a new shape is made from (see the module's docstring)."""
    definition = op.definition
    candidates = [c for c in (*definition.bench, *definition.cases) if c.numel > 0]
    if ranks:
        ranks = tuple(ranks)
        candidates = [c for c in candidates if _ranks(c)[: len(ranks)] == ranks]
        if not candidates:
            largest = max(definition.cases, key=lambda c: c.numel)
            wanted = ", ".join(f"{r}-D" for r in ranks)
            have = ", ".join("x".join(map(str, s)) or "scalar" for s in largest.shapes)
            raise PortkitError(
                f"op {op.name} has no case whose first inputs are {wanted}; "
                f"its largest case's inputs are {have}"
            )
    if not candidates:
        raise PortkitError(f"op {op.name} has no case with elements to scale")
    wanted = dtype or "float32"
    chosen = max(candidates, key=lambda c: (c.numel, c.dtype == wanted))
    if dtype is None or chosen.dtype == dtype:
        return chosen
    if dtype not in DTYPES:
        raise PortkitError(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    dtypes = tuple(dtype if is_float(d) else d for d in chosen.dtypes)
    problem = definition.refused_dtype(dtypes)
    if problem:
        raise PortkitError(f"op {op.name}: --dtype {dtype}: {problem}")
    return replace(chosen, dtype=dtype, input_dtypes=dtypes if chosen.input_dtypes else ())


def at_shapes(op: Op, shapes: Shapes, dtype: str | None = None) -> ScaledCase:
    """The template with its first inputs at ``shapes`` (``--shape``)."""
    inputs = max(len(c.shapes) for c in op.definition.cases)
    if len(shapes) > inputs:
        raise PortkitError(
            f"--shape gives {len(shapes)} shapes; op {op.name} takes {inputs} inputs"
        )
    return _rescaled(op, template(op, [len(s) for s in shapes], dtype), shapes)


def at_size(op: Op, size: int, dtype: str | None = None) -> ScaledCase:
    """The template with its first input's leading dimension grown to ``size`` elements."""
    base = template(op, (), dtype)
    first = base.shapes[0]
    if not first:
        raise PortkitError(f"op {op.name}: its first input is a scalar; --size has no rows to grow")
    rest = math.prod(first[1:])
    return _rescaled(op, base, ((math.ceil(size / rest), *first[1:]),))


def gpu_sized(op: Op) -> Case:
    """The largest case, its leading dimension times the smallest power of two that makes
    its inputs ``AUTO_BYTES``; the case as it is when it is that large already or when
    the rule cannot tell how its other inputs follow."""
    base = template(op)
    if not base.shapes[0] or case_bytes(base) >= AUTO_BYTES:
        return base
    rows, rest = base.shapes[0][0], base.shapes[0][1:]
    factor = 2
    try:
        while True:
            case = _rescaled(op, base, ((rows * factor, *rest),))
            if case_bytes(case) >= AUTO_BYTES or rows * factor * math.prod(rest) > MAX_ELEMENTS:
                return case
            factor *= 2
    except PortkitError:
        return base


def case_bytes(case: Case) -> int:
    return sum(math.prod(s) * ITEMSIZE[d] for s, d in zip(case.shapes, case.dtypes))


def _ranks(case: Case) -> tuple[int, ...]:
    return tuple(len(s) for s in case.shapes)


def _rescaled(op: Op, base: Case, given: Shapes) -> ScaledCase:
    """``base`` with its first ``len(given)`` inputs at ``given``, the others following."""
    if base.inputs is not None:  # its own function draws them, at its own shapes only
        raise PortkitError(
            f"op {op.name}: case {base.name} makes its own inputs (inputs=), which cannot "
            f"follow a new shape; declare bench= cases, or use kinds= for structured inputs"
        )
    peers = [c for c in (*op.definition.bench, *op.definition.cases) if _ranks(c) == _ranks(base)]
    sources = [(k, j) for k, shape in enumerate(given) for j in range(len(shape))]
    shapes = list(given)
    for i in range(len(given), len(base.shapes)):
        shape = []
        for a, size in enumerate(base.shapes[i]):
            follows = [s for s in sources if all(c.shapes[i][a] == _size(c, s) for c in peers)]
            shape.append(_followed(op, follows, given, size, f"input {i}'s dimension {a}"))
        shapes.append(tuple(shape))
    low, high = base.int_range
    if any(not is_float(d) and d != "bool" for d in base.dtypes):
        follows = [s for s in sources if all(c.int_range[1] == _size(c, s) for c in peers)]
        high = _followed(op, follows, given, high, "the integer inputs' upper bound")
    first = "x".join(map(str, shapes[0]))
    name = f"{base.dtype}-{'n' if len(shapes[0]) == 1 else ''}{first}"  # as the cases name them
    fields = {k: getattr(base, k) for k in Case.__dataclass_fields__}
    fields.update(name=name, shapes=tuple(shapes), int_range=(low, high))
    return ScaledCase(**{**fields, "large": False, "gpu_only": False}, origin=base.name)


def _size(case: Case, source: tuple[int, int]) -> int:
    k, j = source
    return case.shapes[k][j]


def _followed(op: Op, follows: list, given: Shapes, size: int, what: str) -> int:
    """The new size of a dimension that equals the given dimensions ``follows``."""
    sizes = sorted({given[k][j] for k, j in follows})
    if not sizes:
        return size
    if len(sizes) == 1:
        return sizes[0]
    named = " and ".join(f"input {k}'s dimension {j}" for k, j in follows)
    raise PortkitError(
        f"op {op.name}: {what} equals {named} in every case, which --shape makes "
        f"different; give that input's shape too (--shape A,B,... one per input)"
    )
