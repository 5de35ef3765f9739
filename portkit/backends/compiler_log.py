"""Where a C++ compiler's log puts its first error, as data for the check row
(results.FailureSite): NVRTC writes ``file(line): error: ...``, GCC and Clang
``file:line:column: error: ...``. The compilers speak text; this is the one place a
twin's compile error is read for its line, so that no reader of the row parses it."""

from __future__ import annotations

import re

from portkit.results import FailureSite

_NVRTC = re.compile(r"^(?P<file>[^\n]+?)\((?P<line>\d+)\): (?:catastrophic )?error\b", re.M)
_GCC = re.compile(r"^(?P<file>[^\n:]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error\b", re.M)


def first_error_site(log: str) -> FailureSite | None:
    """The file and line of the log's first error, or None where it names none."""
    found = [m for m in (_NVRTC.search(log), _GCC.search(log)) if m is not None]
    if not found:
        return None
    first = min(found, key=lambda m: m.start())
    return FailureSite(file=first["file"], line=int(first["line"]))
