"""The outcome of one check: what ``portkit check``, the pytest plugin and the lint and
compile checks all report. It sits at the bottom with the errors, so every layer can
produce results without importing the harness that aggregates them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Outcome(str, Enum):
    """What became of a check row, a benchmark row or an op in a watch re-run: the one
    vocabulary of ``portkit check``, ``bench`` and ``watch``. A ``str`` whose value is what
    ``--json`` writes, so a status read back from JSON (the sanitizer's child, a saved
    benchmark) compares equal to the member.

    PASS: it ran and was right. FAIL: it ran and was wrong (values, a guard, a fault a
    check caught). ERROR: it could not run (the call raised in a benchmark, the op did not
    load in a watch). SKIP: not run here, with the reason in the row. RUNNING: a watch's op
    whose cases have not all finished."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"
    RUNNING = "running"

    def __str__(self) -> str:  # the value, in f-strings too, on every Python
        return self.value

    @property
    def label(self) -> str:
        """How a terminal shows it: a failure in capitals, so it stands out in a table."""
        return "FAIL" if self is Outcome.FAIL else self.value

    @property
    def bad(self) -> bool:
        """A failure or an error: what makes a command exit 1."""
        return self in (Outcome.FAIL, Outcome.ERROR)


class Stage(str, Enum):
    """Which step of checking an op made a row: a field of the row, set where the row is
    built, so that no reader tells a compile row by its label. A ``str`` whose value is
    what ``--json`` and the handoff files write.

    COMPILE: building the kernels (the prototype to PTX, the twin with NVRTC or the host
    compiler). STATIC: reading the code without running a kernel (lint's findings, the
    twin's signature against the traced launches). RUN: running a case (forward,
    backward, gradcheck, prototype against twin) and the rows about running (an op-wide
    gradcheck note, a worker that died)."""

    COMPILE = "compile"
    STATIC = "static"
    RUN = "run"

    def __str__(self) -> str:
        return self.value


COMPILE = "compile"  # the check label of building kernels: "compile" or "compile <arch>"


def compile_check(arch: str | None = None) -> str:
    """The check label of a compile row: ``compile`` (a backend built the op's kernels for
    its cases) or ``compile sm_90`` (``portkit compile``'s build for a GPU architecture).
    A label for people: readers ask the row's ``stage``."""
    return COMPILE if arch is None else f"{COMPILE} {arch}"


@dataclass(frozen=True)
class FailureSite:
    """Where a failure happened, as its producer knew it: the kernel, the block and thread
    (a simulator's fault), the source file and line (a fault's line, a launcher's frame, a
    compiler's first error, a prototype's syntax error). Each part None where unknown."""

    kernel: str | None = None
    block: tuple[int, int, int] | None = None
    thread: tuple[int, int, int] | None = None
    file: str | None = None
    line: int | None = None

    @property
    def where(self) -> str | None:
        """``file:line``, or None without both."""
        return f"{self.file}:{self.line}" if self.file and self.line is not None else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FailureSite:
        """Read back from JSON, where the coordinates became lists."""
        block, thread = data.get("block"), data.get("thread")
        return cls(
            data.get("kernel"),
            _coordinates(block),
            _coordinates(thread),
            data.get("file"),
            data.get("line"),
        )


def _coordinates(value: Sequence[int] | None) -> tuple[int, int, int] | None:
    if value is None:
        return None
    x, y, z = (int(v) for v in value)
    return (x, y, z)


@dataclass(frozen=True)
class ValueMismatch:
    """A compared tensor whose values differ: which one ("output 0", "grad x") and how
    many of its elements lie outside their bound (of the elements judged by that bound:
    all of them, or those float atomics summed)."""

    tensor: str
    mismatched: int
    total: int


def configured(label: str, configuration: str | None) -> str:
    """How a row labels a backend (or a ``vs`` check) that ran under a knob configuration:
    "twin (threads=64)"; the label itself where the op runs one configuration (None)."""
    return label if configuration is None else f"{label} ({configuration})"


def comparison_check(twin: str, configuration: str | None = None) -> str:
    """The check label of a prototype-against-twin row: ``vs twin (threads=64)``."""
    return configured(f"vs {twin}", configuration)


@dataclass(frozen=True)
class CheckResult:
    op: str
    case: str
    backend: str
    check: str
    status: Outcome
    detail: str = ""  # why it failed or was skipped, or a note on a pass
    seconds: float = 0.0
    # Simulator warnings of this check's launches (simt/warning_log.py ``as_dict``):
    # kernel, kind, detail, block, thread, file, line, rule, count. Never a failure.
    warnings: tuple[dict, ...] = ()
    # The largest error over its bound among the tensors compared (below 1 passes);
    # None where nothing was compared. `portkit check --seeds N` reports the worst.
    margin: float | None = None
    # A pass served from the verdict store (checking/verdicts): its key (every file,
    # setting and version the row depends on) is unchanged since it passed. Never a FAIL.
    cached: bool = False
    # The knob configuration the row's backend ran under (checking/configurations.py):
    # "defaults" or "fwd_elems=8", shown in its labels ("twin (fwd_elems=8)"); None where
    # the op runs one configuration. Read this, never the labels' text.
    configuration: str | None = None
    # A prototype-against-twin row (``comparison_check``): the twin's backend, without its
    # configuration; None for every other row.
    compared_with: str | None = None
    # Which step made the row (Stage): read this, never the check label's text.
    stage: Stage = Stage.RUN
    # Where a failure happened (a fault's kernel, block, thread and line), as its producer
    # knew it; None for a pass and where nothing names a place.
    site: FailureSite | None = None
    # The first compared tensor whose values differ; None where no values differ.
    mismatch: ValueMismatch | None = None

    def __post_init__(self) -> None:
        """The labels are made from the fields (``configured``, ``comparison_check``),
        so the fields are what a reader asks and the labels what a person reads."""
        if self.configuration is not None:
            suffix = f" ({self.configuration})"
            if not self.backend.endswith(suffix) or len(self.backend) == len(suffix):
                raise ValueError(f"row backend {self.backend!r} is not configured{suffix}")
        if self.compared_with is not None:
            expected = comparison_check(self.compared_with, self.configuration)
            if self.check != expected:
                raise ValueError(f"comparison row check {self.check!r}, not {expected!r}")

    @property
    def failed(self) -> bool:
        return self.status == Outcome.FAIL

    @property
    def base_backend(self) -> str:
        """The backend without its configuration: "twin" for a row of "twin (threads=64)"."""
        if self.configuration is None:
            return self.backend
        return self.backend[: -len(self.configuration) - 3]  # " (" + configuration + ")"

    @property
    def is_comparison(self) -> bool:
        """A prototype-against-twin row (``vs twin``), not one backend's own check."""
        return self.compared_with is not None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        """A row read back from JSON (``dataclasses.asdict`` of one, as the handoff files,
        the verdict store and ``--json`` write it). Raises KeyError, TypeError or
        ValueError on a row that is not one."""
        row = dict(data)
        row["status"] = Outcome(row["status"])
        row["stage"] = Stage(row["stage"])
        row["warnings"] = tuple(row.get("warnings", ()))
        site, mismatch = row.get("site"), row.get("mismatch")
        row["site"] = FailureSite.from_dict(site) if site is not None else None
        row["mismatch"] = ValueMismatch(**mismatch) if mismatch is not None else None
        return cls(**row)
