"""The outcome of one check: what ``portkit check``, the pytest plugin and the lint and
compile checks all report. It sits at the bottom with the errors, so every layer can
produce results without importing the harness that aggregates them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Outcome(str, Enum):
    """A check's status. A ``str`` whose value is what ``--json`` writes, so the output
    stays ``"pass"``/``"fail"``/``"skip"`` and a status read back from JSON (the
    sanitizer's child) compares equal to the member."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"

    def __str__(self) -> str:  # the value, in f-strings too, on every Python
        return self.value


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

    @property
    def failed(self) -> bool:
        return self.status == Outcome.FAIL
