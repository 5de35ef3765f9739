"""``portkit lint``: what can be known about an op's GPU code without a GPU.

For every op: does each prototype kernel compile for sm_90 with the argument types its
cases launch, and does the twin compile (errors); where does a float32 kernel compute
in float64, and where does a loop do 64-bit index arithmetic (warnings, from numba's
typed IR); which launches cannot fill an H100 (warnings); and, side by side for
prototype and twin, the resources each kernel will use on the GPU.

A finding on a line that carries ``# portkit: allow-<kind>`` (e.g. ``allow-float64``),
or that follows a comment line carrying it, is an intended choice and is not reported.
"""

from __future__ import annotations

import dataclasses
import linecache
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from portkit.errors import PortkitError
from portkit.launch.trace import launch_signatures, record_launches
from portkit.lint.compile import check_prototype, check_twin
from portkit.results import FAIL

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

# Streaming multiprocessors of an H100 SXM, as PyTorch reported on the device machine.
H100_SMS = 132
ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Finding:
    severity: str  # ERROR or WARNING
    kind: str  # "compile", "float64", "int64-index", "launch"
    op: str
    kernel: str
    where: str  # "path:line" or ""
    message: str
    fix: str = ""


FINDING_FIELDS = tuple(f.name for f in dataclasses.fields(Finding))


@dataclass(frozen=True)
class ResourceRow:
    op: str
    kernel: str
    dtype: str
    side: str  # "prototype" or "twin"
    usage: object  # portkit.lint.resources.ResourceUsage


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    resources: list[ResourceRow] = field(default_factory=list)

    def errors(self, strict: bool = False) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR or strict]


_PRAGMA = re.compile(r"#\s*portkit:((?:\s+allow-[\w-]+)+)")


def _allowed(path: str, line: int, kind: str) -> bool:
    """``# portkit: allow-<kind> [allow-<kind2> ...]`` on the line itself or on a comment
    line just above it."""

    def allows(text: str) -> bool:
        match = _PRAGMA.search(text)
        return bool(match) and f"allow-{kind}" in match.group(1).split()

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
                        WARNING,
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


def compile_findings(op: Op, config: ProjectConfig) -> list[Finding]:
    """Errors for a prototype kernel or twin that does not compile for sm_90."""
    findings = []
    for result in (check_prototype(op, config), check_twin(op, config)):
        if result is not None and result.status == FAIL:
            findings.append(Finding(ERROR, "compile", op.name, result.backend, "", result.detail))
    return findings


def signatures_by_dtype(op: Op) -> dict[str, dict[str, tuple]]:
    return {dtype: launch_signatures(op, dtype) for dtype in op.definition.dtypes}


def code_findings(op: Op, signatures: dict[str, dict[str, tuple]] | None = None) -> list[Finding]:
    """Warnings from the typed IR of every kernel (float64 in float32 kernels, int64
    index math in loops) and from the launches of the op's large cases."""
    from portkit.lint.numba_ir import ir_findings

    findings = []
    for kernels in (signatures or signatures_by_dtype(op)).values():
        for kernel, signature in kernels.items():
            for f in ir_findings(kernel, op.kernels[kernel], signature):
                if not _allowed(f.path, f.line, f.kind):
                    where = f"{f.path}:{f.line}"
                    message = f"{f.message}: `{f.source}`"
                    findings.append(
                        Finding(f.severity, f.kind, op.name, kernel, where, message, f.fix)
                    )
    return findings + launch_fill_findings(op)


def remembered_code_findings(
    op: Op, config: ProjectConfig, signatures: dict[str, dict[str, tuple]] | None = None
) -> tuple[list[Finding], bool]:
    """``code_findings`` through the disk cache (lint/cache.py); True when they came
    from it."""
    from portkit.lint import cache

    def compute() -> list[dict]:
        return [dataclasses.asdict(f) for f in code_findings(op, signatures)]

    def parse(rows: list[dict]) -> list[Finding]:
        findings = [Finding(**{k: row[k] for k in FINDING_FIELDS}) for row in rows]
        if not all(isinstance(v, str) for f in findings for v in dataclasses.astuple(f)):
            raise ValueError("a finding field is not text")
        return findings

    return cache.remembered(op, config, compute, parse)


def lint_op(op: Op, config: ProjectConfig, report: LintReport, resources: bool = True) -> None:
    errors = compile_findings(op, config)
    report.findings += errors
    if errors:
        return  # nothing further is meaningful for code that does not compile
    signatures = signatures_by_dtype(op) if resources else None
    report.findings += remembered_code_findings(op, config, signatures)[0]
    if signatures is not None:
        for dtype, kernels in signatures.items():
            for kernel, signature in kernels.items():
                report.resources += resource_rows(op, kernel, dtype, signature)


def resource_rows(op: Op, kernel: str, dtype: str, signature: tuple) -> list[ResourceRow]:
    from portkit.backends.twin.backend import C_SCALAR_OF_DTYPE, checked_twin_kernels
    from portkit.lint.resources import prototype_usage, twin_usage

    rows = [
        ResourceRow(
            op.name, kernel, dtype, "prototype", prototype_usage(op.kernels[kernel], signature)
        )
    ]
    if op.has_twin:
        twin_kernel = checked_twin_kernels(op)[kernel]
        expression = twin_kernel.expression(C_SCALAR_OF_DTYPE[dtype])
        rows.append(
            ResourceRow(op.name, kernel, dtype, "twin", twin_usage(op.twin_path, expression))
        )
    return rows


def lint(ops: Sequence[Op], config: ProjectConfig, resources: bool = True) -> LintReport:
    report = LintReport()
    for op in ops:
        try:
            lint_op(op, config, report, resources)
        except PortkitError as exc:
            report.findings.append(Finding(ERROR, "compile", op.name, "", "", str(exc)))
    return report
