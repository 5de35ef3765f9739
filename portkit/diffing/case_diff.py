"""``portkit diff``: run the prototype and the twin on the same inputs through the same
host launcher, and say where, how much and why they disagree.

On a GPU the prototype is compiled by numba and the twin by NVRTC; the writer of each
reported element comes from re-running only the blocks concerned in the simulator
(``writers.ReplayedWriters``). Without a GPU the prototype runs in the simulator, and
every element's writer is read from the simulator's record (``writers.RecordedWriters``);
it is compared with the twin compiled for the CPU (``twin-cpu``) when a C++ compiler
is there, else with the PyTorch reference.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from portkit.checking.compare import (
    REFERENCE_TOLERANCE,
    TWIN_TOLERANCE,
    Tolerance,
    elementwise_errors,
)
from portkit.checking.contributions import counting_run, from_machine
from portkit.checking.control import ULPS
from portkit.checking.op_contract import differentiable, gradient_positions, label
from portkit.checking.op_contract import tolerance as declared_or_default
from portkit.checking.order_bound import OrderBound, bound_errors, compare_summed
from portkit.checking.reference_run import control_run, reference_run
from portkit.checking.tensor_check import Control, control_mismatches, controls
from portkit.diffing.model import CaseDiff, ElementDiff, Plan, Side, TensorDiff
from portkit.diffing.writers import (
    CapturingTarget,
    RecordedWriters,
    ReplayedWriters,
)
from portkit.errors import (
    PortkitError,
    ReferenceFailure,
    TwinCompileError,
    TwinSignatureError,
    describe,
    failure_site,
)
from portkit.launch.compose import compose_kernels
from portkit.launch.op_inputs import as_tuple
from portkit.project.cases import Case, grad_outputs_kept, make_grad_outputs, make_inputs
from portkit.torch_op.load import registered_callable

if TYPE_CHECKING:
    import torch

    from portkit.backends import Backend
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


MAPPED_MISMATCHES = 64  # mismatches whose writer is looked up for the pattern summary


def plan_diff(op: Op, config: ProjectConfig, simulate: bool = False) -> Plan:
    """numba's GPU build against the twin where both can run; without a GPU, the
    prototype in the simulator against the CPU twin; with ``simulate`` (or with neither
    twin) the prototype in the simulator against the reference."""
    from portkit.backends import create

    numba_gpu, twin = create("numba", config), create("twin", config)
    # An op without a twin file says so first: "no GPU" would hide that no GPU can help.
    missing = twin.unsupported_reason(op) or twin.unavailable_reason or numba_gpu.unavailable_reason
    if missing is None and not simulate:
        return Plan(numba_gpu, twin, TWIN_TOLERANCE)
    sim, reference = create("sim", config), create("torch", config)
    if sim.unavailable_reason:
        raise PortkitError(f"nothing to diff on this machine: {sim.unavailable_reason}")
    cpu_twin = create("twin-cpu", config)
    cpu_missing = cpu_twin.unavailable_reason or cpu_twin.unsupported_reason(op)
    if missing is not None and cpu_missing is None and not simulate:
        note = (
            f"no GPU twin here ({missing}): this is the CPU twin (twin-cpu: the .cu compiled "
            f"for this machine's CPU, threads run as fibers, sanitizers on), compared with "
            f"the prototype in portkit's simulator; a GPU can still differ (docs/twin-cpu.md)"
        )
        return Plan(sim, cpu_twin, TWIN_TOLERANCE, note)
    if missing is not None and cpu_missing is not None and not twin.unsupported_reason(op):
        missing = f"{missing}; twin-cpu: {cpu_missing}"
    if missing is None:
        note = "--sim: the prototype ran in portkit's simulator, compared with the reference"
    else:
        note = (
            f"the twin cannot run here ({missing}); the prototype ran in portkit's "
            f"simulator and is compared with the PyTorch reference instead"
        )
    return Plan(sim, reference, REFERENCE_TOLERANCE, note, twin_missing=missing or "")


def run_side(
    op: Op, case: Case, backend: Backend, inputs: list | None = None, backward: bool = True
) -> Side:
    """Forward (and backward) of ``op`` on ``case`` (or on ``inputs``); launches captured
    for replays."""
    import torch

    side = Side(backend)
    try:
        if inputs is None:
            inputs = make_inputs(case, backend.device)
        inputs = differentiable(op, case, inputs)
        if backend.role == "reference":  # half precision: float32, rounded (reference_run)
            wanted = backward and op.definition.has_backward
            side.outputs, side.grads = reference_run(op, case, inputs, wanted)
            return side
        else:
            kernels = compose_kernels(backend, op, checked=True, poison=True)
            side.machine = backend.machine  # declared: None unless simulated by portkit
            kernels = kernels.wrapped(lambda n, t: CapturingTarget(n, t, side.launches))
            # check's callable, so that diff and check run (and refuse) an op alike
            fn = registered_callable(op, kernels, backend.config.namespace, define_now=False)
            outputs = as_tuple(fn(*inputs, *case.extra))
        side.outputs = tuple(o.detach() for o in outputs)
        if backward and op.definition.has_backward:
            requiring_grad = [t for t in inputs if t.requires_grad]
            grads = torch.autograd.grad(
                outputs, requiring_grad, make_grad_outputs(case, outputs), allow_unused=True
            )
            side.grads = tuple(g.detach() if g is not None else None for g in grads)
        if backend.device == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # a kernel bug or launcher error: reported, not raised
        side.error, side.error_kind = describe(exc, op.prototype_path), failure_kind(exc, backend)
        side.error_site = failure_site(exc, op.prototype_path)
    return side


def failure_kind(exc: Exception, backend: Backend) -> str:
    """What failed, in a few words, for the verdict's count of cases that could not run."""
    if isinstance(exc, ReferenceFailure):
        return "the reference failed"
    if isinstance(exc, (TwinCompileError, TwinSignatureError)):
        return f"{backend.role} compile error"
    return f"{backend.name} raised"


