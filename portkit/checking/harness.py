"""The one equivalence and gradcheck suite, shared by ``portkit check`` and pytest.

For one op and one case, ``run_case`` runs every selected backend (``CaseRunner``,
case_runner.py: forward, backward, gradcheck, prototype vs twin) and returns one
``CheckResult`` per check; ``skip_reason`` says which backend does not run which case.
``plan_suite`` and ``run_suite`` are ``portkit check``: the compile checks and the
``lint`` row once per op, then every case of the plan.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from portkit.checking.case_runner import CaseRunner, CheckSettings
from portkit.checking.configurations import configuration_groups
from portkit.errors import PortkitError
from portkit.project.cases import grad_outputs_kept
from portkit.results import CheckResult, Outcome, Stage

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


class Reuse(Protocol):
    """Rows served instead of run (checking/verdicts: passing verdicts by content)."""

    def case(
        self,
        op: Op,
        case: Case,
        backends: Sequence[Backend],
        settings: CheckSettings | None,
        unbuilt: dict[str, str],
    ) -> list[CheckResult]: ...

    def op_rows(
        self, op: Op, check: str, compute: Callable[[], list[CheckResult]]
    ) -> list[CheckResult]: ...


# Imported from here by the CLI, the pytest plugin and scripts.
__all__ = [
    "CaseRunner",
    "CheckSettings",
    "gpu_implementations",
    "gradcheck_note",
    "lint_result",
    "plan_suite",
    "run_case",
    "run_suite",
    "skip_reason",
]


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
        if not backend.runs_large_cases_on_cpu:  # declared by the backend (docs/scale.md)
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


@grad_outputs_kept()  # every run of the case seeds the same upstream gradients: one draw
def run_case(
    op: Op,
    case: Case,
    backends: Sequence[Backend],
    settings: CheckSettings | None = None,
    unbuilt: dict[str, str] | None = None,
    context: Sequence[Backend] | None = None,
) -> list[CheckResult]:
    """Every check of ``op`` on ``case`` across ``backends``. ``unbuilt`` (backend name ->
    why it did not build ``op``) is shared by the cases of one op: a backend whose build
    failed once reports its compiler's error in that case and is skipped in the rest.
    ``context``: every backend of the run, where ``backends`` is a part of them (the rest
    served from stored verdicts), for the skip reasons that depend on the others."""
    import torch

    runner = CaseRunner(op, case, settings=settings or CheckSettings())
    unbuilt = {} if unbuilt is None else unbuilt
    config = backends[0].config if backends else None
    others = backends if context is None else context
    for group, configured in enumerate(configuration_groups(op, backends, config, case)):
        runs = []
        for backend, plain in zip(configured, backends):
            # a build failure is the backend's, whatever the configuration
            reason = skip_reason(op, case, plain, others) or unbuilt.get(plain.name)
            if reason:
                if not group:
                    runner.record(plain.name, "run", Outcome.SKIP, reason)
                continue
            if backend.role == "reference":
                if not group:  # once: it has no knobs
                    runner.run_reference_backend(backend)
                continue
            if group and case.large and plain.device == "cpu":
                continue  # a GPU-sized case runs its tuned configurations on the GPU only
            try:
                run = runner.run_implementation(backend)
            except (MemoryError, torch.OutOfMemoryError) as exc:  # the host's or the GPU's
                runner.record(backend, "forward", Outcome.FAIL, out_of_memory(exc))
                continue
            if run is not None:
                runs.append(run)
            elif runner.build_failed(backend.name):
                unbuilt[plain.name] = not_built(backend.name, f"{backend.name} / compile")
        runner.cross_compare(runs)
    return runner.results


def out_of_memory(exc: Exception) -> str:
    """The row of a case that ran its machine out of memory: the case, not the op, is at
    fault, and the rest of the run goes on."""
    first = (str(exc).splitlines() or ["out of memory"])[0]
    return (
        f"ran out of memory: {first} (the case is too large for this machine beside what "
        "else runs on it; run it alone with --case, or on a larger GPU)"
    )


def not_built(subject: str, row: str) -> str:
    return f"not run: {subject} does not compile (see {row} above)"


def gradcheck_note(op: Op) -> CheckResult | None:
    """A SKIP row saying why an op with a backward gets no gradcheck: gradcheck's finite
    differences need float64 and the op does not accept it, or no case asks for one."""
    definition = op.definition
    if not definition.has_backward:
        return None
    if "float64" not in definition.dtypes:
        accepted = ", ".join(definition.dtypes)
        detail = (
            f"gradcheck not possible: it needs float64 inputs (finite differences in lower "
            f"precision are noise) and the op accepts only {accepted}; backward is still "
            f"checked against the reference's autograd"
        )
    elif not any(case.gradcheck for case in definition.cases):
        detail = (
            "no gradcheck: no case is marked gradcheck=True (add a small float64 case, e.g. "
            "portkit.cases.custom(..., dtype='float64', gradcheck=True)); backward is still "
            "checked against the reference's autograd"
        )
    else:
        return None
    return CheckResult(op.name, "all", "torch", "gradcheck", Outcome.SKIP, detail, 0.0)


def lint_result(op: Op, config: ProjectConfig | None = None) -> CheckResult:
    """`portkit lint`'s findings as one row: it fails on an error (a change of results),
    and on a warning only where the project sets ``lint-warnings = "error"``. With
    ``config``, through the findings cache (lint/cache.py); the row says when."""
    from portkit.build.compile_checks import mlir_reason
    from portkit.lint.findings import code_findings, op_findings, twin_findings

    t0 = time.perf_counter()
    not_linted = mlir_reason(op)
    if not_linted:
        skip = (Outcome.SKIP, not_linted, 0.0)
        return CheckResult(op.name, "all", "numba", "lint", *skip, stage=Stage.STATIC)
    if config is None:
        findings, cached = twin_findings(op) + code_findings(op), False
    else:
        findings, cached = op_findings(op, config)
    warnings_fail = config is not None and config.lint_warnings_fail
    failing = [f for f in findings if f.fails(warnings_fail)]
    origin = " (from the lint cache)" if cached else ""
    errors = sum(f.fails(False) for f in findings)
    summary = f"{errors} error(s), {len(findings) - errors} warning(s){origin}"
    if not findings:
        detail = f"no findings{origin}"
    elif failing:
        shown = "\n".join(f"{f.line()} (fix: {f.fix})" for f in failing)
        detail = f"{summary}, see `portkit lint {op.name}`:\n{shown}"
    else:
        detail = f"{summary}, see `portkit lint {op.name}`; first: {findings[0].line()}"
    status = Outcome.FAIL if failing else Outcome.PASS
    seconds = time.perf_counter() - t0
    return CheckResult(op.name, "all", "numba", "lint", status, detail, seconds, stage=Stage.STATIC)


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
    config: ProjectConfig,
    *,
    compile_first: bool = True,
    advance: Callable[[str], None] = lambda label: None,
    settings: CheckSettings | None = None,
    reuse: Reuse | None = None,
    op_notes: bool = True,
) -> list[CheckResult]:
    """Compile checks (once per op, for each of the project's archs), then every case of
    the plan on every backend. ``reuse``: where rows whose verdict is stored come from
    (checking/verdicts); ``op_notes``: the op-wide gradcheck notes (not in a GPU phase)."""
    from portkit.build.compile_checks import compile_checks

    results: list[CheckResult] = []
    unbuilt: dict[str, dict[str, str]] = {op.name: {} for op, _ in plan}
    archs = ", ".join(config.archs or ("sm_90",))
    for op in dict.fromkeys(op for op, _ in plan) if compile_first else ():
        advance(f"{op.name}: compile for {archs}, lint")
        compiled = _op_rows(reuse, op, "compile", functools.partial(compile_checks, op, config))
        results += compiled
        if not any(r.failed for r in compiled):
            results += _op_rows(reuse, op, "lint", functools.partial(_lint_rows, op, config))
        for failed in compiled:
            twin_compile = failed.backend == "twin" and failed.stage is Stage.COMPILE
            if failed.failed and twin_compile:
                # Its compiler's error is that row's; no twin backend repeats it per case.
                reason = not_built("the twin", f"twin / {failed.check}")
                unbuilt[op.name].update({b.name: reason for b in backends if b.role == "twin"})
    for op in dict.fromkeys(op for op, _ in plan) if op_notes else ():
        note = gradcheck_note(op)  # with or without the compile checks
        if note is not None:
            results.append(note)
    for op, case in plan:
        advance(f"{op.name} {case.name}")
        if reuse is None:
            results += run_case(op, case, backends, settings, unbuilt[op.name])
        else:
            results += reuse.case(op, case, backends, settings, unbuilt[op.name])
    return results


def _lint_rows(op: Op, config: ProjectConfig) -> list[CheckResult]:
    return [lint_result(op, config)]


def _op_rows(
    reuse: Reuse | None, op: Op, check: str, compute: Callable[[], list[CheckResult]]
) -> list[CheckResult]:
    return compute() if reuse is None else reuse.op_rows(op, check, compute)
