"""Uninitialised values in the CPU twin: two check builds whose locals start different.

The check build is compiled twice, with ``-ftrivial-auto-var-init=pattern`` (every
automatic variable the twin does not initialise starts as ``0xFE`` bytes: a NaN in half,
about -1.7e38 in float, a large negative int) and with ``-ftrivial-auto-var-init=zero``.
The check worker runs a launch in the pattern build with shared memory filled with
``0xFF`` bytes, and (the schedule check's second run) in the zero build with shared
memory filled with zeros. A correct twin cannot tell the builds apart; a twin that reads
a local, an accumulator, a register array or a shared element before writing it gives
other bytes, and a third run (zero build, forward order) separates that from an order
dependence. The compiler's own ``-Wuninitialized``/``-Wmaybe-uninitialized`` warnings of
the same build name the variable and the line in the message.

GCC has the option from version 12, clang from 8 (``zero`` from 16); a compiler without
it keeps the other checks and this one is off (``supported`` says so).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from portkit.host_compiler import Compiler

PATTERN, ZERO = "check", "check-zero"  # the two check modes of build.py
INIT_FLAG = {PATTERN: "-ftrivial-auto-var-init=pattern", ZERO: "-ftrivial-auto-var-init=zero"}
# Replaces -w in the check builds: the uninitialised warnings only matter, without the
# caret lines so a warning is one line.
WARNING_FLAGS = ("-Wuninitialized", "-Wmaybe-uninitialized", "-fno-diagnostics-show-caret")
_QUOTE = "[\u2018\u2019'`\"]"
_WARNING = re.compile(
    rf"^(?P<file>[^:\n]+):(?P<line>\d+):\d+: warning: (?:variable )?"
    rf"{_QUOTE}(?P<name>[^\u2019'`\"]+){_QUOTE} "
    r"(?P<what>(?:may be |is )?used uninitialized|is uninitialized when used here)",
    re.M,
)
_DECLARED = re.compile(
    rf"^(?P<file>[^:\n]+):(?P<line>\d+):\d+: note: {_QUOTE}(?P<name>[^\u2019'`\"]+){_QUOTE} "
    r"(?:was )?declared here",
    re.M,
)


@cache
def supported(compiler: Compiler) -> bool:
    """Does ``compiler`` take both ``-ftrivial-auto-var-init`` forms?"""
    with tempfile.TemporaryDirectory(prefix="portkit-autoinit-") as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text("int f() { int x; return x; }\n")
        for flag in INIT_FLAG.values():
            try:
                proc = subprocess.run(
                    [compiler.path, flag, "-fsyntax-only", str(source)],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            except (OSError, subprocess.SubprocessError):
                return False
            if proc.returncode != 0:
                return False
    return True


def mode_flags(mode: str, compiler: Compiler) -> tuple[str, ...]:
    """The extra flags of a check mode: its auto-variable initialisation and warnings."""
    if mode not in INIT_FLAG:
        return ()
    return (INIT_FLAG[mode], *WARNING_FLAGS) if supported(compiler) else WARNING_FLAGS


def warnings_in(log: str) -> list[str]:
    """``twin:LINE: `NAME` may be used uninitialized (declared at line L)`` for each
    uninitialised-use warning the compiler gave on the twin's own lines (or a header
    beside it), once per line."""
    declared = {m["name"]: m["line"] for m in _DECLARED.finditer(log)}
    found: dict[str, str] = {}
    for match in _WARNING.finditer(log):
        if "portkit_" in Path(match["file"]).name or match["file"] == "portkit-cpu-launchers":
            continue  # portkit's own headers and launchers
        where = f"{match['file']}:{match['line']}"
        what = match["what"].replace("is uninitialized when used here", "is used uninitialized")
        text = f"{where}: `{match['name']}` {what}"
        if match["name"] in declared:
            text += f" (declared at line {declared[match['name']]})"
        found.setdefault(where, text)
    return list(found.values())


def without_warnings(log: str) -> str:
    """A compiler log without its warnings and their notes (for a failed check build)."""
    kept, in_warning = [], False
    for line in log.splitlines():
        if ": warning: " in line:
            in_warning = True
            continue
        if ": error: " in line or ": fatal error: " in line:
            in_warning = False
        if in_warning and (": note: " in line or line.startswith(" ")):
            continue
        kept.append(line)
    return "\n".join(kept)


def message(
    expression: str,
    twin: str,
    name: str,
    index: list[int],
    count: int,
    total: int,
    warnings: list[str],
) -> str:
    """The one line of a launch whose output depends on how its locals start."""
    said = (
        "; the compiler says: " + "; ".join(warnings[:3])
        if warnings
        else "; the compiler names no variable: look for a local array, a register array "
        "or a __shared__ element read before any thread writes it"
    )
    return (
        f"{expression} in {twin} reads an uninitialised value: {name} differs at {index} "
        f"({count} of {total} elements) between locals set to 0xFE bytes and shared memory to "
        f"0xFF, and both set to zero{said}"
    )
