"""One case on one implementation: the rows of the equivalence and gradcheck suite.

``CaseRunner`` runs a backend on a case and records one ``CheckResult`` per check:

- ``forward``:   outputs against the PyTorch reference (outputs NaN-poisoned before
                 launch, inputs cloned and checked unmodified afterwards; every tensor
                 between guard zones, verified after each launch: launch/guards.py);
- ``backward``:  input gradients against the reference's autograd;
- ``gradcheck``: ``torch.autograd.gradcheck`` of the implementation in float64;
- ``vs twin``:   prototype against twin on the same device, outputs and gradients,
                 with the tighter ``TWIN_TOLERANCE``.

Which backends run which case, and the suite around the cases, are in harness.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.backends.sim import PortkitSimulator
from portkit.checking.case_compare import compare_tensors
from portkit.checking.configurations import configuration_of
from portkit.checking.contributions import Contributions, counting_run, from_machine
from portkit.checking.op_contract import (
    differentiable,
    modified_inputs,
    no_gradient_notes,
    parameter_names,
    require_reference_dtypes,
)
from portkit.checking.reference_run import (
    ControlRuns,
    control_run,
    dropped_gradients,
    reference_run,
)
from portkit.checking.schedules import other_schedule
from portkit.checking.sim_warnings import taken
from portkit.errors import (
    BackwardContractError,
    ReferenceFailure,
    TwinCompileError,
    TwinSignatureError,
    describe,
    failure_site,
)
from portkit.launch.compose import compose_kernels
from portkit.launch.guards import GuardZones
from portkit.launch.op_inputs import as_tuple
from portkit.project.cases import Case, draw_device, make_grad_outputs, make_inputs
from portkit.results import CheckResult, FailureSite, Outcome, Stage, ValueMismatch, compile_check
from portkit.torch_op.load import registered_callable

if TYPE_CHECKING:
    import torch

    from portkit.backends import Backend
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
    _drawn_inputs: list[Any] | None = None
    # How to rerun this case, appended to every failure; `portkit sim` sets its own.
    rerun: str = ""
    settings: CheckSettings = field(default_factory=CheckSettings)
    # Float atomic sums per output and gradient (checking/contributions.py), counted once.
    _contributions: Contributions | None = None
    # The measured control's reference runs per device (checking/control.py), or why not.
    _controls: dict[str, ControlRuns | str] = field(default_factory=dict)
    _dropped: list[str] | None = None

    # -- bookkeeping -------------------------------------------------------------
    def record(
        self,
        who: Backend | str,  # a backend (its name, its configuration), or a name: "reference"
        check: str,
        status: Outcome,
        detail: str = "",
        t0: float | None = None,
        case: str = "",
        margin: float | None = None,
        warnings: tuple[dict, ...] = (),
        compared_with: str | None = None,
        site: FailureSite | None = None,
        mismatches: Sequence[ValueMismatch] = (),  # the row keeps the first
        stage: Stage = Stage.RUN,
    ) -> None:
        seconds = time.perf_counter() - t0 if t0 is not None else 0.0
        name = who if isinstance(who, str) else who.name
        row = (self.op.name, case or self.case.name, name, check, status, detail, seconds)
        # the fields after ``seconds``: warnings, margin, cached, configuration, compared_with,
        # stage, site, mismatch
        more = (warnings, margin, False, configuration_of(who), compared_with, stage, site)
        self.results.append(CheckResult(*row, *more, next(iter(mismatches), None)))

    @property
    def reproduce(self) -> str:
        rerun = self.rerun or f"portkit check {self.op.name} --case {self.case.name}"
        if self.case.seed_round and not self.rerun:  # one of --seeds N's rounds: that one
            rerun += f" --first-seed {self.case.seed_round}"
        return f" [seed {self.case.seed}; reproduce: {rerun}]"

    def failure(self, exc: Exception) -> tuple[str, FailureSite | None]:
        """A row's detail and site for what a kernel or launcher raised: where in the op's
        prototype, if the error passed through it, and how to reproduce the case."""
        path = self.op.prototype_path
        return f"{describe(exc, path)}{self.reproduce}", failure_site(exc, path)

    def build_failed(self, backend: str) -> bool:
        """Whether ``backend`` could not build the op's kernels (its ``compile`` row)."""
        return any(
            r.backend == backend and r.stage is Stage.COMPILE and r.failed for r in self.results
        )

    # -- the reference, computed once per device ---------------------------------
    def reference(self, device: str) -> tuple[tuple, tuple]:
        """Reference outputs and input gradients on ``device``; raises ``ReferenceFailure``
        (kept, so a reference that raises runs once per device) when the reference does."""
        import torch

        if device not in self._references:
            inputs = self.differentiable(self.inputs(device))
            backward = self.op.definition.has_backward
            try:
                self._references[device] = reference_run(self.op, self.case, inputs, backward)
            except ReferenceFailure as exc:
                self._references[device] = exc
                # The reference's own row, once: no implementation is blamed for it.
                detail = f"{exc}{self.reproduce}"
                self.record("reference", exc.stage, Outcome.FAIL, detail, site=exc.site)
            if device == "cuda":
                torch.cuda.synchronize()
        found = self._references[device]
        if isinstance(found, ReferenceFailure):
            raise found
        return found

    def control(self, device: str) -> ControlRuns | None:
        """The reference in float64 and in the kernels' precision (checking/control.py), once
        per device; None (the dtype table applies) where the reference cannot run so."""
        if device not in self._controls:
            inputs = self.differentiable(self.inputs(device))
            try:
                self._controls[device] = control_run(
                    self.op, self.case, inputs, self.op.definition.has_backward
                )
            except Exception as exc:  # e.g. a reference op without a float64 kernel
                self._controls[device] = f"{type(exc).__name__}: {exc}"
        found = self._controls[device]
        return found if isinstance(found, ControlRuns) else None

    def reference_failed(self, backend: Backend) -> bool:
        """Whether the reference raised on ``backend``'s device; if so ``backend`` is
        marked as not compared (the failure is the reference's row)."""
        try:
            self.reference(backend.device)
        except ReferenceFailure as exc:
            reason = f"not compared: the reference failed (see reference / {exc.stage})"
            self.record(backend, "run", Outcome.SKIP, reason)
            return True
        return False

    def inputs(self, device: str) -> list[torch.Tensor]:
        """A fresh copy of the case's inputs on ``device``. They are made once per case:
        drawing a GPU-sized case's random numbers again for every implementation cost
        seconds a check (6.9 s of a `portkit check sigmoid` on the H100 machine)."""
        if self._drawn_inputs is None:  # kept where drawn (a GPU-only case's on the GPU)
            self._drawn_inputs = make_inputs(self.case, draw_device(self.case))
        return [t.to(device, copy=True) for t in self._drawn_inputs]

    def differentiable(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        return differentiable(self.op, self.case, inputs)

    def gradients(
        self,
        outputs: Sequence[torch.Tensor],
        inputs: Sequence[torch.Tensor],
        guards: GuardZones | None = None,
    ) -> tuple[torch.Tensor | None, ...]:
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
        if self.reference_failed(backend):
            return
        t0 = time.perf_counter()
        self.gradcheck(backend, self.op.definition.reference, t0)

    def run_implementation(self, backend: Backend) -> ImplementationRun | None:
        import torch

        run = ImplementationRun(backend)
        name, device = backend.name, backend.device
        if self.reference_failed(backend):
            return None
        t0 = time.perf_counter()
        try:
            guards = GuardZones(parameter_names(self.op)) if self.settings.guards else None
            poison = self.settings.poison
            kernels = compose_kernels(backend, self.op, checked=True, poison=poison, guards=guards)
            fn = registered_callable(self.op, kernels, backend.config.namespace, define_now=False)
            expected_outputs, expected_grads = self.reference(device)
            inputs = self.differentiable(self.inputs(device))
            if guards is not None:
                inputs = [guards.copy_in(t) for t in inputs]
            originals = [t.detach().clone() for t in inputs]
            outputs = as_tuple(fn(*inputs, *self.case.extra))
            if device == "cuda":
                torch.cuda.synchronize()
        except (TwinCompileError, TwinSignatureError) as exc:  # the op's build, not this case
            self.record(
                backend, compile_check(), Outcome.FAIL, str(exc), t0, "all",
                site=failure_site(exc), stage=Stage.COMPILE,
            )  # fmt: skip
            return None
        except BackwardContractError as exc:  # found registering the forward; not its fault
            self.record(
                backend, "forward", Outcome.SKIP, "not run: the op's backward breaks the contract"
            )
            self.record(backend, "backward", Outcome.FAIL, f"{exc}{self.reproduce}", t0)
            return None
        except Exception as exc:  # a kernel's or launcher's error fails this check only
            detail, site = self.failure(exc)
            self.record(
                backend, "forward", Outcome.FAIL, detail, t0, warnings=taken(backend), site=site
            )
            return None
        require_reference_dtypes(self.op, self.case, name, outputs, expected_outputs)
        machine = backend.machine  # declared on Backend: None unless portkit simulates it
        counted = self.contributions(backend, machine, outputs)
        notes: list[str] = []
        margins: list[float] = []
        differ: list[ValueMismatch] = []
        sites: list[FailureSite] = []  # a fault in the simulator's other schedule
        sides = (name, "reference")
        problems = self.compare_all(
            "output", outputs, expected_outputs, sides, counted, notes, margins, differ
        )
        problems += modified_inputs(inputs, originals, "forward")
        if isinstance(backend, PortkitSimulator):  # float atomics: their other order too
            problems += other_schedule(
                self.op, self.case, backend.config, backend.schedule, self.inputs(device),
                outputs, expected_outputs, counted, notes, self.reproduce, differ, sites,
            )  # fmt: skip
        outcome, detail = Outcome.FAIL if problems else Outcome.PASS, "\n".join(problems or notes)
        margin, warned = max(margins, default=None), taken(backend)
        self.record(
            backend,
            "forward",
            outcome,
            detail,
            t0,
            margin=margin,
            warnings=warned,
            site=next(iter(sites), None),
            mismatches=differ,
        )
        run.outputs = tuple(o.detach() for o in outputs)

        if self.op.definition.has_backward:
            t0 = time.perf_counter()
            try:
                grads = self.gradients(outputs, inputs, guards)
                if device == "cuda":
                    torch.cuda.synchronize()
            except Exception as exc:
                detail, site = self.failure(exc)
                self.record(
                    backend,
                    "backward",
                    Outcome.FAIL,
                    detail,
                    t0,
                    warnings=taken(backend),
                    site=site,
                )
                return run
            counted = self.contributions(backend, machine, outputs, grads)
            notes = no_gradient_notes(self.op, self.case)
            margins, differ = [], []
            problems = self.compare_all(
                "grad", grads, expected_grads, sides, counted, notes, margins, differ
            )
            problems += modified_inputs(inputs, originals, "backward")
            problems += self.dropped_gradients()
            detail = "\n".join(problems or notes)
            outcome = Outcome.FAIL if problems else Outcome.PASS
            margin, warned = max(margins, default=None), taken(backend)
            self.record(
                backend, "backward", outcome, detail, t0,
                margin=margin, warnings=warned, mismatches=differ,
            )  # fmt: skip
            run.grads = grads
            if self.case.gradcheck:
                # The simulator is slow; gradcheck's fast mode checks one random
                # projection of the Jacobian instead of every column.
                self.gradcheck(backend, fn, time.perf_counter(), fast=backend.simulated)
        return run

    def dropped_gradients(self) -> list[str]:
        """Gradients the backward returns as None where the reference has one, found once."""
        if self._dropped is None:
            found = dropped_gradients(self.op, self.case, self.inputs("cpu"))
            self._dropped = [f"{line}{self.reproduce}" for line in found]
        return self._dropped

    def gradcheck(self, backend: Backend, fn: Callable, t0: float, fast: bool = False) -> None:
        import torch

        inputs = self.differentiable(self.inputs(backend.device))
        try:
            torch.autograd.gradcheck(
                lambda *xs: fn(*xs, *self.case.extra),
                tuple(inputs),
                raise_exception=True,
                fast_mode=fast,
            )
        except Exception as exc:
            detail, site = self.failure(exc)
            self.record(backend, "gradcheck", Outcome.FAIL, detail, t0, site=site)
        else:
            self.record(backend, "gradcheck", Outcome.PASS, "", t0)

    def compare_all(
        self,
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
        ``sides[1]``), this case's (case_compare.py ``compare_tensors``)."""
        return compare_tensors(
            self.op, self.case, self.reproduce, self.control,
            kind, actual, expected, sides, counted, notes, margins, differ,
        )  # fmt: skip

    def contributions(
        self,
        backend: Backend,
        machine: object = None,
        outputs: Sequence = (),
        grads: Sequence = (),
    ) -> Contributions:
        """Float atomic sums into this case's outputs (and gradients): a simulator run's
        own ``machine`` counted them; otherwise a counting run does, once per case."""
        if machine is not None:
            counted = from_machine(machine, tuple(outputs), tuple(grads))
            if grads or self._contributions is None:
                self._contributions = counted
            return counted
        if self._contributions is None:
            self._contributions = counting_run(self.op, self.case, backend.config)
        return self._contributions

    # -- prototype against twin --------------------------------------------------
    def cross_compare(self, runs: Sequence[ImplementationRun]) -> None:
        from portkit.checking.twin_compare import cross_compare

        cross_compare(self, runs)
