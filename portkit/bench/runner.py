"""Run the benchmark: every implementation of an op, case by case, forward and backward
apart, interleaved in one process, every timed output checked against the reference.

Per case and direction: warm-up calls (compilation, caches, and the host time that
sizes the clock's cover), then ``reps`` rounds; in each round every implementation is
timed once, in an order that rotates from round to round, so a drift of the machine
(clocks, temperature) spreads over all of them. The output of every timed call is
compared with the reference's at the timed shape, and outputs are NaN-poisoned before
the kernels run, so a fast kernel that computes the wrong thing, or nothing, fails.
The calls themselves are built in ``portkit.bench.tasks``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from portkit.bench.model import BASELINE, COMPILED, Measurement
from portkit.bench.scaling import case_origin
from portkit.bench.stats import Summary
from portkit.bench.tasks import (
    Arguments,
    Task,
    build_tasks,
    make_leaves,
    native_results,
    structural_problem,
    tolerances_of,
    verify,
)
from portkit.bench.timing import EVENTS, MAX_COVER_US, SPIN, Clock, cover_for
from portkit.bench.torch_judge import TorchJudge
from portkit.bench.traffic import declared, default_bytes
from portkit.checking.reference_run import reference_run
from portkit.errors import PortkitError
from portkit.launch.op_inputs import as_tuple
from portkit.project.cases import Case, make_grad_outputs, make_inputs
from portkit.results import Outcome

if TYPE_CHECKING:
    from portkit.checking.compare import Tolerance
    from portkit.project.discovery import Op

DIRECTIONS = ("forward", "backward")
MAX_ATTEMPTS = 4  # timings of one call before its sample is given up
# Checked against torch's own results where the op widens its reference (reference_in).
TORCH_ROLES = ("reference", COMPILED, BASELINE)


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
        self.judge: TorchJudge | None = None  # the current case's, set by run_case

    # -- one op ---------------------------------------------------------------------------
    def run_op(self, op: Op, cases: Sequence[Case], backends: Sequence[Any]) -> list:
        results: list[Measurement] = []
        for case in cases:
            results += self.run_case(op, case, backends)
        return results

    def run_case(self, op: Op, case: Case, backends: Sequence[Any]) -> list[Measurement]:
        definition = op.definition
        kernel_backends = [b for b in backends if b.role not in TORCH_ROLES]
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
            op, case, make_leaves(inputs, needs_grad), needs_grad
        )
        # torch's own forward and backward, timed as the reference implementation.
        leaves = make_leaves(inputs, needs_grad)
        graph_out = as_tuple(definition.reference(*leaves, *case.extra)) if needs_grad else ()
        grad_outputs = make_grad_outputs(case, expected_out) if needs_grad else []
        args = Arguments(inputs, case.extra, leaves, graph_out, grad_outputs)
        self.judge = TorchJudge(op, case, make_leaves(inputs, needs_grad), needs_grad)
        native = native_results(op, args, needs_grad)

        measurements = []
        for direction in directions:
            tasks, saved_for_bytes, skipped = build_tasks(op, direction, backends, self.clock, args)
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
            tolerances = tolerances_of(op, case, direction, expected)
            timings = self._time(tasks, expected, tolerances, direction, mine)
            row = functools.partial(
                Measurement,
                op.name,
                case.name,
                case.shapes,
                case.dtype,
                direction,
                bytes=count,
                flops=flops,
                scaled_from=case_origin(case),
                teaching=definition.teaching or "",
            )
            for task in tasks:
                samples, host = timings[task.implementation]
                measurements.append(
                    row(
                        implementation=task.implementation,
                        role=task.role,
                        time=Summary.of(samples) if task.live and samples else None,
                        host_us=_median(host),
                        status=task.status,
                        detail=task.detail,
                        timing=task.timing,
                    )
                )
            for backend, reason in skipped:
                measurements.append(
                    row(
                        implementation=backend.name,
                        role=backend.role,
                        time=None,
                        host_us=None,
                        status=Outcome.SKIP,
                        detail=reason,
                    )
                )
        return measurements

    # -- the timing -----------------------------------------------------------------------
    def _time(
        self,
        tasks: list[Task],
        expected: Any,
        tolerances: list[Tolerance | None],
        what: str,
        native: Any = None,
    ) -> dict[str, tuple[list[float], list[float]]]:
        """{implementation: (GPU microseconds per timed call, host microseconds)}.
        ``native``: what torch's own row must give, where it differs from ``expected``."""
        timings: dict[str, tuple[list[float], list[float]]] = {
            t.implementation: ([], []) for t in tasks
        }
        warm_host: list[float] = []
        for task in tasks:
            for call in range(self.warmup):
                if task.live:
                    host = self._warm(task, _wanted(task, expected, native), tolerances, what)
                    # A first call compiles: not a launch (torch.compile's takes seconds).
                    if call or (self.warmup == 1 and task.role != COMPILED):
                        warm_host.append(host)
        self.clock.cover_us = cover_for(warm_host)
        live = [t for t in tasks if t.live]
        for rep in range(self.reps):
            shift = rep % max(len(live), 1)
            for task in live[shift:] + live[:shift]:
                if not task.live:
                    continue
                want = _wanted(task, expected, native)
                samples, hosts = timings[task.implementation]
                timing = task.timing
                sample = self._sample(task, want, tolerances, what, rep)
                if task.timing != timing:  # one method for all of a task's samples
                    samples.clear()
                    hosts.clear()
                if sample is not None:
                    samples.append(sample[0])
                    hosts.append(sample[1])
        return timings

    def _sample(
        self, task: Task, expected: Any, tolerances: list[Tolerance | None], what: str, rep: int
    ) -> tuple[float, float] | None:
        """One accepted (GPU us, host us) for ``task``, or None if its call failed."""
        if task.timing == SPIN:
            cover = self.clock.cover_us
            for _attempt in range(MAX_ATTEMPTS):
                sample = self._timed(task, expected, tolerances, what, rep)
                if sample is None or self.clock.covers(sample[1]):
                    return sample
                # The host took longer than the GPU's spin: the GPU may have idled
                # inside the timed span. Discard the sample, spin longer, time again.
                self.clock.cover_us = min(2 * self.clock.cover_us, MAX_COVER_US)
            # No spin covers a call that waits for the GPU: time it with plain events,
            # and leave the other implementations the spin they had.
            self.clock.cover_us = cover
            task.timing = EVENTS
        return self._timed(task, expected, tolerances, what, rep)

    def _timed(
        self, task: Task, expected: Any, tolerances: list[Tolerance | None], what: str, rep: int
    ) -> tuple[float, float] | None:
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
            task.raised(exc)
            return None
        host = (time.perf_counter() - began) * 1e6
        if task.span is not None:
            task.span.disarm()
            start, end = task.span.start, task.span.end
            if start is None:
                task.fail(Outcome.ERROR, "the call launched no kernel")
                return None
        else:
            end = self.clock.mark()
        elapsed = self.clock.elapsed_us(start, end)
        problem = self._verify(task, result, expected, tolerances, what)
        if problem:
            task.fail(Outcome.FAIL, f"timed call {rep + 1}: {problem}")
            return None
        return elapsed, host

    def _warm(
        self, task: Task, expected: Any, tolerances: list[Tolerance | None], what: str
    ) -> float:
        """An untimed call, checked too; returns its host microseconds."""
        began = time.perf_counter()
        try:
            result = task.call()
        except Exception as exc:
            task.raised(exc)
            return 0.0
        host = (time.perf_counter() - began) * 1e6
        problem = self._verify(task, result, expected, tolerances, what)
        if problem:
            task.fail(Outcome.FAIL, f"warm-up call: {problem}")
        return host

    def _verify(
        self,
        task: Task,
        result: Any,
        expected: Any,
        tolerances: list[Tolerance | None],
        direction: str,
    ) -> str | None:
        """Why ``result`` is wrong, or None. A kernel row is judged as `portkit check`
        judges it (the measured control, torch_judge.kernel_problem); a torch row
        (baseline=, torch.compile) that misses the op's tolerance is judged again by the
        measured control (torch_judge)."""
        if task.role not in TORCH_ROLES and self.judge is not None:
            return structural_problem(result, expected, f"{direction} output") or (
                self.judge.kernel_problem(
                    direction, result, expected, tolerances, task.implementation
                )
            )
        problem = verify(result, expected, tolerances, f"{direction} output")
        if not problem or task.role not in (BASELINE, COMPILED) or self.judge is None:
            return problem
        again = self.judge.problem(direction, result, expected, tolerances, task.implementation)
        if again is None:
            return None
        return f"{problem}; and against float64, {again}" if again else problem


def _wanted(task: Task, expected: Any, native: Any) -> Any:
    """What ``task``'s outputs must be: torch's own where the op widens its reference."""
    return native if native is not None and task.role in TORCH_ROLES else expected


def _median(values: Sequence[float]) -> float | None:
    return Summary.of(values).median if values else None
