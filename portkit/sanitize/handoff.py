"""The sanitizer child's results, handed to its parent through a file: JSON with a
``format`` number, so a parent never misreads what a child of another portkit wrote.

Format 1: ``{"format": 1, "results": [CheckResult as a dict, ...]}`` (the fields of
``portkit.results.CheckResult``; the same rows ``portkit check --json`` prints).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from portkit.atomic_write import write_atomic
from portkit.errors import PortkitError
from portkit.results import CheckResult

FORMAT = 1


class HandoffError(PortkitError):
    """A results file this portkit cannot read: another format, or not JSON at all."""


def write_results(path: Path, results: Sequence[CheckResult]) -> None:
    """Whole or not at all: a parent never reads half a file from a killed child."""
    payload = {"format": FORMAT, "results": [asdict(r) for r in results]}
    write_atomic(path, json.dumps(payload, indent=1))


def read_results(path: Path) -> list[dict] | None:
    """The child's results; None where it wrote none (it crashed or was killed first)."""
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text())
    except ValueError:
        raise HandoffError(f"{path}: the sanitizer child's results are not JSON") from None
    version = payload.get("format") if isinstance(payload, dict) else None
    if version != FORMAT:
        raise HandoffError(
            f"{path}: the sanitizer child's results are in format {version!r}; this portkit "
            f"reads format {FORMAT} (parent and child must be the same portkit)"
        )
    return list(payload.get("results", []))
