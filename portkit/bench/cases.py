"""Which cases ``portkit bench`` times: the op's ``bench=`` cases, or else its largest.

A benchmark wants shapes that fill the GPU; the check cases are mostly edge sizes. An
op names its benchmark shapes beside its check cases (``bench=`` in ``@portkit.op``);
without them, the large and GPU-only cases (made large for that reason), or failing those the
case with the most elements."""

from __future__ import annotations

from collections.abc import Sequence

from portkit.errors import PortkitError
from portkit.project.cases import Case


def bench_cases(op, names: Sequence[str] = ()) -> list[Case]:
    definition = op.definition
    cases = list(definition.bench)
    if not cases:
        cases = [c for c in definition.cases if c.large or c.gpu_only]
    if not cases:
        cases = [max(definition.cases, key=lambda c: (c.numel, c.dtype == "float32"))]
    if names:
        known = {c.name: c for c in (*cases, *definition.cases)}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise PortkitError(
                f"op {op.name} has no case {unknown[0]!r}; bench cases: "
                f"{', '.join(c.name for c in cases)}"
            )
        cases = [known[n] for n in names]
    return cases
