"""The four compute-sanitizer tools and the settings that make them work with PyTorch.

Each setting is there for a measured reason (docs/sanitizer.md has the details):

- ``PYTORCH_NO_CUDA_MEMORY_CACHING=1``: with torch's caching allocator a small overrun
  stays inside one of its blocks, which memcheck counts as valid memory;
- ``--report-api-errors no``: cuda.bindings probes ``cuGetProcAddress`` for entry points
  the driver lacks, 34 "errors" per run that are not the kernels' fault;
- ``--error-exitcode``: a distinct exit status when the tool found something, so a child
  whose checks passed but whose kernels misbehaved still fails;
- ``--print-limit``: a broken kernel reports every thread; a hundred rows say enough;
- ``--target-processes all``: the checks may run in a child of the process started;
- racecheck ``--racecheck-report hazard``: one row per hazard with both threads.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from portkit.errors import PortkitError
from portkit.project.environment import child_environment, tool_path

if TYPE_CHECKING:
    from portkit.backends.base import Backend
    from portkit.checking.harness import CheckSettings

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
CHOICES = (*TOOLS, "all")
ERROR_EXITCODE = 86  # anything but 0/1/2 (portkit's own) and 124/137 (timeouts, kills)
PRINT_LIMIT = 100
TOOL_OPTIONS = {
    "memcheck": (),
    "racecheck": ("--racecheck-report", "hazard"),
    "initcheck": (),
    "synccheck": (),
}
EXIT_SKIPPED = 0  # a skipped sanitizer tier does not fail the command: it says why


def expand(names: Sequence[str]) -> list[str]:
    """The tools named by ``--sanitize`` (repeatable; ``all`` is every tool), in order."""
    tools: list[str] = []
    for name in names:
        if name not in CHOICES:
            raise PortkitError(f"unknown sanitizer tool {name!r}; tools: {', '.join(CHOICES)}")
        for tool in TOOLS if name == "all" else (name,):
            if tool not in tools:
                tools.append(tool)
    return tools


def find_sanitizer() -> Path | None:
    """compute-sanitizer on PATH, or in the CUDA toolkit's usual places."""
    found = shutil.which("compute-sanitizer")
    if found:
        return Path(found)
    for root in (tool_path("CUDA_HOME"), tool_path("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidate = Path(root) / "bin" / "compute-sanitizer"
            if candidate.is_file():
                return candidate
    return None


def skip_reason(has_gpu: bool | None = None) -> str | None:
    """Why the sanitizer tier cannot run here, or None."""
    if find_sanitizer() is None:
        return (
            "compute-sanitizer was not found (not on PATH, nor in $CUDA_HOME/bin or "
            "/usr/local/cuda/bin); it ships with the CUDA toolkit"
        )
    if has_gpu is None:
        from portkit.backends.base import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
    else:
        reason = None if has_gpu else "no CUDA GPU visible to PyTorch on this machine"
    return reason


def sanitizer_command(
    sanitizer: Path, tool: str, log_file: Path, child: Sequence[str]
) -> list[str]:
    """The command line that runs ``child`` under ``tool``."""
    return [
        str(sanitizer),
        "--tool",
        tool,
        "--report-api-errors",
        "no",
        "--error-exitcode",
        str(ERROR_EXITCODE),
        "--print-limit",
        str(PRINT_LIMIT),
        "--target-processes",
        "all",
        *TOOL_OPTIONS[tool],
        "--log-file",
        str(log_file),
        *child,
    ]


def sanitizer_environment() -> dict[str, str]:
    return child_environment(
        PYTORCH_NO_CUDA_MEMORY_CACHING="1",
        PYTORCH_CUDA_ALLOC_CONF=None,  # expandable segments give false reports
        PYTHONUNBUFFERED="1",
        COLUMNS="200",
    )


def prepare_checks(tool: str, backends: Iterable[Backend]) -> CheckSettings:
    """What running under ``tool`` asks of the checks, for the child of ``portkit check
    --sanitize`` and pytest's ``--portkit-under-sanitizer`` alike: exact allocations (no
    guard zones: memcheck must see an overrun land outside an allocation), outputs left
    unpoisoned under initcheck (a read before the write is the bug it reports), and line
    info wherever a backend can compile with it, so findings name source lines."""
    from portkit.checking.harness import CheckSettings

    for backend in backends:
        if backend.has_line_info:
            backend.lineinfo = True
    return CheckSettings.under_sanitizer(tool)
