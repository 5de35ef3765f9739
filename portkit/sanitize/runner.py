"""Run the GPU checks of some ops under each compute-sanitizer tool, one child per tool.

The child is ``python -m portkit.cli check OPS --backend twin --backend numba
--no-compile --under-sanitizer TOOL``: a fresh process, so a kernel that faults cannot
poison the parent's CUDA context, and so the sanitizer sees every launch from the
first. ``--under-sanitizer`` makes the child allocate each tensor exactly (no guard
zones: memcheck must see an overrun land outside an allocation) and compile numba
prototypes with line info; for initcheck it also leaves outputs unpoisoned, so a kernel
that reads an output element before writing it reads memory nobody initialised.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from portkit.results import Outcome
from portkit.sanitize.findings import Finding, attribute, error_summary, parse_log
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
    results: list[dict] = field(default_factory=list)  # the child's check results (--json)

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


def child_command(tool: str, op_names: Sequence[str], case_names: Sequence[str]) -> list[str]:
    cases = [arg for name in case_names for arg in ("--case", name)]
    return [
        sys.executable,
        "-m",
        "portkit.cli",
        "check",
        *op_names,
        "--backend",
        "twin",
        "--backend",
        "numba",
        "--no-compile",
        "--under-sanitizer",
        tool,
        "--json",
        *cases,
    ]


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
    child = child_command(tool, op_names, case_names)
    return run_under(tool, child, kernels_of, log_dir, cwd, timeout, environment=environment)


def run_under(
    tool: str,
    child: Sequence[str],
    kernels_of: Mapping[str, Sequence[str]],
    log_dir: Path,
    cwd: Path,
    timeout: float = CHILD_TIMEOUT_S,
    stream: bool = False,
    environment: Mapping[str, str] | None = None,
) -> ToolRun:
    """Run the command ``child`` under ``tool`` (``stream``: let its output through;
    ``environment``: variables added to the child's, the session's settings)."""
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
        results = _child_results(stdout)
    except subprocess.TimeoutExpired as exc:
        returncode, results = 124, []
        output = _text(exc.stdout) + _text(exc.stderr) + f"\n[timed out after {timeout:.0f} s]"
    seconds = time.perf_counter() - t0
    output_path.write_text(output)
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


def _child_results(stdout: str) -> list[dict]:
    """The check results the child printed with --json (its last line-initial '{')."""
    import json

    start = stdout.rfind("\n{")
    start = 0 if start < 0 else start + 1
    try:
        return list(json.loads(stdout[start:]).get("results", []))
    except (ValueError, AttributeError):
        return []
