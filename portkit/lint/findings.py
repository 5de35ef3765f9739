"""``portkit lint``: what can be known about an op's GPU code without a GPU.

For every op: does each prototype kernel compile for sm_90 with the argument types its
cases launch, and does the twin compile and take what the launcher passes (errors,
build/signature.py); where does a kernel without float64 inputs compute in float64 (an error,
from numba's typed IR, confirmed by the PTX), where does the twin truncate a 64-bit index
or use a generic lambda an older NVRTC refuses (errors), where does a loop do 64-bit index
arithmetic, which launches cannot fill an H100 (warnings); and, side by side for
prototype and twin, the resources each kernel will use on the GPU. Severities:
build/finding.py.

A finding on a line that carries ``# portkit: allow-<kind>`` (e.g. ``allow-float64``),
or that follows a comment line carrying it, is an intended choice and is not reported.
"""

from __future__ import annotations

import linecache
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.build.compile_checks import check_prototype, check_twin, signatures_by_dtype
from portkit.build.finding import Finding, Severity, one_per_line
from portkit.build.signature import signature_findings
from portkit.errors import PortkitError
from portkit.launch.trace import one_knob_changed, record_launches, small_cases
from portkit.lint.twin_lambdas import twin_lambda_findings
from portkit.lint.twin_truncation import truncation_findings
from portkit.results import Outcome

if TYPE_CHECKING:
    from portkit.lint.resources import ResourceUsage
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

# Streaming multiprocessors of an H100 SXM, as PyTorch reported on the device machine.
H100_SMS = 132
__all__ = ["Finding", "LintReport", "Severity", "lint", "lint_op"]


