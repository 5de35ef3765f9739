"""The calls a benchmark times, one per implementation and direction, and how each call's
output is judged.

torch's eager reference is called as the op's author wrote it; ``torch.compile`` of that
reference (``CompiledReference``) is timed beside it, as the speed a user gets from torch
without writing a kernel, and so is the op's ``baseline=`` (``Baseline``: the fastest
torch call a user would make instead, a fused function or a library kernel, checked
like the reference, its backward by its own autograd); the prototype and the twin run
the op's forward and backward with their kernels wrapped so that the clock marks the
first launch and the last.
Integer and bool inputs (a class index, a mask) never require gradients: the backward
is timed and checked for the floating-point inputs alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portkit.bench.model import BASELINE, COMPILED
from portkit.bench.timing import SPIN, Clock, LaunchSpan
from portkit.checking.compare import Tolerance, compare
from portkit.checking.op_contract import tolerance
from portkit.errors import describe
from portkit.launch.compose import compose_kernels
from portkit.launch.op_inputs import as_tuple
from portkit.results import Outcome

if TYPE_CHECKING:
    from portkit.project.cases import Case
    from portkit.project.discovery import Op

COMPILE = "torch.compile"  # the implementation's name in tables, JSON and --impl
MAX_DETAIL = 300  # characters of an exception kept in a row (torch.compile's run to pages)


@dataclass
class Task:
    """One implementation's call for one case and direction."""

    implementation: str
    role: str
    call: Callable[[], tuple]
    span: LaunchSpan | None  # None: marks around the whole call (torch)
    status: Outcome = Outcome.PASS
    detail: str = ""
    timing: str = SPIN  # EVENTS once no spin covered the host's time to issue a call

    @property
    def live(self) -> bool:
        return self.status is Outcome.PASS

    def fail(self, status: Outcome, detail: str) -> None:
        self.status, self.detail = status, detail

    def raised(self, exc: Exception) -> None:
        self.fail(Outcome.ERROR, error_detail(self.role, exc))


def error_detail(role: str, exc: Exception) -> str:
    """One line for an exception; torch.compile's row says that compiling failed."""
    text = (describe(exc).strip().splitlines() or [type(exc).__name__])[0][:MAX_DETAIL]
    return f"{COMPILE} failed: {text}" if role == COMPILED else text


class CompiledReference:
    """``torch.compile`` of the op's reference, as an implementation beside torch eager.
    ``compiler`` is the seam the CPU tests use (a fake that fails to compile)."""

    name = COMPILE
    role = COMPILED
    unavailable_reason = None

    def __init__(self, compiler: Callable[[Callable], Callable] | None = None) -> None:
        self._compiler = compiler
        self._compiled: dict[str, Callable] = {}

    def function(self, op: Op) -> Callable:
        """The compiled reference (compiled once per op; torch compiles at first call, and
        again for each new shape). ``dynamic=False``: a bench times one shape a case, as a
        user compiling for it would get it. By default dynamo recompiles the second shape
        it sees with symbolic sizes, whose kernels were slower: softmax 1024x32768
        backward 180 us that way, 101 us compiled for its shape; 32768x256 forward 71
        against 21 (one H200, 2026-11-28): not torch's best."""
        if op.name not in self._compiled:
            compiler = self._compiler
            if compiler is None:
                compiler = compile_for_each_shape
            self._compiled[op.name] = compiler(op.definition.reference)
        return self._compiled[op.name]


RECOMPILE_LIMIT = 256  # compiled shapes (and grad modes) a function keeps: every bench case


def compile_for_each_shape(function: Callable) -> Callable:
    """``torch.compile(function, dynamic=False)``, compiled again for every shape it
    meets, and an error rather than eager where it cannot be. Dynamo keeps 8 compiled
    entries a function; a ninth (softmax's fifth bench shape: each shape once with grad
    and once without) fell back to eager with only a warning, and eager was timed as
    torch.compile (softmax 8192x8192 forward 279 us, 46 % of copy bandwidth; one H200,
    2026-11-28). The limit is raised for this process, and a limit hit raises. Donated
    buffers are off (a timed backward is repeated on one graph)."""
    import torch

    from portkit.runtime.torch_private import dynamo_config

    _keep_saved_buffers()

    config = dynamo_config()
    config.recompile_limit = max(config.recompile_limit, RECOMPILE_LIMIT)
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True
    return torch.compile(function, dynamic=False)


