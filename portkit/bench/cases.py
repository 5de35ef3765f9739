"""Which cases ``portkit bench`` times: a shape from the command line, the op's ``bench=``
cases, or else its large and GPU-only cases, or else its largest case scaled to fill
the GPU (``portkit.bench.scaling`` has the rule).

A benchmark wants shapes that fill the GPU; the check cases are mostly edge sizes (the
largest of a user's op is often 64x1000: a few us, launch latency rather than
bandwidth). An op names its benchmark shapes beside its check cases (``bench=`` in
``@portkit.op``); without them, the large and GPU-only cases (made large for that
reason), or failing those its largest case, its leading dimension grown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from portkit.bench.scaling import Shapes, at_shapes, at_size, gpu_sized
from portkit.errors import PortkitError
from portkit.project.cases import Case

if TYPE_CHECKING:
    from portkit.project.discovery import Op


@dataclass(frozen=True)
class Wanted:
    """What the command line asked for: case names, or one shape (``--shape`` /
    ``--size``, optionally ``--dtype``)."""

    names: Sequence[str] = ()
    shapes: Shapes = ()
    size: int | None = None
    dtype: str | None = None


def bench_cases(op: Op, names: Sequence[str] = (), wanted: Wanted | None = None) -> list[Case]:
    wanted = wanted or Wanted(names=names)
    if wanted.shapes:
        return [at_shapes(op, wanted.shapes, wanted.dtype)]
    if wanted.size is not None:
        return [at_size(op, wanted.size, wanted.dtype)]
    definition = op.definition
    cases = list(definition.bench)
    if not cases:
        cases = [c for c in definition.cases if c.large or c.gpu_only]
    if not cases:
        cases = [gpu_sized(op)]
    if wanted.names:
        known = {c.name: c for c in (*cases, *definition.cases)}
        unknown = [n for n in wanted.names if n not in known]
        if unknown:
            raise PortkitError(
                f"op {op.name} has no case {unknown[0]!r}; bench cases: "
                f"{', '.join(c.name for c in cases)}"
            )
        cases = [known[n] for n in wanted.names]
    return cases