@grad_outputs_kept()  # both sides and the reference's controls seed one draw
def diff_case(op: Op, case: Case, plan: Plan, shown: int = 5, replay: bool = False) -> CaseDiff:
    """``replay``: find writers by re-running blocks even when the whole prototype ran in
    the simulator (what a GPU run does; tests use it to check the search)."""
    from portkit.diffing.patterns import describe_patterns

    t0 = time.perf_counter()
    result = CaseDiff(case, plan.prototype.name, plan.other.name)
    for backend in (plan.prototype, plan.other):
        if backend.name in plan.unbuilt:  # its compiler's error was shown with a case before
            result.error, result.error_kind = plan.unbuilt[backend.name]
            return result
    prototype = run_side(op, case, plan.prototype)
    other = run_side(op, case, plan.other)
    for side in (prototype, other):
        if side.error:
            result.error = f"{side.backend.name}: {side.error}"
            result.error_kind, result.error_site = side.error_kind, side.error_site
            if side.error_kind.endswith("compile error"):
                plan.unbuilt[side.backend.name] = (result.error, result.error_kind)
            result.seconds = time.perf_counter() - t0
            return result
    result.launches = prototype.launches
    if prototype.machine is not None and not replay:
        writers: Any = RecordedWriters(prototype.machine.records)
    else:
        writers = ReplayedWriters(prototype.launches, op.kernels)
    inputs = make_inputs(case, "cpu")
    if prototype.machine is not None:  # float atomic sums: order_bound.py
        counted = from_machine(prototype.machine, prototype.outputs, prototype.grads)
    else:
        counted = counting_run(op, case, plan.prototype.config)
    pairs = [
        (False, i, p, o, counted.outputs[i] if i < len(counted.outputs) else None)
        for i, (p, o) in enumerate(zip(prototype.outputs, other.outputs))
    ]
    pairs += [
        (True, position, p, o, counted.grads[i] if i < len(counted.grads) else None)
        for i, (position, p, o) in enumerate(
            zip(gradient_positions(op, case), prototype.grads, other.grads)
        )
        if p is not None and o is not None
    ]
    against = "reference" if plan.other.role == "reference" else plan.other.name
    controls_of = reference_controls(op, case) if against == "reference" else {}
    grad_index = 0
    for grad, position, p, o, bound in pairs:
        name = label(op, grad, position)
        tolerance = declared_or_default(op, case, grad, position, against, o.dtype)
        found = controls_of.get(grad, [])
        index = grad_index if grad else position
        grad_index += grad
        control = found[index] if index < len(found) else None
        tensor = compare_tensors(name, p, o, tolerance, writers, shown, bound, control)
        if not tensor.order_note and counted.note:
            tensor.order_note = counted.note
        tensor.patterns = describe_patterns(tensor, inputs)
        if tensor.mismatches and name.startswith("output"):
            layout = swapped_layout(op, case, plan, int(name.split()[-1]), tensor)
            if layout:
                tensor.patterns.insert(0, layout)
        result.tensors.append(tensor)
    result.blocks_simulated = getattr(writers, "blocks_run", 0)
    result.seconds = time.perf_counter() - t0
    return result


