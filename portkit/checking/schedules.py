"""The ``sim`` backend's second run of a case in the other schedule (simt/schedule.py),
for ops whose float atomics sum into an output: a GPU promises no order, so the check
shows whether the two orders give the same bits, and holds the other order's result to
the same summation-order bound against the reference (checking/order_bound.py). Only
outputs the simulator counted float atomic sums into are compared; other ops never pay
for the second run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from portkit.checking.compare import identical
from portkit.checking.contributions import Contributions
from portkit.checking.op_contract import label as contract_label
from portkit.checking.op_contract import tolerance as declared_or_default
from portkit.checking.order_bound import OrderBound, compare_bounded, order_term
from portkit.errors import describe, failure_site
from portkit.results import FailureSite, ValueMismatch
from portkit.simt.schedule import FORWARD, REVERSED

if TYPE_CHECKING:
    import torch

    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


def other_schedule(
    op: Op,
    case: Case,
    config: ProjectConfig,
    ran: str,
    inputs: Sequence[torch.Tensor],
    outputs: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    counted: Contributions,
    notes: list[str],
    reproduce: str = "",
    differ: list[ValueMismatch] | None = None,
    sites: list[FailureSite] | None = None,
) -> list[str]:
    """Problems of the forward run of ``op`` on ``inputs`` in the schedule other than
    ``ran``; per output float atomics sum into, whether the two agree goes to ``notes``,
    the values that differ from the reference to ``differ``, and where a fault in that
    schedule happened to ``sites``."""
    if not any(bound is not None for bound in counted.outputs):
        return []
    other = FORWARD if ran == REVERSED else REVERSED
    try:
        again = _run(op, case, config, other, inputs)
    except Exception as exc:  # a kernel fault in this order only: the op's bug
        site = failure_site(exc)
        if sites is not None and site is not None:
            sites.append(site)
        return [f"the {other} schedule: {describe(exc)}{reproduce}"]
    problems: list[str] = []
    for position, (first, second, reference, bound) in enumerate(
        zip(outputs, again, expected, counted.outputs)
    ):
        if bound is None:
            continue
        label = contract_label(op, False, position)
        notes.append(f"{label}: {_agreement(first.detach(), second, bound, other)}")
        tolerance = declared_or_default(op, case, False, position, "reference", reference.dtype)
        what = f"{label} in the {other} schedule"
        sides = (f"sim ({other})", "reference")
        found, _, values = compare_bounded(
            what, second, reference, tolerance, bound, sides, reproduce
        )
        problems += found
        if differ is not None:
            differ += values
    return problems


def _run(
    op: Op, case: Case, config: ProjectConfig, schedule: str, inputs: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    import torch

    from portkit.backends.sim import PortkitSimulator
    from portkit.launch.compose import compose_kernels
    from portkit.launch.op_inputs import as_tuple
    from portkit.torch_op.load import registered_callable

    sim = PortkitSimulator(config)
    sim.schedule = schedule
    kernels = compose_kernels(sim, op, poison=True)
    fn = registered_callable(op, kernels, config.namespace, define_now=False)
    with torch.no_grad():
        outputs = fn(*[t.detach() for t in inputs], *case.extra)
    return tuple(o.detach() for o in as_tuple(outputs))


def _agreement(first: torch.Tensor, second: torch.Tensor, bound: OrderBound, other: str) -> str:
    """Whether two schedules' results agree, and if not by how much against how far two
    summation orders can land apart (``2 * gamma_n * S``, its largest over the tensor)."""
    import torch

    if identical(first, second):
        return f"the {other} schedule gives the same bits"
    a, b = first.cpu().to(torch.float64), second.cpu().to(torch.float64)
    finite = torch.isfinite(a) & torch.isfinite(b)
    differs = float(torch.where(finite, (a - b).abs(), 0.0).max())
    most = float(order_term(bound, first.dtype).max())
    return (
        f"order-dependent: the {other} schedule differs by up to {differs:.1e} (bound {most:.1e})"
    )
