"""Run the benchmark: every implementation of an op, case by case, forward and backward
apart, interleaved in one process, every timed output checked against the reference.

Per case and direction: warm-up calls (compilation, caches, and the host time that
sizes the clock's cover), then ``reps`` rounds; in each round every implementation is
timed once, in an order that rotates from round to round, so a drift of the machine
(clocks, temperature) spreads over all of them. The output of every timed call is
compared with the reference's at the timed shape, and outputs are NaN-poisoned before
the kernels run, so a fast kernel that computes the wrong thing, or nothing, fails.
Integer and bool inputs (a class index, a mask) never require gradients: the backward
is timed and checked for the floating-point inputs alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portkit.bench.model import OK, Measurement
from portkit.bench.stats import Summary
from portkit.bench.timing import EVENTS, MAX_COVER_US, SPIN, Clock, LaunchSpan, cover_for
from portkit.bench.traffic import declared, default_bytes
from portkit.checking.compare import REFERENCE_TOLERANCE, compare
from portkit.checking.reference_run import reference_run
from portkit.errors import PortkitError, describe
from portkit.launch.autograd import as_tuple
from portkit.project.cases import Case, make_grad_outputs, make_inputs

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.project.discovery import Op

DIRECTIONS = ("forward", "backward")
MAX_ATTEMPTS = 4  # timings of one call before its sample is given up


@dataclass
class Task:
    """One implementation's call for one case and direction."""

    implementation: str
    role: str
    call: Callable[[], tuple]
    span: LaunchSpan | None  # None: marks around the whole call (torch)
    failure: str | None = None
    timing: str = SPIN  # EVENTS once no spin covered the host's time to issue a call


def verify(actual: Sequence[Any], expected: Sequence[Any], dtype: str, what: str) -> str | None:
    """None if every output matches the reference within its tolerance; else why not."""
    import torch

    tolerance = REFERENCE_TOLERANCE[dtype]
    if len(actual) != len(expected):
        return f"{what}: {len(actual)} outputs, the reference has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            continue
        if a is None or tuple(a.shape) != tuple(e.shape) or a.dtype != e.dtype:
            got = "nothing" if a is None else f"{tuple(a.shape)} {a.dtype}"
            return f"{what} {i}: got {got}, the reference has {tuple(e.shape)} {e.dtype}"
        close = torch.isclose(a, e, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)
        if not bool(close.all()):
            mismatch = compare(f"{what} {i}", a, e, tolerance)
            return mismatch.report() if mismatch else f"{what} {i} differs"
    return None


