"""Tolerances an author declares for an op: ``portkit.Tolerance(rtol, atol, reason=...)``.

The dtype table in ``checking/compare.py`` is the default for every comparison. A declared
tolerance replaces it where its selectors match: one output or one input's gradient, one
case, one side (``against="reference"``: an implementation against the PyTorch
reference; ``"twin"``: prototype against twin), one dtype. Every declaration carries the
reason it is needed, and every report that uses it shows that reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from portkit.errors import OpDefinitionError
from portkit.project.dtypes import DTYPES

AGAINST = ("reference", "twin")


@dataclass(frozen=True)
class Tolerance:
    """``rtol``/``atol`` for the comparisons the selectors pick (None: any).

    output: with ``grad=False``, the forward output's index; with ``grad=True``, the
            input (position, or the forward's parameter name) whose gradient it is.
    grad:   the tolerance is for gradients (backward and the gradients of prototype
            against twin), not forward outputs.
    """

    rtol: float
    atol: float
    reason: str = ""
    output: int | str | None = None
    grad: bool = False
    case: str | None = None
    against: str | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        where = f"portkit.Tolerance(rtol={self.rtol!r}, atol={self.atol!r})"
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise OpDefinitionError(
                f'{where} needs reason="...": say why the dtype table\'s default is too '
                f"tight for this op (it is shown in every report that uses it)"
            )
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)  # NaN would compare as "no bound"; inf passes all
                or value < 0
            ):
                raise OpDefinitionError(
                    f"{where}: {name} must be a number >= 0 and finite, got {value!r}"
                )
        if self.against not in (None, *AGAINST):
            raise OpDefinitionError(
                f"{where}: against is 'reference' or 'twin', got {self.against!r}"
            )
        if self.dtype is not None and self.dtype not in DTYPES:
            raise OpDefinitionError(f"{where}: dtype {self.dtype!r} is not one of {DTYPES}")
        if isinstance(self.output, bool) or not isinstance(self.output, (int, str, type(None))):
            raise OpDefinitionError(f"{where}: output is an index or an input's name")
        if isinstance(self.output, int) and self.output < 0:
            raise OpDefinitionError(f"{where}: output index must be >= 0, got {self.output}")
        if isinstance(self.output, str) and not self.grad:
            raise OpDefinitionError(
                f"{where}: output={self.output!r} names an input; outputs are numbered "
                f"(output=0), inputs' gradients are named with grad=True"
            )

    @property
    def specificity(self) -> int:
        """How many selectors are set: the most specific matching declaration wins."""
        return sum(s is not None for s in (self.output, self.case, self.against, self.dtype))

    def describe(self) -> str:
        return f"rtol={self.rtol:g}, atol={self.atol:g}, declared: {self.reason}"


def pick_tolerance(
    declared: tuple[Tolerance, ...],
    *,
    case: str,
    against: str,
    grad: bool,
    position: int,
    name: str | None,
    dtype: str,
) -> Tolerance | None:
    """The declaration for one comparison (the most specific; the later on a tie), or
    None for the dtype table's default. ``position``: the output's index, or for a
    gradient the input's position; ``name``: that input's parameter name, if known."""
    best: Tolerance | None = None
    for t in declared:
        if t.grad != grad or t.case not in (None, case) or t.against not in (None, against):
            continue
        if t.dtype not in (None, dtype):
            continue
        if t.output is not None and t.output != position and t.output != name:
            continue
        if best is None or t.specificity >= best.specificity:
            best = t
    return best
