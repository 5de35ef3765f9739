"""The draft's honest gaps: a construct it cannot translate is an ``#error`` at its
place, naming the construct and the prototype line, and the command lists them."""

from __future__ import annotations

import ast
from dataclasses import dataclass


class Untranslated(Exception):
    """A construct the draft cannot translate: becomes an ``#error`` line."""

    def __init__(self, construct: str, node: ast.AST | None = None) -> None:
        super().__init__(construct)
        self.construct = construct
        self.node = node


@dataclass
class Gap:
    construct: str
    file: str
    line: int
    function: str = ""  # "kernel k" or "device function f" it sits in ("": in the name)

    def report(self) -> str:
        """The line ``portkit port`` prints for it."""
        inside = f"{self.function}: " if self.function else ""
        return f"{self.file}:{self.line}: {inside}{self.construct} is not translated"

    def directive(self) -> str:
        text = f"portkit port: {self.construct} at {self.file}:{self.line} is not translated"
        return '#error "' + text.replace("\\", "\\\\").replace('"', "'") + '"'