def reference_controls(op: Op, case: Case) -> dict[bool, list[Control | None]]:
    """The measured control of each output (False) and gradient (True) against the
    reference, as `portkit check` makes it (checking/control.py); empty where the
    reference cannot run in float64 (the dtype table applies, as in check)."""
    inputs = differentiable(op, case, make_inputs(case, "cpu"))
    try:
        runs = control_run(op, case, inputs, op.definition.has_backward)
    except Exception:  # e.g. a reference op without a float64 kernel: check falls back too
        return {}
    factors = op.definition.error_factor
    return {grad: controls(runs, grad, factors) for grad in (False, True)}


def compare_tensors(
    name: str,
    prototype: torch.Tensor,
    other: torch.Tensor,
    tolerance: Tolerance,
    writers: Any,
    shown: int,
    bound: OrderBound | None = None,
    control: Control | None = None,
) -> TensorDiff:
    """Every figure of one pair: errors, mismatch count, NaN/Inf disagreements, the first
    mismatches and a spread sample of them with the thread that wrote each. Elements
    float atomics summed (``bound``) are mismatches only outside the summation-order
    bound. Against the reference (``control`` given), a float narrower than float64 with
    no declared tolerance mismatches where `portkit check` would call it wrong: outside
    the measured control (checking/tensor_check.py ``control_mismatches``)."""
    import torch

    if prototype.shape != other.shape or prototype.dtype != other.dtype:
        raise PortkitError(
            f"{name}: prototype gives {tuple(prototype.shape)} {prototype.dtype}, the other "
            f"side {tuple(other.shape)} {other.dtype}"
        )
    p, o = prototype.detach(), other.detach()
    errors = elementwise_errors(p, o, tolerance)
    bad, finite, diff, rel, ulps = errors.bad, errors.finite, errors.abs, errors.rel, errors.ulps
    order_note, rule, allowed = "", "", None
    judged = control_mismatches(p, o, tolerance, bound, control)
    if judged is not None and control is not None:
        bad, allowed = judged[0].to(bad.device), judged[1]
        rule = control_rule(control, p.dtype)
        if bound is not None:
            order_note = compare_summed(
                name, p, control.wide, tolerance, bound, allowed=allowed, formula=rule
            )[1].report()
    elif bound is not None:
        summed = (bound.count > 0).to(bad.device)
        bad = torch.where(summed, bound_errors(p, o, tolerance, bound).bad.to(bad.device), bad)
        order_note = compare_summed(name, p, o, tolerance, bound)[1].report()
    nan = torch.isnan(p) != torch.isnan(o)
    inf = (torch.isinf(p) | torch.isinf(o)) & (p != o) & ~nan
    count = int(bad.sum())
    flat_bad = bad.reshape(-1).nonzero().reshape(-1)
    first = flat_bad[:shown].tolist()
    sample = _spread(flat_bad, MAPPED_MISMATCHES)
    p_cpu, o_cpu, bad_cpu = p.cpu(), o.cpu(), bad.cpu()

    import numpy as np

    def element(position: int) -> ElementDiff:
        index = tuple(int(i) for i in np.unravel_index(position, tuple(p.shape)))
        return ElementDiff(
            index,
            position,
            float(p_cpu.reshape(-1)[position]),
            float(o_cpu.reshape(-1)[position]),
            writers.writer(prototype, position),
        )

    mapped = {pos: element(pos) for pos in dict.fromkeys(first + sample)}
    return TensorDiff(
        name=name,
        shape=tuple(p.shape),
        dtype=str(p.dtype).removeprefix("torch."),
        tolerance=tolerance,
        total=p.numel(),
        mismatches=count,
        max_abs=float(diff.max()) if p.numel() else 0.0,
        max_rel=float(rel[finite].max()) if bool(finite.any()) else 0.0,
        max_ulp=int(ulps.max()) if p.numel() else 0,
        nan_disagreements=int(nan.sum()),
        inf_disagreements=int(inf.sum()),
        first=[mapped[pos] for pos in first],
        mapped=[mapped[pos] for pos in sample],
        patterns=[],
        prototype_values=p_cpu,
        other_values=o_cpu,
        bad=bad_cpu,
        order_note=order_note,
        rule=rule,
        allowed=None if allowed is None else allowed.cpu(),
        exact=None if control is None or not rule else control.wide.cpu(),
    )


