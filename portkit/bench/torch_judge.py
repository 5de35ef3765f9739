"""Timed outputs judged as `portkit check` judges them, by the measured control.

A kernel row (the twin, the prototype) is judged exactly as check judges it against the
reference (``kernel_problem``): the control where it applies, the declared tolerance or
the dtype table elsewhere. A torch row (below) is re-judged by the control where it
misses the op's tolerance.

An op's declared tolerances (``portkit.Tolerance``) describe its *kernels*: rmsnorm's
float32 weight gradient, for one, allowed the kernels' float64 partial sums against a
reference that sums in float32 (until 2026-11-27, when the measured control was found to
cover it: docs/seeds.md). A torch implementation timed beside the twin (the op's
``baseline=``, ``torch.compile`` of the reference) is another torch sum in the same
precision as the reference, so its distance to the reference is up to twice torch's own
error, and a kernels' tolerance can refuse a correct one: on an H200 (2026-11-27)
``F.rms_norm``'s float32 weight gradient at 16384x4096 differed from the reference's by
2.4e-4 in 2 of 4096 columns, beyond rmsnorm's then declared 2e-4.

So where such a row misses the tolerance, it is judged again by the measured control
(checking/control.py): against the reference run in float64, within ``error_factor``
times the error of the reference itself in the kernels' precision. The float64 run is
made once per case. An output the control cannot bound (float64, integers, a
reference that cannot run in float64) keeps the first verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from portkit.checking.compare import REFERENCE_TOLERANCE, Tolerance, tolerance_for
from portkit.checking.reference_run import ControlRuns, control_run
from portkit.checking.tensor_check import check_tensor, controls

if TYPE_CHECKING:
    from portkit.project.cases import Case
    from portkit.project.discovery import Op


class TorchJudge:
    """Re-judges a torch row's outputs of one case by the measured control."""

    def __init__(self, op: Op, case: Case, leaves: Sequence[Any], backward: bool) -> None:
        self.op, self.case, self.leaves, self.backward = op, case, leaves, backward
        self._runs: ControlRuns | None = None
        self._tried = False

    def runs(self) -> ControlRuns | None:
        """The reference in float64 and in the kernels' precision, made on first use."""
        if not self._tried:
            self._tried = True
            try:
                self._runs = control_run(self.op, self.case, self.leaves, self.backward)
            except Exception:  # a reference without float64 kernels: the first verdict stands
                self._runs = None
        return self._runs

    def problem(
        self,
        direction: str,
        actual: Sequence[Any],
        expected: Sequence[Any],
        tolerances: Sequence[Tolerance | None],
        who: str,
    ) -> str | None:
        """None if every output of ``actual`` that misses its tolerance is within the
        control; else why not; "" where the control cannot judge one (keep the verdict the
        tolerance gave)."""
        runs = self.runs()
        if runs is None:
            return ""
        grad = direction == "backward"
        bounds = controls(runs, grad, self.op.definition.error_factor)
        for index, (a, e) in enumerate(zip(actual, expected)):
            tolerance = tolerances[index] if index < len(tolerances) else None
            if a is None or e is None or tolerance is None or _close(a, e, tolerance):
                continue
            control = bounds[index] if index < len(bounds) else None
            if control is None:
                return ""
            verdict = check_tensor(
                f"{direction} output {index}",
                a,
                e,
                tolerance_for(REFERENCE_TOLERANCE, e.dtype),
                None,
                (who, "reference"),
                "",
                control,
            )
            if verdict.problems:
                return "; ".join(verdict.problems)
        return None

    def kernel_problem(
        self,
        direction: str,
        actual: Sequence[Any],
        expected: Sequence[Any],
        tolerances: Sequence[Tolerance | None],
        who: str,
    ) -> str | None:
        """None if a kernel row's outputs (the twin's, the prototype's) pass as `portkit
        check` judges them against the reference: the measured control where it applies
        (a float narrower than float64, no declared tolerance), else the declared
        tolerance or the dtype table; else why not. The same rule as check's
        (checking/tensor_check.py ``check_tensor``), so that bench never fails a twin that
        check passes, nor passes one it fails. Timed cases are large ones, whose float
        atomic sums check does not count either (authoring.md, "Float atomics")."""
        runs = self.runs()
        grad = direction == "backward"
        bounds = controls(runs, grad, self.op.definition.error_factor)
        problems = []
        for index, (a, e) in enumerate(zip(actual, expected)):
            tolerance = tolerances[index] if index < len(tolerances) else None
            if a is None or e is None or tolerance is None:
                continue
            verdict = check_tensor(
                f"{direction} output {index}",
                a,
                e,
                tolerance,
                None,
                (who, "reference"),
                "",
                bounds[index] if index < len(bounds) else None,
            )
            problems += verdict.problems
        return "; ".join(problems) or None


def _close(actual: Any, expected: Any, tolerance: Tolerance) -> bool:
    import torch

    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    return bool(
        torch.isclose(
            actual, expected, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True
        ).all()
    )