class Baseline:
    """The op's ``baseline=`` as an implementation beside torch eager; an op that
    declares none gets a skipped row saying so."""

    name = BASELINE
    role = BASELINE
    unavailable_reason = None

    def function(self, op: Op) -> Callable:
        baseline = op.definition.baseline
        assert baseline is not None  # build_tasks skips an op without one
        return baseline


NO_BASELINE = "the op declares no baseline= (the torch call a user would make instead)"


def _keep_saved_buffers() -> None:
    """The bench times a backward by repeating it on one graph (``retain_graph``), which
    AOTAutograd's donated buffers refuse ("compiled with non-empty donated buffers which
    requires ... retain_graph=False": layernorm's and rmsnorm's compiled backwards on an
    H100, 2026-11-24). Off for the process that benches, where this torch has the switch."""
    from portkit.runtime.torch_private import functorch_config

    config = functorch_config()
    if hasattr(config, "donated_buffer"):
        config.donated_buffer = False


def verify(
    actual: Sequence[Any],
    expected: Sequence[Any],
    tolerances: Sequence[Tolerance | None],
    what: str,
) -> str | None:
    """None if every output matches the reference within its tolerance (``tolerances``,
    one per output: the op's declared ones, else the dtype table's, as `portkit check`
    compares); else why not."""
    import torch

    problem = structural_problem(actual, expected, what)
    if problem:
        return problem
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            continue
        tolerance = tolerances[i]
        assert tolerance is not None  # None only where the reference has no output
        close = torch.isclose(a, e, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)
        if not bool(close.all()):
            mismatch = compare(f"{what} {i}", a, e, tolerance)
            return mismatch.report() if mismatch else f"{what} {i} differs"
    return None


def structural_problem(actual: Sequence[Any], expected: Sequence[Any], what: str) -> str | None:
    """Why ``actual`` cannot be compared with ``expected`` value by value (a count, shape
    or dtype that differs, an output missing), or None."""
    if len(actual) != len(expected):
        return f"{what}: {len(actual)} outputs, the reference has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            continue
        if a is None or tuple(a.shape) != tuple(e.shape) or a.dtype != e.dtype:
            got = "nothing" if a is None else f"{tuple(a.shape)} {a.dtype}"
            return f"{what} {i}: got {got}, the reference has {tuple(e.shape)} {e.dtype}"
    return None


def tolerances_of(
    op: Op, case: Case, direction: str, expected: Sequence[Any]
) -> list[Tolerance | None]:
    """One tolerance per expected output of ``direction``: what `portkit check` allows
    an implementation against the reference (declared, else by dtype)."""
    grad = direction == "backward"
    return [
        None if e is None else tolerance(op, case, grad, i, "reference", e.dtype)
        for i, e in enumerate(expected)
    ]


@dataclass
class Arguments:
    """What every implementation's call of one case takes."""

    inputs: list  # the case's tensors, none requiring grad
    extra: tuple  # the case's non-tensor arguments
    leaves: list  # fresh copies; the floating-point ones require grad for a backward
    graph_out: tuple  # torch eager's forward on ``leaves`` (backward only)
    grad_outputs: list  # seeded upstream gradients (backward only)

    @property
    def wanted(self) -> list:
        return [t for t in self.leaves if t.requires_grad]


def build_tasks(
    op: Op, direction: str, backends: Sequence[Any], clock: Clock, args: Arguments
) -> tuple[list[Task], tuple[Any, ...] | None, list[tuple[Any, str]]]:
    """(tasks, what the kernels' forward saved (for the backward's bytes), skipped)."""
    tasks: list[Task] = []
    skipped: list[tuple[Any, str]] = []
    saved_for_bytes = None
    for backend in backends:
        if backend.role == "reference":
            tasks.append(_torch_task(op, backend, direction, args))
            continue
        if backend.role == BASELINE and op.definition.baseline is None:
            skipped.append((backend, NO_BASELINE))
            continue
        if backend.role in (COMPILED, BASELINE):
            tasks.append(_function_task(op, backend, direction, args))
            continue
        reason = backend.unavailable_reason or backend.unsupported_reason(op)
        if reason:
            skipped.append((backend, reason))
            continue
        task, saved = _kernel_task(op, backend, direction, clock, args)
        saved_for_bytes = saved if saved is not None else saved_for_bytes
        tasks.append(task)
    return tasks, saved_for_bytes, skipped


def _torch_task(op: Op, backend: Any, direction: str, args: Arguments) -> Task:
    call = _reference_call(op.definition.reference, direction, args, args.graph_out)
    return Task(backend.name, backend.role, call, None)