class Bench:
    def __init__(
        self,
        clock: Clock,
        reps: int = 30,
        warmup: int = 3,
        directions: Sequence[str] = DIRECTIONS,
        advance: Callable[[str], None] | None = None,
    ) -> None:
        self.clock, self.reps, self.warmup = clock, reps, warmup
        self.directions = tuple(directions)
        self.advance = advance or (lambda label: None)

    # -- one op ---------------------------------------------------------------------------
    def run_op(self, op: Op, cases: Sequence[Case], backends: Sequence[Backend]) -> list:
        results: list[Measurement] = []
        for case in cases:
            results += self.run_case(op, case, backends)
        return results

    def run_case(self, op: Op, case: Case, backends: Sequence[Backend]) -> list[Measurement]:

        definition = op.definition
        kernel_backends = [b for b in backends if b.role != "reference"]
        runnable = [b for b in kernel_backends if not b.unavailable_reason]
        devices = sorted({b.device for b in runnable})
        if len(devices) > 1:
            named = ", ".join(f"{b.name} ({b.device})" for b in runnable)
            raise PortkitError(f"portkit bench times implementations of one device, got {named}")
        device = devices[0] if devices else "cpu"
        inputs = make_inputs(case, device)
        directions = [d for d in self.directions if d == "forward" or definition.has_backward]
        needs_grad = "backward" in directions
        # What is right is what `portkit check` says is right (widened references included).
        expected_out, expected_grads = reference_run(
            op, case, _leaves(inputs, needs_grad), needs_grad
        )
        # torch's own forward and backward, timed as the reference implementation.
        leaves = _leaves(inputs, needs_grad)
        graph_out = as_tuple(definition.reference(*leaves, *case.extra)) if needs_grad else ()
        grad_outputs = make_grad_outputs(case, expected_out) if needs_grad else []
        native = self._native(op, (inputs, case.extra), leaves, graph_out, grad_outputs, needs_grad)

        measurements = []
        for direction in directions:
            tasks, saved_for_bytes, skipped = self._tasks(
                op, direction, backends, (inputs, case.extra), leaves, graph_out, grad_outputs
            )
            if direction == "forward":
                expected = expected_out
                count = default_bytes("forward", tuple(inputs), expected_out)
            else:
                expected = expected_grads
                saved = saved_for_bytes if saved_for_bytes is not None else (*inputs, *expected_out)
                count = default_bytes(
                    "backward", (), (), tuple(saved), tuple(grad_outputs), expected_grads
                )
            count = declared(definition.ideal_bytes, direction, tuple(inputs), op.name) or count
            flops = declared(definition.ideal_flops, direction, tuple(inputs), op.name)
            self.advance(f"{op.name} {case.name} {direction}")
            mine = native[direction] if native else None
            timings = self._time(tasks, expected, case.dtype, direction, mine)
            for task in tasks:
                samples, host = timings[task.implementation]
                measurements.append(
                    Measurement(
                        op=op.name,
                        case=case.name,
                        shapes=case.shapes,
                        dtype=case.dtype,
                        direction=direction,
                        implementation=task.implementation,
                        role=task.role,
                        time=Summary.of(samples) if task.failure is None and samples else None,
                        host_us=_median(host),
                        bytes=count,
                        flops=flops,
                        check=task.failure or OK,
                        timing=task.timing,
                    )
                )
            for backend, reason in skipped:
                measurements.append(
                    Measurement(
                        op.name,
                        case.name,
                        case.shapes,
                        case.dtype,
                        direction,
                        backend.name,
                        backend.role,
                        None,
                        None,
                        count,
                        flops,
                        f"skip: {reason}",
                    )  # fmt: skip
                )
        return measurements

    # -- the calls ------------------------------------------------------------------------
    def _tasks(self, op, direction, backends, arguments, leaves, graph_out, grad_outputs):
        import torch

        definition = op.definition
        inputs, extra = arguments
        wanted = [t for t in leaves if t.requires_grad]
        tasks: list[Task] = []
        skipped = []
        saved_for_bytes = None
        for backend in backends:
            if backend.role == "reference":
                if direction == "forward":

                    def call(f=definition.reference):
                        with torch.no_grad():
                            return as_tuple(f(*inputs, *extra))
                else:

                    def call():
                        grads = torch.autograd.grad(
                            graph_out, wanted, grad_outputs, retain_graph=True, allow_unused=True
                        )
                        return tuple(grads)

                tasks.append(Task(backend.name, backend.role, call, None))
                continue
            reason = backend.unavailable_reason or backend.unsupported_reason(op)
            if reason:
                skipped.append((backend, reason))
                continue
            span = LaunchSpan(self.clock)
            try:
                kernels = span.wrap(backend.kernels(op, poison_outputs=True))
            except Exception as exc:  # a twin that does not compile, say
                failure = f"error: {describe(exc)}"
                tasks.append(Task(backend.name, backend.role, tuple, None, failure))
                continue
            if direction == "forward":

                def call(k=kernels):
                    return as_tuple(definition.forward(k, *inputs, *extra)[0])
            else:
                try:
                    _, saved = definition.forward(kernels, *inputs, *extra)
                    saved = as_tuple(saved)
                except Exception as exc:
                    tasks.append(
                        Task(backend.name, backend.role, tuple, span, f"error: {describe(exc)}")
                    )
                    continue
                saved_for_bytes = saved

                def call(k=kernels, saved=saved):
                    grads = as_tuple(definition.backward(k, saved, *grad_outputs))
                    return _of_differentiable(grads, leaves)

            tasks.append(Task(backend.name, backend.role, call, span))
        return tasks, saved_for_bytes, skipped

    @staticmethod
    def _native(op, arguments, leaves, graph_out, grad_outputs, needs_grad) -> dict | None:
        """torch's own outputs and gradients in the case's dtype, for ops that declare a
        wider reference (``reference_in``): torch's float32 row is then an implementation
        with rounding of its own (cuBLAS's order of sums, a scan's), so its timed calls are
        checked against torch, not against float64 (None for every other op)."""
        import torch

        definition = op.definition
        if definition.reference_in is None:
            return None
        if not needs_grad:
            outputs = as_tuple(definition.reference(*arguments[0], *arguments[1]))
            return {"forward": tuple(o.detach() for o in outputs)}
        wanted = [t for t in leaves if t.requires_grad]
        grads = torch.autograd.grad(
            graph_out, wanted, grad_outputs, retain_graph=True, allow_unused=True
        )
        return {"forward": tuple(o.detach() for o in graph_out), "backward": tuple(grads)}

    def _time(self, tasks: list[Task], expected, dtype: str, what: str, native=None):
        """{implementation: (GPU microseconds per timed call, host microseconds)}.
        ``native``: what torch's own row must give, where it differs from ``expected``."""
        timings: dict[str, tuple[list[float], list[float]]] = {
            t.implementation: ([], []) for t in tasks
        }
        warm_host: list[float] = []
        for task in tasks:
            for call in range(self.warmup):
                if task.failure is None:
                    want = native if native is not None and task.role == "reference" else expected
                    host = self._warm(task, want, dtype, what)
                    if call or self.warmup == 1:  # a first call compiles: not a launch
                        warm_host.append(host)
        self.clock.cover_us = cover_for(warm_host)
        live = [t for t in tasks if t.failure is None]
        for rep in range(self.reps):
            shift = rep % max(len(live), 1)
            for task in live[shift:] + live[:shift]:
                if task.failure is not None:
                    continue
                want = native if native is not None and task.role == "reference" else expected
                samples, hosts = timings[task.implementation]
                timing = task.timing
                sample = self._sample(task, want, dtype, what, rep)
                if task.timing != timing:  # one method for all of a task's samples
                    samples.clear()
                    hosts.clear()
                if sample is not None:
                    samples.append(sample[0])
                    hosts.append(sample[1])
        return timings

    def _sample(self, task: Task, expected, dtype: str, what: str, rep: int):
        """One accepted (GPU us, host us) for ``task``, or None if its call failed."""
        if task.timing == SPIN:
            cover = self.clock.cover_us
            for _attempt in range(MAX_ATTEMPTS):
                sample = self._timed(task, expected, dtype, what, rep)
                if sample is None or self.clock.covers(sample[1]):
                    return sample
                # The host took longer than the GPU's spin: the GPU may have idled
                # inside the timed span. Discard the sample, spin longer, time again.
                self.clock.cover_us = min(2 * self.clock.cover_us, MAX_COVER_US)
            # No spin covers a call that waits for the GPU: time it with plain events,
            # and leave the other implementations the spin they had.
            self.clock.cover_us = cover
            task.timing = EVENTS
        return self._timed(task, expected, dtype, what, rep)

    def _timed(self, task: Task, expected, dtype: str, what: str, rep: int):
        """(GPU microseconds, host microseconds) of one checked call, or None on failure."""
        self.clock.prepare(spin=task.timing == SPIN)
        if task.span is not None:
            task.span.arm()
            start = None
        else:
            start = self.clock.mark()
        began = time.perf_counter()
        try:
            result = task.call()
        except Exception as exc:
            task.failure = f"error: {describe(exc)}"
            return None
        host = (time.perf_counter() - began) * 1e6
        if task.span is not None:
            task.span.disarm()
            start, end = task.span.start, task.span.end
            if start is None:
                task.failure = "error: the call launched no kernel"
                return None
        else:
            end = self.clock.mark()
        elapsed = self.clock.elapsed_us(start, end)
        problem = verify(result, expected, dtype, f"{what} output")
        if problem:
            task.failure = f"wrong: timed call {rep + 1}: {problem}"
            return None
        return elapsed, host

    def _warm(self, task: Task, expected, dtype: str, what: str) -> float:
        """An untimed call, checked too; returns its host microseconds."""
        began = time.perf_counter()
        try:
            result = task.call()
        except Exception as exc:
            task.failure = f"error: {describe(exc)}"
            return 0.0
        host = (time.perf_counter() - began) * 1e6
        problem = verify(result, expected, dtype, f"{what} output")
        if problem:
            task.failure = f"wrong: warm-up call: {problem}"
        return host


def _leaves(inputs: Sequence[Any], needs_grad: bool) -> list:
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


def _median(values: Sequence[float]) -> float | None:
    return Summary.of(values).median if values else None
