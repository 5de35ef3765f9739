"""The outcome of one check: what ``portkit check``, the pytest plugin and the lint and
compile checks all report. It sits at the bottom with the errors, so every layer can
produce results without importing the harness that aggregates them."""

from __future__ import annotations

from dataclasses import dataclass

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class CheckResult:
    op: str
    case: str
    backend: str
    check: str
    status: str
    detail: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == FAIL
