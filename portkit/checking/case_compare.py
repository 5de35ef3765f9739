"""One case's tensors compared: the outputs or gradients an implementation produced
against the reference's (or a twin's), each by the rule that applies to it
(tensor_check.py), with what the comparison found gathered for the check row: the
problems, the notes a pass shows, each tensor's margin and, as data, the values that
differ (results.ValueMismatch). ``CaseRunner.compare_all`` calls it for its case."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from portkit.checking.contributions import Contributions
from portkit.checking.control import controlled
from portkit.checking.op_contract import gradient_positions
from portkit.checking.op_contract import label as contract_label
from portkit.checking.op_contract import tolerance as declared_or_default
from portkit.checking.reference_run import ControlRuns
from portkit.checking.tensor_check import Control, check_tensor, controls
from portkit.results import ValueMismatch

if TYPE_CHECKING:
    from portkit.project.cases import Case
    from portkit.project.discovery import Op


def compare_tensors(
    op: Op,
    case: Case,
    reproduce: str,
    control: Callable[[str], ControlRuns | None],
    kind: str,
    actual: Sequence,
    expected: Sequence,
    sides: tuple[str, str],
    counted: Contributions | None = None,
    notes: list[str] | None = None,
    margins: list[float] | None = None,
    differ: list[ValueMismatch] | None = None,
) -> list[str]:
    """Problems of ``actual`` (made by ``sides[0]``) against ``expected`` (by
    ``sides[1]``: "reference" or a twin's name); ``kind`` "output" or "grad".
    Against the reference, floats meet the measured control (checking/control.py;
    ``control(device)``: the case's control runs there, computed once by the caller);
    elements float atomics summed (``counted``) meet the summation-order bound
    (checking/order_bound.py); its passing verdicts and any declared tolerance used go
    to ``notes``, so that a pass shows them too; each tensor's margin to ``margins``,
    and what values differ, as data, to ``differ``."""
    grad = kind == "grad"
    if len(actual) != len(expected):
        what = "grads" if grad else "outputs"
        return [f"{len(actual)} {what} from {sides[0]}, {len(expected)} from {sides[1]}"]
    bounds = counted.of(kind) if counted is not None else ()
    notes = notes if notes is not None else []
    if counted is not None and counted.note and counted.note not in notes:
        notes.append(counted.note)
    positions = gradient_positions(op, case) if grad else range(len(actual))
    tensor_controls = _controls(op, control, grad, sides[1], actual)
    problems = []
    for index, (position, a, e) in enumerate(zip(positions, actual, expected)):
        label = contract_label(op, grad, position)
        if a is None or e is None:
            if (a is None) != (e is None):
                missing = sides[0] if a is None else sides[1]
                problems.append(
                    f"{label}: {missing} gives no gradient; declare the input with "
                    f"no_grad= if it carries none{reproduce}"
                )
            continue
        tolerance = declared_or_default(op, case, grad, position, sides[1], e.dtype)
        if tolerance.reason:
            notes.append(f"{label}: {tolerance.describe()}")
        bound = bounds[index] if index < len(bounds) else None
        own = tensor_controls[index] if index < len(tensor_controls) else None
        verdict = check_tensor(label, a, e, tolerance, bound, sides, reproduce, own)
        problems += verdict.problems
        notes += verdict.notes
        if differ is not None:
            differ += verdict.mismatches
        if margins is not None:
            margins.append(verdict.margin)
    return problems


def _controls(
    op: Op, control: Callable[[str], ControlRuns | None], grad: bool, against: str, actual: Sequence
) -> list[Control | None]:
    """The measured control of each tensor compared against the reference."""
    floats = [t for t in actual if t is not None and controlled(t.dtype)]
    if against != "reference" or not floats:  # nothing the control would bound
        return []
    devices = [t.device.type for t in floats]
    return controls(control(devices[0]), grad, op.definition.error_factor)
