"""What a lint finding is, and the one severity model every consumer shares.

An ``ERROR`` is a finding that changes results (float64 arithmetic in a lower-precision
kernel that the PTX really does in float64, a twin whose parameters do not match what
the launcher passes, a tensor size handed to a 32-bit parameter) or code that does not
compile: it fails ``portkit lint``, ``portkit check`` and the pytest ``::lint`` item
alike. A ``WARNING`` is a speed or robustness hint: it fails none of them unless the
project asks for it (``[tool.portkit] lint-warnings = "error"``) or ``--strict`` does.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    severity: Severity
    kind: str  # "compile", "signature", "float64", "int64-index", "launch"
    op: str
    kernel: str
    where: str  # "path:line" or ""
    message: str
    fix: str = ""
    dtypes: tuple[str, ...] = ()  # the dtypes whose kernels show it ("" where none apply)

    def fails(self, warnings_fail: bool) -> bool:
        return self.severity is Severity.ERROR or warnings_fail

    def line(self) -> str:
        """One line: ``softmax.py:42 float64 arithmetic ... [float32, float16]``."""
        dtypes = f" [{', '.join(self.dtypes)}]" if self.dtypes else ""
        where = f"{self.where} " if self.where else ""
        return f"{where}{self.message}{dtypes}"

    def to_json(self) -> dict:
        row = dataclasses.asdict(self)
        row["severity"] = self.severity.value
        row["dtypes"] = list(self.dtypes)
        return row

    @classmethod
    def from_json(cls, row: dict) -> Finding:
        """The inverse of ``to_json``; ``ValueError``/``KeyError``/``TypeError`` on a row
        that is not one (the findings cache reads it back from disk)."""
        fields = {f.name: row[f.name] for f in dataclasses.fields(cls)}
        fields["severity"] = Severity(fields["severity"])
        fields["dtypes"] = tuple(fields["dtypes"])
        texts = [v for k, v in fields.items() if k not in ("severity", "dtypes")]
        if not all(isinstance(v, str) for v in [*texts, *fields["dtypes"]]):
            raise ValueError("a finding field is not text")
        return cls(**fields)


def one_per_line(findings: Iterable[Finding]) -> list[Finding]:
    """Findings of one kind on one source line, found in several dtypes (or kernels that
    share a device function), become one finding that lists the dtypes. The first
    dtype's message stands for all: it differs only in the type names."""
    merged: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.kind, f.op, f.where) if f.where else (f.kind, f.op, f.kernel, f.message)
        first = merged.get(key)
        if first is None:
            merged[key] = f
            continue
        kernels = list(dict.fromkeys([*first.kernel.split(", "), f.kernel]))
        severities = (first.severity, f.severity)
        merged[key] = dataclasses.replace(
            first,
            severity=Severity.ERROR if Severity.ERROR in severities else first.severity,
            kernel=", ".join(kernels),
            dtypes=tuple(dict.fromkeys([*first.dtypes, *f.dtypes])),
        )
    return list(merged.values())
