"""Simulator warnings: what the CUDA C++ guide leaves undefined but every GPU since Volta
executes deterministically and correctly (docs/simulator.md, "One rule for red").

A report is an error (``SimulationFault``) when a GPU can produce a wrong,
schedule-dependent or missing result, a fault or a hang; otherwise it is a
``SimWarning``: kept per launch with the kernel, thread, line and the rule that
applies, counted in the summaries, never a failure unless strict mode is on
(``[tool.portkit] strict = true``, ``--strict``), which raises the same
``SimulationFault`` the report was before the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from portkit.simt.records import Place

# The rule behind each warning kind, as the reports print it.
RULES = {
    "barrier-after-exit": (
        "threads that returned count as arrived at a block barrier: PTX's barrier.sync "
        "and barrier.red wait for the non-exited threads only (the exited cast no vote)"
    ),
    "uninitialised-read": (
        "an uninitialised value is an error only when used (stored to global memory, "
        "branched on, an index, an address, an atomic's operand); loaded and dropped it "
        "cannot change a result (MemorySanitizer's rule)"
    ),
    "same-value-race": (
        "threads storing the same value to one element leave that value whichever "
        "lands last"
    ),
    "atomic-read-race": (
        "a read racing with other threads' atomics: confirmed by a second schedule "
        "(blocks and threads reversed), whose outputs were the same bits"
    ),
}


class SimulatorWarning(UserWarning):
    """A simulator warning as a Python warning (the numba drop-in, the pytest plugin)."""


@dataclass
class SimWarning:
    """One warning of one launch; ``count``: how often it happened at that line."""

    kernel: str
    kind: str
    detail: str
    place: Place | None
    other: Place | None = None
    count: int = 1

    @property
    def rule(self) -> str:
        return RULES.get(self.kind, "")

    def describe(self) -> str:
        """Several lines: kernel and detail, where, the other access, the rule."""
        times = f" ({self.count} times)" if self.count > 1 else ""
        lines = [f"warning [{self.kind}] kernel {self.kernel}: {self.detail}{times}"]
        if self.place is not None:
            lines.append(f"  at {self.place.describe()}")
        if self.other is not None:
            lines.append(f"  other: {self.other.describe()}")
        lines.append(f"  rule: {self.rule}; --strict makes it an error")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """The warning as ``--json`` and ``CheckResult.warnings`` hold it."""
        place = self.place
        return {
            "kernel": self.kernel,
            "kind": self.kind,
            "detail": self.detail,
            "block": list(place.block) if place else None,
            "thread": list(place.thread) if place else None,
            "file": place.file if place else "",
            "line": place.line if place else 0,
            "rule": self.rule,
            "count": self.count,
        }

    def one_line(self) -> str:
        """Kernel, kind, thread and line: a result row's note or a pytest warning."""
        where = ""
        if self.place is not None:
            where = (
                f" at block {self.place.block} thread {self.place.thread} "
                f"{self.place.file}:{self.place.line}"
            )
        times = f" ({self.count} times)" if self.count > 1 else ""
        return f"[{self.kind}] kernel {self.kernel}: {self.detail}{where}{times}"


class WarningLog:
    """A launch's warnings, one per (kind, source line): the first place, and a count."""

    def __init__(self) -> None:
        self.warnings: list[SimWarning] = []
        self._seen: dict[tuple, SimWarning] = {}

    def add(self, warning: SimWarning) -> None:
        place = warning.place
        line = (place.file, place.line) if place else ("", 0)
        key = (warning.kernel, warning.kind, *line)
        found = self._seen.get(key)
        if found is not None:
            found.count += 1
            return
        self._seen[key] = warning
        self.warnings.append(warning)