def control_rule(control: Control, dtype: torch.dtype) -> str:
    """The measured control's bound, in words, as check's rows state it."""
    return (
        f"{control.factor:g}x torch's {str(control.low_dtype).removeprefix('torch.')} error "
        f"against float64 + {ULPS} ULP of {str(dtype).removeprefix('torch.')}, the measured "
        f"control of portkit check"
    )


def _spread(positions: torch.Tensor, count: int) -> list[int]:
    """Up to ``count`` positions: the first and last ones and evenly spaced ones between."""
    import torch

    n = positions.numel()
    if n <= count:
        return positions.tolist()
    picks = torch.linspace(0, n - 1, count).round().long().unique()
    return positions[picks.to(positions.device)].tolist()


def debug_mismatch(op: Op, diff: CaseDiff, stdin: Any = None, stdout: Any = None) -> str:
    """Re-run only the block that wrote the first mismatch (of the first tensor that has
    one) in the simulator, stopping in pdb at its thread before the write. Returns what
    was debugged, or raises when no mismatch has a known writer."""
    from portkit.diffing.writers import host_arguments
    from portkit.simt.debug import Breakpoint
    from portkit.simt.machine import Machine
    from portkit.simt.records import linear_index

    target = next(((t, e) for t in diff.tensors for e in t.first if e.writer is not None), None)
    if target is None:
        raise PortkitError("no mismatch with a known writer to debug")
    tensor, element = target
    writer = element.writer
    assert writer is not None  # the target was chosen for having one
    launch = diff.launches[writer.launch]
    index = ", ".join(map(str, element.index))
    message = (
        f"{tensor.name}[{index}] differs: prototype {element.prototype!r}, "
        f"{diff.other} {element.other!r}; stopping at the line that writes it "
        f"({writer.file}:{writer.line}) -- it may be reached more than once"
    )
    block = linear_index(writer.block, launch.config.grid)
    machine = Machine(
        Breakpoint(
            writer.kernel,
            writer.block,
            writer.thread,
            stdin,
            stdout,
            (writer.file, writer.line),
            message,
        )
    )
    machine.launch(
        writer.kernel,
        op.kernels[writer.kernel],
        launch.config,
        host_arguments(launch),
        blocks=[block],
    )
    return f"{writer.kernel} block {writer.block} thread {writer.thread}"


def swapped_layout(op: Op, case: Case, plan: Plan, output: int, tensor: TensorDiff) -> str | None:
    """For 2-D ops: does the other side equal the prototype with rows and columns swapped
    in how memory is read or written (row-major data treated as column-major)? Answered
    by running the prototype again on the inputs laid out column-major."""
    import torch

    if len(tensor.shape) != 2:
        return None
    rows, cols = tensor.shape
    other, prototype = tensor.other_values, tensor.prototype_values

    def matches(a: torch.Tensor, b: torch.Tensor) -> bool:
        tol = tensor.tolerance
        return bool(torch.isclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=True).all())

    def column_major(t: torch.Tensor) -> torch.Tensor:
        """The (rows, cols) matrix whose [r, c] sits at flat c * rows + r of ``t``."""
        return t.reshape(cols, rows).T

    if matches(column_major(other), prototype):
        return (
            "the other side writes element [row, col] at flat col * rows + row: rows "
            "and columns swapped in the output's indexing"
        )
    inputs = make_inputs(case, plan.prototype.device)
    if not all(t.shape == (rows, cols) for t in inputs):
        return None
    swapped = [column_major(t.reshape(-1)).contiguous() for t in inputs]
    rerun = run_side(op, case, plan.prototype, swapped, backward=False)
    if rerun.error or len(rerun.outputs) <= output:
        return None
    expected = rerun.outputs[output].cpu()
    if matches(column_major(other), expected):
        return (
            "the other side reads and writes element [row, col] at flat col * rows + "
            "row: it treats the row-major tensors as column-major (rows and columns "
            "swapped)"
        )
    if matches(other, expected):
        return (
            "the other side reads element [row, col] at flat col * rows + row: rows "
            "and columns swapped in the inputs' indexing"
        )
    return None