def _function_task(
    op: Op, backend: CompiledReference | Baseline, direction: str, args: Arguments
) -> Task:
    """torch.compile's reference or the baseline: a torch function of the reference's
    signature, its backward through its own graph on fresh leaves."""
    try:
        function = backend.function(op)
        graph_out = ()
        if direction == "backward":
            leaves = make_leaves(args.inputs, True)
            graph_out = as_tuple(function(*leaves, *args.extra))
            args = Arguments(args.inputs, args.extra, leaves, graph_out, args.grad_outputs)
    except Exception as exc:
        task = Task(backend.name, backend.role, tuple, None)
        task.raised(exc)
        return task
    call = _reference_call(function, direction, args, graph_out)
    return Task(backend.name, backend.role, call, None)


def _reference_call(
    function: Callable[..., Any], direction: str, args: Arguments, graph_out: tuple[Any, ...]
) -> Callable[[], tuple[Any, ...]]:
    import torch

    if direction == "forward":

        def forward() -> tuple[Any, ...]:
            with torch.no_grad():
                return as_tuple(function(*args.inputs, *args.extra))

        return forward
    wanted = args.wanted

    def backward() -> tuple[Any, ...]:
        grads = torch.autograd.grad(
            graph_out, wanted, args.grad_outputs, retain_graph=True, allow_unused=True
        )
        return tuple(grads)

    return backward


def _kernel_task(
    op: Op, backend: Any, direction: str, clock: Clock, args: Arguments
) -> tuple[Task, tuple[Any, ...] | None]:
    """The prototype's or twin's call, and (backward) what its forward saved."""
    definition = op.definition
    span = LaunchSpan(clock)
    try:
        kernels = span.wrap(compose_kernels(backend, op, poison=True))
    except Exception as exc:  # a twin that does not compile, say
        task = Task(backend.name, backend.role, tuple, None)
        task.raised(exc)
        return task, None
    inputs, extra = args.inputs, args.extra
    if direction == "forward":

        def forward() -> tuple[Any, ...]:
            return as_tuple(definition.forward(kernels, *inputs, *extra)[0])

        return Task(backend.name, backend.role, forward, span), None
    try:
        saved = as_tuple(definition.forward(kernels, *inputs, *extra)[1])
    except Exception as exc:
        task = Task(backend.name, backend.role, tuple, span)
        task.raised(exc)
        return task, None
    grad_outputs, leaves = args.grad_outputs, args.leaves
    backward_of = definition.backward
    assert backward_of is not None  # a backward task is built only for an op with one

    def backward() -> tuple[Any, ...]:
        grads = as_tuple(backward_of(kernels, saved, *grad_outputs))
        return _of_differentiable(grads, leaves)

    return Task(backend.name, backend.role, backward, span), saved


def native_results(op: Op, args: Arguments, needs_grad: bool) -> dict | None:
    """torch's own outputs and gradients in the case's dtype, for ops that declare a
    wider reference (``reference_in``): torch's float32 row is then an implementation
    with rounding of its own (cuBLAS's order of sums, a scan's), so its timed calls (and
    torch.compile's) are checked against torch, not against float64 (None for every
    other op)."""
    import torch

    definition = op.definition
    if definition.reference_in is None:
        return None
    if not needs_grad:
        outputs = as_tuple(definition.reference(*args.inputs, *args.extra))
        return {"forward": tuple(o.detach() for o in outputs)}
    grads = torch.autograd.grad(
        args.graph_out, args.wanted, args.grad_outputs, retain_graph=True, allow_unused=True
    )
    return {"forward": tuple(o.detach() for o in args.graph_out), "backward": tuple(grads)}


def make_leaves(inputs: Sequence[Any], needs_grad: bool) -> list:
    """Fresh copies of the inputs, the floating-point ones requiring grad for a backward
    (an integer tensor cannot: a class index, a mask)."""
    return [t.detach().clone().requires_grad_(needs_grad and _differentiable(t)) for t in inputs]


def _differentiable(tensor: Any) -> bool:
    return tensor.dtype.is_floating_point or tensor.dtype.is_complex


def _of_differentiable(grads: tuple, leaves: Sequence[Any]) -> tuple:
    """A backward's gradients (one per input) at the inputs that require grad, as
    torch.autograd.grad and the reference give them; any other count is left for the
    check to report."""
    if len(grads) != len(leaves):
        return grads
    return tuple(g for g, leaf in zip(grads, leaves) if leaf.requires_grad)
