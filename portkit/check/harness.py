"""The one equivalence and gradcheck suite, shared by ``portkit check`` and pytest.

For one op and one case it runs every selected backend and returns one
``CheckResult`` per check:

- ``forward``:   outputs against the PyTorch reference (outputs NaN-poisoned before
                 launch, inputs cloned and checked unmodified afterwards; every tensor
                 between guard zones, verified after each launch: launch/guards.py);
- ``backward``:  input gradients against the reference's autograd;
- ``gradcheck``: ``torch.autograd.gradcheck`` of the implementation in float64;
- ``vs twin``:   prototype against twin on the same device, outputs and gradients,
                 with the tighter ``TWIN_TOLERANCE``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.check.compare import (
    REFERENCE_TOLERANCE,
    TWIN_TOLERANCE,
    compare,
    identical,
    tolerance_for,
)
from portkit.check.reference_run import reference_run
from portkit.errors import DtypeError, PortkitError, describe
from portkit.launch.autograd import as_tuple
from portkit.launch.guards import GuardZones
from portkit.project.cases import Case, make_grad_outputs, make_inputs
from portkit.results import FAIL, PASS, SKIP, CheckResult
from portkit.torch_op.load import registered_callable

if TYPE_CHECKING:
    import torch

    from portkit.backends import Backend
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


@dataclass(frozen=True)
class CheckSettings:
    """How the harness allocates while checking. The defaults are for finding bugs by
    value: outputs poisoned, every tensor between guard zones. Under compute-sanitizer
    allocations must be exact (memcheck sees an overrun only where an allocation ends),
    and under initcheck outputs stay unpoisoned (a read before the write is the bug)."""

    guards: bool = True
    poison: bool = True

    @staticmethod
    def under_sanitizer(tool: str) -> CheckSettings:
        return CheckSettings(guards=False, poison=tool != "initcheck")


@dataclass
class ImplementationRun:
    """What one implementation produced for one case, kept for cross-comparison."""

    backend: Backend
    outputs: tuple[torch.Tensor, ...] = ()
    grads: tuple[torch.Tensor | None, ...] = ()


@dataclass
class CaseRunner:
    op: Op
    case: Case
    results: list[CheckResult] = field(default_factory=list)
    _references: dict[str, Any] = field(default_factory=dict)
    _cpu_inputs: list[Any] | None = None
    # How to rerun this case, appended to every failure; `portkit sim` sets its own.
    rerun: str = ""
    settings: CheckSettings = field(default_factory=CheckSettings)

    # -- bookkeeping -------------------------------------------------------------
    def record(self, backend: str, check: str, status: str, detail: str = "", t0=None) -> None:
        seconds = time.perf_counter() - t0 if t0 is not None else 0.0
        self.results.append(
            CheckResult(self.op.name, self.case.name, backend, check, status, detail, seconds)
        )

    @property
    def reproduce(self) -> str:
        rerun = self.rerun or f"portkit check {self.op.name} --case {self.case.name}"
        return f" [seed {self.case.seed}; reproduce: {rerun}]"

    # -- the reference, computed once per device ---------------------------------
    def reference(self, device: str) -> tuple[tuple, tuple]:
        """Reference outputs and input gradients on ``device``."""
        import torch

        if device not in self._references:
            inputs = self.differentiable(self.inputs(device))
            backward = self.op.definition.has_backward
            self._references[device] = reference_run(self.op, self.case, inputs, backward)
            if device == "cuda":
                torch.cuda.synchronize()
        return self._references[device]

    def inputs(self, device: str) -> list[torch.Tensor]:
        """A fresh copy of the case's inputs on ``device``. They are made once per case:
        drawing a GPU-sized case's random numbers again for every implementation cost
        seconds a check (6.9 s of a `portkit check sigmoid` on the H100 machine)."""
        if self._cpu_inputs is None:
            self._cpu_inputs = make_inputs(self.case, "cpu")
        return [t.to(device, copy=True) for t in self._cpu_inputs]

    @staticmethod
    def differentiable(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [t.detach().requires_grad_(t.dtype.is_floating_point) for t in inputs]

    def gradients(
        self,
        outputs: Sequence[torch.Tensor],
        inputs: Sequence[torch.Tensor],
        guards: GuardZones | None = None,
    ):
        import torch

        grad_outputs = make_grad_outputs(self.case, outputs)
        if guards is not None:  # the backward kernels read them: guard them like inputs
            grad_outputs = [guards.copy_in(g) for g in grad_outputs]
        wanted = [t for t in inputs if t.requires_grad]
        grads = torch.autograd.grad(outputs, wanted, grad_outputs, allow_unused=True)
        return tuple(g.detach() if g is not None else None for g in grads)

    # -- one implementation ------------------------------------------------------
    def run_reference_backend(self, backend: Backend) -> None:
        if not (self.case.gradcheck and self.op.definition.has_backward):
            return
        t0 = time.perf_counter()
        self.gradcheck(backend.name, self.op.definition.reference, backend.device, t0)

    def run_implementation(self, backend: Backend) -> ImplementationRun | None:
        import torch

        run = ImplementationRun(backend)
        name, device = backend.name, backend.device
        t0 = time.perf_counter()
        try:
            kernels = backend.kernels(self.op, poison_outputs=self.settings.poison)
            guards = None
            if self.settings.guards:
                guards = kernels.guards = GuardZones(parameter_names(self.op))
            fn = registered_callable(self.op, kernels, backend.config.namespace, define_now=False)
            expected_outputs, expected_grads = self.reference(device)
            inputs = self.differentiable(self.inputs(device))
            if guards is not None:
                inputs = [guards.copy_in(t) for t in inputs]
            originals = [t.detach().clone() for t in inputs]
            outputs = as_tuple(fn(*inputs, *self.case.extra))
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # a kernel's or launcher's error fails this check only
            self.record(name, "forward", FAIL, f"{describe(exc)}{self.reproduce}", t0)
            return None
        self.require_reference_dtypes(name, outputs, expected_outputs)
        problems = self.compare_all("output", outputs, expected_outputs, REFERENCE_TOLERANCE)
        problems += self.modified_inputs(inputs, originals, "forward")
        self.record(name, "forward", FAIL if problems else PASS, "\n".join(problems), t0)
        run.outputs = tuple(o.detach() for o in outputs)

        if self.op.definition.has_backward:
            t0 = time.perf_counter()
            try:
                grads = self.gradients(outputs, inputs, guards)
                if device == "cuda":
                    torch.cuda.synchronize()
            except Exception as exc:
                self.record(name, "backward", FAIL, f"{describe(exc)}{self.reproduce}", t0)
                return run
            problems = self.compare_all("grad of input", grads, expected_grads, REFERENCE_TOLERANCE)
            problems += self.modified_inputs(inputs, originals, "backward")
            self.record(name, "backward", FAIL if problems else PASS, "\n".join(problems), t0)
            run.grads = grads
            if self.case.gradcheck:
                # The simulator is slow; gradcheck's fast mode checks one random
                # projection of the Jacobian instead of every column.
                self.gradcheck(name, fn, device, time.perf_counter(), fast=backend.simulated)
        return run

    def gradcheck(
        self, name: str, fn: Callable, device: str, t0: float, fast: bool = False
    ) -> None:
        import torch

        inputs = self.differentiable(self.inputs(device))
        try:
            torch.autograd.gradcheck(
                lambda *xs: fn(*xs, *self.case.extra),
                tuple(inputs),
                raise_exception=True,
                fast_mode=fast,
            )
        except Exception as exc:
            self.record(name, "gradcheck", FAIL, f"{describe(exc)}{self.reproduce}", t0)
        else:
            self.record(name, "gradcheck", PASS, "", t0)

    def compare_all(self, what: str, actual: Sequence, expected: Sequence, table) -> list[str]:
        if len(actual) != len(expected):
            return [f"{len(actual)} {what}s, the reference has {len(expected)}"]
        problems = []
        for index, (a, e) in enumerate(zip(actual, expected)):
            if a is None or e is None:
                if (a is None) != (e is None):
                    problems.append(f"{what} {index}: one side has no gradient")
                continue
            mismatch = compare(f"{what} {index}", a, e, tolerance_for(table, e.dtype))
            if mismatch:
                problems.append(mismatch.report(self.reproduce))
        return problems

    def require_reference_dtypes(self, name: str, outputs: Sequence, expected: Sequence) -> None:
        """A reference and an implementation that return different dtypes break the
        contract (no tolerance can compare them): an OpDefinitionError, not a failed row."""
        for index, (a, e) in enumerate(zip(outputs, expected)):
            if a.dtype != e.dtype:
                raise DtypeError(
                    f"op {self.op.name}, case {self.case.name}: output {index} of the {name} "
                    f"implementation is {str(a.dtype)[6:]} but the reference returns "
                    f"{str(e.dtype)[6:]}; cast in the reference or the launcher so they agree"
                )

    def modified_inputs(self, inputs, originals, stage: str) -> list[str]:
        return [
            f"input {i} was modified by the {stage} (kernels must not write their inputs)"
            for i, (t, o) in enumerate(zip(inputs, originals))
            if not identical(t.detach(), o)
        ]

    # -- prototype against twin --------------------------------------------------
    def cross_compare(self, runs: Sequence[ImplementationRun]) -> None:
        twins = [r for r in runs if r.backend.role == "twin"]
        prototypes = [r for r in runs if r.backend.role == "prototype"]
        for twin in twins:
            for proto in prototypes:
                if proto.backend.device != twin.backend.device or not proto.outputs:
                    continue
                if not twin.outputs:
                    continue
                t0 = time.perf_counter()
                problems = self.compare_all("output", proto.outputs, twin.outputs, TWIN_TOLERANCE)
                if proto.grads and twin.grads:
                    problems += self.compare_all(
                        "grad of input", proto.grads, twin.grads, TWIN_TOLERANCE
                    )
                self.record(
                    proto.backend.name,
                    f"vs {twin.backend.name}",
                    FAIL if problems else PASS,
                    "\n".join(problems),
                    t0,
                )


def parameter_names(op: Op) -> dict[str, list[str]]:
    """Each kernel's parameter names, from its prototype (the twin has the same ones), so
    a guard violation can name the tensor."""
    import inspect

    names = {}
    for kernel, dispatcher in op.kernels.items():
        function = getattr(dispatcher, "py_func", None)
        if function is not None:
            names[kernel] = list(inspect.signature(function).parameters)
    return names


# The CPU backend that runs `large` (GPU-sized) cases: portkit's simulator, whose lockstep
# engine runs 2^24 threads in seconds. The CPU twin (sanitizers, one fiber per thread)
# and numba's simulator would take minutes to hours per case (docs/scale.md).
LARGE_ON_CPU = ("sim",)


def skip_reason(op: Op, case: Case, backend: Backend, others: Iterable[Backend] = ()) -> str | None:
    """Why ``backend`` does not run ``case`` (None: it does). ``others``: the backends run
    beside it; a GPU implementation among them makes simulating a large case redundant."""
    reason = backend.unavailable_reason or backend.unsupported_reason(op)
    if reason:
        return reason
    if case.gpu_only and backend.simulated:
        return case.gpu_only_reason
    if case.large and backend.simulated:
        on_gpu = gpu_implementations(op, others)
        if on_gpu:
            return (
                f"large case: checked on this machine's GPU ({', '.join(on_gpu)}); the "
                f"simulator runs large cases where there is no GPU"
            )
        if backend.name not in LARGE_ON_CPU:
            return (
                f"large case: on a CPU only portkit's simulator (`sim`) runs it; "
                f"{backend.name} would take minutes"
            )
    return None


def gpu_implementations(op: Op, backends: Iterable[Backend]) -> list[str]:
    return [
        b.name
        for b in backends
        if b.device == "cuda"
        and b.role != "reference"
        and not (b.unavailable_reason or b.unsupported_reason(op))
    ]


def run_case(
    op: Op, case: Case, backends: Sequence[Backend], settings: CheckSettings | None = None
) -> list[CheckResult]:
    """Every check of ``op`` on ``case`` across ``backends``."""
    runner = CaseRunner(op, case, settings=settings or CheckSettings())
    runs = []
    for backend in backends:
        reason = skip_reason(op, case, backend, backends)
        if reason:
            runner.record(backend.name, "run", SKIP, reason)
            continue
        if backend.role == "reference":
            runner.run_reference_backend(backend)
            continue
        run = runner.run_implementation(backend)
        if run is not None:
            runs.append(run)
    runner.cross_compare(runs)
    return runner.results


def gradcheck_note(op: Op) -> CheckResult | None:
    """A SKIP row saying why an op with a backward gets no gradcheck: gradcheck's finite
    differences need float64, and the op does not accept it."""
    if not op.definition.has_backward or "float64" in op.definition.dtypes:
        return None
    accepted = ", ".join(op.definition.dtypes)
    detail = (
        f"gradcheck not possible: it needs float64 inputs (finite differences in lower "
        f"precision are noise) and the op accepts only {accepted}; backward is still "
        f"checked against the reference's autograd"
    )
    return CheckResult(op.name, "all", "torch", "gradcheck", SKIP, detail, 0.0)


def lint_result(op: Op, config: ProjectConfig | None = None) -> CheckResult:
    """`portkit lint`'s warnings as one row; they inform, they do not fail a check. With
    ``config``, through the findings cache (lint/cache.py); the row says when."""
    from portkit.lint.findings import code_findings, remembered_code_findings

    t0 = time.perf_counter()
    if config is None:
        findings, cached = code_findings(op), False
    else:
        findings, cached = remembered_code_findings(op, config)
    origin = " (from the lint cache)" if cached else ""
    if not findings:
        detail = f"no warnings{origin}"
    else:
        first = findings[0]
        detail = (
            f"{len(findings)} warning(s){origin}, see `portkit lint {op.name}`; first: "
            f"{first.kernel} {first.where} {first.message}"
        )
    return CheckResult(op.name, "all", "numba", "lint", PASS, detail, time.perf_counter() - t0)


def plan_suite(
    ops: Sequence[Op], case_names: set[str], skip_large: bool = False
) -> list[tuple[Op, Case]]:
    """Every (op, case) pair to run; ``case_names`` (if any) must each match some op.
    ``skip_large`` leaves out the GPU-sized cases unless they are named."""
    plan = [
        (op, case)
        for op in ops
        for case in op.definition.cases
        if (case.name in case_names if case_names else not (skip_large and case.large))
    ]
    unmatched = case_names - {case.name for _, case in plan}
    if unmatched:
        known = sorted({c.name for op in ops for c in op.definition.cases})
        raise PortkitError(
            f"no op has case(s) {', '.join(sorted(unmatched))}; cases: {', '.join(known)}"
        )
    return plan


def run_suite(
    plan: Sequence[tuple[Op, Case]],
    backends: Sequence[Backend],
    config,
    *,
    compile_first: bool = True,
    advance: Callable[[str], None] = lambda label: None,
    settings: CheckSettings | None = None,
) -> list[CheckResult]:
    """Compile checks (once per op), then every case of the plan on every backend."""
    from portkit.lint.compile import compile_checks

    results: list[CheckResult] = []
    if compile_first:
        for op in dict.fromkeys(op for op, _ in plan):
            advance(f"{op.name}: compile for sm_90, lint")
            compiled = compile_checks(op, config)
            results += compiled
            if not any(r.failed for r in compiled):
                results.append(lint_result(op, config))
            note = gradcheck_note(op)
            if note is not None:
                results.append(note)
    for op, case in plan:
        advance(f"{op.name} {case.name}")
        results += run_case(op, case, backends, settings)
    return results
