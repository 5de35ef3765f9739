"""Run the GPU checks of some ops under each compute-sanitizer tool, one child per tool.

The child is ``python -m portkit.sanitize.child`` (child.py): it runs the checks through
the harness with exact allocations, line info and, for initcheck, unpoisoned outputs
(``tools.prepare_checks``), and hands its results back in a versioned file (handoff.py),
``<log dir>/<tool>.results.json``, which the parent reads beside the sanitizer's log.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from portkit.results import Outcome
from portkit.sanitize.child import child_command
from portkit.sanitize.findings import Finding, attribute, error_summary, parse_log
from portkit.sanitize.handoff import read_results
from portkit.sanitize.tools import (
    ERROR_EXITCODE,
    find_sanitizer,
    sanitizer_command,
    sanitizer_environment,
)

CHILD_TIMEOUT_S = 600

CLEAN, FOUND, CHECKS_FAILED, CRASHED = "clean", "errors", "checks failed", "crashed"


@dataclass
class ToolRun:
    """One tool's child process and what it reported."""

    tool: str
    command: list[str]
    returncode: int
    seconds: float
    log_path: Path
    output_path: Path
    findings: list[Finding] = field(default_factory=list)
    summary: int | None = None  # compute-sanitizer's own ERROR SUMMARY count
    results: list[dict] = field(default_factory=list)  # the child's check results (handoff)

    @property
    def own_findings(self) -> list[Finding]:
        """Findings in the project's kernels (torch's own kernels are not ours to fix),
        and findings portkit could not place at all: those are never waved through."""
        return [f for f in self.findings if f.op or not (f.kernel or f.file)]

    @property
    def status(self) -> str:
        if self.own_findings or (self.returncode == ERROR_EXITCODE and not self.findings):
            return FOUND
        if self.returncode == 1 or any(r.get("status") == Outcome.FAIL for r in self.results):
            return CHECKS_FAILED
        if self.returncode == 0 or self.returncode == ERROR_EXITCODE:
            return CLEAN
        return CRASHED

    @property
    def failed(self) -> bool:
        return self.status != CLEAN

    def as_dict(self) -> dict:
        return {
            "tool": self.tool,
            "status": self.status,
            "returncode": self.returncode,
            "seconds": round(self.seconds, 3),
            "log": str(self.log_path),
            "output": str(self.output_path),
            "error_summary": self.summary,
            "findings": [f.as_dict() for f in self.findings],
            "results": self.results,
        }


def run_tool(
    tool: str,
    op_names: Sequence[str],
    case_names: Sequence[str],
    kernels_of: Mapping[str, Sequence[str]],
    log_dir: Path,
    cwd: Path,
    timeout: float = CHILD_TIMEOUT_S,
    environment: Mapping[str, str] | None = None,
) -> ToolRun:
    """Run the checks of ``op_names`` under ``tool``; the raw log lands in ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    results = (log_dir / f"{tool}.results.json").resolve()  # the child runs elsewhere
    results.unlink(missing_ok=True)  # a crashed child must not pass off an older run's
    child = child_command(tool, op_names, case_names, results)
    return run_under(
        tool,
        child,
        kernels_of,
        log_dir,
        cwd,
        timeout,
        environment=environment,
        results_file=results,
    )


def run_under(
    tool: str,
    child: Sequence[str],
    kernels_of: Mapping[str, Sequence[str]],
    log_dir: Path,
    cwd: Path,
    timeout: float = CHILD_TIMEOUT_S,
    stream: bool = False,
    environment: Mapping[str, str] | None = None,
    results_file: Path | None = None,
) -> ToolRun:
    """Run the command ``child`` under ``tool`` (``stream``: let its output through;
    ``environment``: variables added to the child's, the session's settings;
    ``results_file``: where the child hands its check results back, handoff.py)."""
    sanitizer = find_sanitizer()
    assert sanitizer is not None, "callers check skip_reason() first"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{tool}.log"
    output_path = log_dir / f"{tool}.check.txt"
    command = sanitizer_command(sanitizer, tool, log_path, child)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            command,
            cwd=cwd,
            env={**sanitizer_environment(), **(environment or {})},
            capture_output=not stream,
            text=True,
            timeout=timeout,
        )
        stdout, stderr = proc.stdout or "", proc.stderr or ""
        returncode, output = proc.returncode, stderr + stdout
    except subprocess.TimeoutExpired as exc:
        returncode = 124
        output = _text(exc.stdout) + _text(exc.stderr) + f"\n[timed out after {timeout:.0f} s]"
    seconds = time.perf_counter() - t0
    output_path.write_text(output)
    results = (read_results(results_file) if results_file else None) or []
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    if not log.strip():  # an old compute-sanitizer without --log-file support prints inline
        log = output
        log_path.write_text(log)
    findings = attribute(parse_log(log, tool), kernels_of)
    summary = error_summary(log)
    return ToolRun(
        tool, list(command), returncode, seconds, log_path, output_path, findings, summary, results
    )


def run_tools(
    tools: Sequence[str],
    op_names: Sequence[str],
    case_names: Sequence[str],
    kernels_of: Mapping[str, Sequence[str]],
    log_dir: Path,
    cwd: Path,
    advance: Callable[[str], None] = lambda label: None,
    environment: Mapping[str, str] | None = None,
) -> list[ToolRun]:
    runs = []
    for tool in tools:
        advance(f"compute-sanitizer --tool {tool}")
        runs.append(
            run_tool(tool, op_names, case_names, kernels_of, log_dir, cwd, environment=environment)
        )
    return runs


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value