@dataclass(frozen=True)
class ResourceRow:
    op: str
    kernel: str
    dtype: str
    side: str  # "prototype" or "twin"
    usage: ResourceUsage


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    resources: list[ResourceRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "op: why its prototype was not linted"

    def errors(self, warnings_fail: bool = False) -> list[Finding]:
        """The findings that fail the lint: errors, and warnings too if asked."""
        return [f for f in self.findings if f.fails(warnings_fail)]


_PRAGMA = re.compile(r"#\s*portkit:((?:\s+allow-[\w-]+)+)")


def _allowed(path: str, line: int, kind: str) -> bool:
    """``# portkit: allow-<kind> [allow-<kind2> ...]`` on the line itself or on a comment
    line just above it."""

    def allows(text: str) -> bool:
        match = _PRAGMA.search(text)
        return match is not None and f"allow-{kind}" in match.group(1).split()

    above = linecache.getline(path, line - 1).strip()
    return allows(linecache.getline(path, line)) or (above.startswith("#") and allows(above))


def launch_fill_findings(op: Op, sms: int = H100_SMS) -> list[Finding]:
    """Launches of the op's large and GPU-only cases with fewer blocks than the GPU has SMs."""
    findings = []
    for case in op.definition.cases:
        if not (case.large or case.gpu_only):
            continue
        for launch in record_launches(op, case):
            blocks = launch.blocks
            if blocks < sms:
                findings.append(
                    Finding(
                        Severity.WARNING,
                        "launch",
                        op.name,
                        launch.kernel,
                        "",
                        f"launches {blocks} block(s) of {launch.config.threads_per_block} "
                        f"threads for case {case.name}; an H100 has {sms} SMs, so most stay idle",
                        "give each block less work (more, smaller blocks) or split rows",
                    )
                )
    return findings


def knob_value_findings(op: Op) -> list[Finding]:
    """Errors for each declared knob value whose launches a GPU would refuse (too many
    threads, too much shared memory, an empty grid): each other value of each knob, the
    rest at their defaults, traced on the cases that are neither GPU-only nor large. Only a
    tuned table runs such a value, and `portkit tune` would refuse it on a GPU: said here
    first, without one. One finding per value, its first refusing case."""
    findings = []
    for label, value, pinned in one_knob_changed(op):
        for case in small_cases(op):
            try:
                record_launches(op, case, knob_choice=pinned)
            except PortkitError as exc:
                message = f"knob {label} (the others at their defaults), case {case.name}: {exc}"
                fix = f"drop {value!r} from the knob's values, or keep its launches in limits"
                findings.append(Finding(Severity.ERROR, "launch", op.name, "", "", message, fix))
                break
    return findings


def compile_findings(op: Op, config: ProjectConfig) -> list[Finding]:
    """Errors for a prototype kernel or twin that does not compile for sm_90."""
    findings = []
    for result in (check_prototype(op, config), check_twin(op, config)):
        if result is not None and result.status == Outcome.FAIL:
            findings.append(
                Finding(Severity.ERROR, "compile", op.name, result.backend, "", result.detail)
            )
    return findings


def code_findings(
    op: Op,
    signatures: dict[str, dict[str, tuple]] | None = None,
    config: ProjectConfig | None = None,
) -> list[Finding]:
    """The typed-IR findings of every kernel and dtype (float64 arithmetic in a kernel
    without float64 inputs, kept only on lines where that dtype's PTX has a float64
    instruction; int64 index math in loops), one per source line with its dtypes, and
    the launches of the op's large cases that cannot fill an H100."""
    from portkit.lint.numba_ir import ir_findings

    findings = []
    for dtype, kernels in (signatures or signatures_by_dtype(op)).items():
        for kernel, signature in kernels.items():
            raw = ir_findings(kernel, op.kernels[kernel], signature)
            for f in _in_ptx(op, config, kernel, signature, raw):
                if _allowed(f.path, f.line, f.kind):
                    continue
                message = f"{f.message}: `{f.source}`"
                if f.kind == "float64":
                    message = f"float64 arithmetic in a {dtype} kernel: `{f.source}`: {f.message}"
                where = f"{f.path}:{f.line}"
                findings.append(
                    Finding(f.severity, f.kind, op.name, kernel, where, message, f.fix, (dtype,))
                )
    return one_per_line(findings) + launch_fill_findings(op) + knob_value_findings(op)


def _in_ptx(
    op: Op, config: ProjectConfig | None, kernel: str, signature: tuple[Any, ...], raw: list[Any]
) -> list[Any]:
    """The findings of ``raw`` the PTX confirms: a float64 line is kept only where the
    kernel's PTX for this signature has a float64 instruction on it (LLVM folds
    ``float32(-math.inf)`` and ``x * 2.5`` to float32). Without PTX, all are kept."""
    from portkit.build.compile_checks import lineinfo_ptx
    from portkit.lint.ptx import f64_lines

    if not any(f.kind == "float64" for f in raw):
        return raw
    try:
        ptx = lineinfo_ptx(op, config, kernel, signature)
    except Exception:  # the compile check reports a kernel that does not compile
        return raw
    lines = {(os.path.realpath(path), line) for path, line in f64_lines(ptx)}
    return [f for f in raw if f.kind != "float64" or (os.path.realpath(f.path), f.line) in lines]


def remembered_code_findings(
    op: Op, config: ProjectConfig, signatures: dict[str, dict[str, tuple]] | None = None
) -> tuple[list[Finding], bool]:
    """``code_findings`` through the disk cache (lint/cache.py); True when they came
    from it."""
    from portkit.lint import cache

    def compute() -> list[dict]:
        return [f.to_json() for f in code_findings(op, signatures, config)]

    def parse(rows: list[dict]) -> list[Finding]:
        return [Finding.from_json(row) for row in rows]

    return cache.remembered(op, config, compute, parse)


def op_findings(
    op: Op, config: ProjectConfig, signatures: dict[str, dict[str, tuple]] | None = None
) -> tuple[list[Finding], bool]:
    """What ``portkit lint``, the ``lint`` row of ``portkit check`` and the pytest
    ``::lint`` item report for an op that compiles: the code findings (through the
    cache; True when they came from it) and the twin signature findings."""
    findings, cached = remembered_code_findings(op, config, signatures)
    return twin_findings(op) + findings, cached


def twin_findings(op: Op) -> list[Finding]:
    """What the twin's source shows: its signatures against the launches, 32-bit
    truncation, generic lambdas older NVRTC refuses."""
    return signature_findings(op) + truncation_findings(op) + twin_lambda_findings(op)


def lint_op(op: Op, config: ProjectConfig, report: LintReport, resources: bool = True) -> None:
    from portkit.build.compile_checks import mlir_reason

    errors = compile_findings(op, config)
    report.findings += errors
    if errors:
        return  # nothing further is meaningful for code that does not compile
    not_linted = mlir_reason(op)
    if not_linted:  # the twin's checks still apply
        report.skipped.append(f"{op.name}: prototype not linted: {not_linted}")
        report.findings += twin_findings(op)
        return
    signatures = signatures_by_dtype(op) if resources else None
    report.findings += op_findings(op, config, signatures)[0]
    if signatures is not None:
        report.resources += resource_rows(op, signatures, config)


def resource_rows(
    op: Op, signatures: dict[str, dict[str, tuple]], config: ProjectConfig | None = None
) -> list[ResourceRow]:
    """Prototype and twin resources of each kernel and dtype, side by side; the twin's
    from one compile of every instantiation, the program the twin backend runs (ptxas
    allocates a kernel's registers differently when it is compiled alone). With
    ``config``, the prototype's come through the lint cache (``remembered_prototype_usages``)."""
    from portkit.backends.twin.instances import (
        checked_twin_kernels,
        instantiation_for,
        twin_expressions,
    )
    from portkit.lint.resources import prototype_usage, twin_usages

    twins = checked_twin_kernels(op) if op.twin_path is not None else {}
    rows: list[tuple[str, str, tuple, str | None]] = []  # kernel, dtype, signature, twin
    for dtype, kernels in signatures.items():
        for kernel, signature in kernels.items():
            twin, expression = twins.get(kernel), None
            if twin is not None:
                instantiation = instantiation_for(op, twin, dtype)
                if instantiation is not None or not twin.template_params:
                    expression = twin.expression(instantiation)  # else no case launches it
            rows.append((kernel, dtype, signature, expression))
    wanted = [expression for *_, expression in rows if expression is not None]
    program = [*twin_expressions(op), *wanted] if wanted else []
    cache_dir = config.cache_dir if config is not None else None
    usages = (
        twin_usages(op.twin_path, program, cache_dir=cache_dir) if program and op.twin_path else {}
    )
    launched = [(kernel, dtype, signature) for kernel, dtype, signature, _ in rows]
    if config is None:
        mine = {(k, d): prototype_usage(op.kernels[k], sig) for k, d, sig in launched}
    else:
        mine = remembered_prototype_usages(op, config, launched)
    found = []
    for kernel, dtype, _, expression in rows:
        found.append(ResourceRow(op.name, kernel, dtype, "prototype", mine[(kernel, dtype)]))
        if expression is not None:
            found.append(ResourceRow(op.name, kernel, dtype, "twin", usages[expression]))
    return found


def lint(ops: Sequence[Op], config: ProjectConfig, resources: bool = True) -> LintReport:
    report = LintReport()
    for op in ops:
        try:
            lint_op(op, config, report, resources)
        except PortkitError as exc:
            report.findings.append(Finding(Severity.ERROR, "compile", op.name, "", "", str(exc)))
    return report


def remembered_prototype_usages(
    op: Op, config: ProjectConfig, launched: Sequence[tuple[str, str, tuple]]
) -> dict[tuple[str, str], ResourceUsage]:
    """``prototype_usage`` of each (kernel, dtype, signature) launched, through the lint
    cache (lint/cache.py: the kernels, launchers, cases and project files decide the
    signatures and the code; the nvJitLink version the registers): numba's compiles and
    nvJitLink's links were 15 of softmax_warp's 18 s of `portkit lint`, and editing the
    twin changes none of them."""
    from portkit.lint import cache
    from portkit.lint.resources import ResourceUsage, prototype_usage

    def compute() -> list[dict]:
        return [
            {"kernel": k, "dtype": d, "usage": prototype_usage(op.kernels[k], sig).to_json()}
            for k, d, sig in launched
        ]

    def parse(rows: list[dict]) -> dict[tuple[str, str], ResourceUsage]:
        found = {(r["kernel"], r["dtype"]): ResourceUsage.from_json(r["usage"]) for r in rows}
        if set(found) != {(k, d) for k, d, _ in launched}:
            raise ValueError("the entry's kernels are not the ones launched")
        return found

    try:
        from cuda.bindings import nvjitlink

        linker = str(nvjitlink.version())
    except Exception as exc:  # noqa: BLE001 (then prototype_usage says what is missing)
        linker = f"unavailable: {type(exc).__name__}"
    extra = {"resources": 1, "nvjitlink": linker}
    return cache.remembered(op, config, compute, parse, "prototype-resources.json", extra)[0]
