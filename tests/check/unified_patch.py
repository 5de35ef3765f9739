"""An applier of unified diffs (``diff -u`` / ``git diff`` output, one file each) that
never fuzzes.

Python's difflib writes unified diffs but cannot apply them; ``patch`` and ``git apply``
are not on every machine the tests run on. Like them it applies a hunk where
its lines are when the file has moved (lines added or removed above it: the nearest place,
after the hunk before it, where every context and removed line matches); unlike them it
never fuzzes: every context and removed line must match exactly. A patch that no longer
applies raises ``PatchDoesNotApply`` naming the patch, the hunk and the first line that
differs at the line its header names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchDoesNotApply(Exception):
    """A patch whose hunks do not match the file they are applied to."""


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based line of the original where the hunk starts
    old_count: int
    lines: tuple[str, ...]  # each starts with " ", "-" or "+" (line ending kept)

    @property
    def old(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def new(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " +"]


def parse(patch: str, name: str) -> list[Hunk]:
    """The hunks of a one-file unified diff, checked against their headers' counts."""
    lines = patch.splitlines(keepends=True)
    hunks: list[Hunk] = []
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        if not lines[i].startswith(("--- ", "+++ ", "diff ", "index ")):
            raise PatchDoesNotApply(f"{name}: line {i + 1} is not a diff header: {lines[i]!r}")
        i += 1
    while i < len(lines):
        head = HUNK.match(lines[i])
        if head is None:
            raise PatchDoesNotApply(f"{name}: line {i + 1} is not a hunk header: {lines[i]!r}")
        old_count = 1 if head.group(2) is None else int(head.group(2))
        new_count = 1 if head.group(4) is None else int(head.group(4))
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("@@"):
            if lines[i].startswith("\\"):  # "\ No newline at end of file"
                raise PatchDoesNotApply(f"{name}: files without a final newline are not supported")
            if lines[i][0] not in " -+":
                raise PatchDoesNotApply(f"{name}: line {i + 1} is not a hunk line: {lines[i]!r}")
            body.append(lines[i])
            i += 1
        hunk = Hunk(int(head.group(1)), old_count, tuple(body))
        if (len(hunk.old), len(hunk.new)) != (old_count, new_count):
            raise PatchDoesNotApply(
                f"{name}: hunk {len(hunks) + 1} has {len(hunk.old)}/{len(hunk.new)} lines, "
                f"its header says {old_count}/{new_count}"
            )
        hunks.append(hunk)
    if not hunks:
        raise PatchDoesNotApply(f"{name}: no hunks")
    return hunks


def apply(original: str, patch: str, name: str) -> str:
    """``original`` with ``patch`` applied; raises PatchDoesNotApply if any hunk differs."""
    source = original.splitlines(keepends=True)
    out: list[str] = []
    at = 0  # lines of source consumed
    for number, hunk in enumerate(parse(patch, name), 1):
        named = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        start = _nearest_match(source, hunk.old, named, at)
        if start < at:
            raise PatchDoesNotApply(f"{name}: hunk {number} overlaps the hunk before it")
        found = source[start : start + hunk.old_count]
        for offset, (want, got) in enumerate(zip(hunk.old, found)):
            if want != got:
                raise PatchDoesNotApply(
                    f"{name}: hunk {number} does not apply at line {start + offset + 1}: "
                    f"the patch expects {want.rstrip()!r}, the file has {got.rstrip()!r}"
                )
        if len(found) < hunk.old_count:
            raise PatchDoesNotApply(
                f"{name}: hunk {number} runs past the end of the file ({len(source)} lines)"
            )
        out += source[at:start] + hunk.new
        at = start + hunk.old_count
    return "".join(out + source[at:])


def _nearest_match(source: list[str], old: list[str], named: int, after: int) -> int:
    """The start nearest ``named`` (not before ``after``) where ``old`` is in ``source``
    line for line; ``named`` itself when it matches or nothing does (the caller then
    names the first line that differs there)."""
    if not old or source[named : named + len(old)] == old:
        return named
    for distance in range(1, len(source) + 1):
        for start in (named - distance, named + distance):
            if after <= start <= len(source) - len(old) and source[start : start + len(old)] == old:
                return start
        if named - distance < after and named + distance > len(source) - len(old):
            break
    return named
