"""Which case a one-case command (``portkit sim``, ``portkit diff --size``) runs: a named
case, or the op's largest ordinary case that the simulator runs quickly, reshaped and
reseeded as asked."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from portkit.errors import PortkitError
from portkit.project.cases import Case

if TYPE_CHECKING:
    from portkit.project.discovery import Op

# Biggest default case: a few thousand simulated threads keep `portkit sim` near a second.
DEFAULT_MAX_ELEMENTS = 4096


def choose_case(
    op: Op,
    case_name: str | None,
    dtype: str,
    shape: tuple[int, ...] | None,
    seed: int | None,
) -> Case:
    """The named case, or the op's largest ordinary case of ``dtype`` that the simulator
    runs quickly, reshaped and reseeded as asked."""
    if not case_name and dtype not in op.definition.dtypes:
        raise PortkitError(
            f"op {op.name} does not accept {dtype}; it takes {', '.join(op.definition.dtypes)}"
        )
    if case_name:
        case = op.case(case_name)
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
    if case.dtype != dtype and not case_name:
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
