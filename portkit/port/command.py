"""Writing a draft: never over an existing twin without ``--force``, whole or not at
all, through clang-format where it is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from portkit.atomic_write import write_atomic
from portkit.errors import PortkitError
from portkit.port.draft import Draft

# clang-format's style when the project has no .clang-format: the example twins' look.
STYLE = "{BasedOnStyle: Google, IndentWidth: 4, ColumnLimit: 100, AccessModifierOffset: -4}"


class TwinExists(PortkitError):
    """The draft would replace a twin a person wrote."""


def formatted(text: str, out: Path) -> str:
    """``text`` through clang-format (the project's style file if it has one), or as it
    is when clang-format is not installed or fails."""
    binary = shutil.which("clang-format")
    if binary is None:
        return text
    style = "file" if any((p / ".clang-format").is_file() for p in out.resolve().parents) else STYLE
    try:
        proc = subprocess.run(
            [binary, f"--style={style}", f"--assume-filename={out.name}"],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return text
    return proc.stdout if proc.returncode == 0 and proc.stdout.strip() else text


def write_draft(draft: Draft, out: Path, force: bool) -> str:
    """Write the draft to ``out``; returns the text written."""
    if out.exists() and not force:
        raise TwinExists(f"{out} exists; pass --force to replace it with the draft")
    if out.is_dir():
        raise TwinExists(f"{out} is a folder; --out names the .cu file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    text = formatted(draft.text, out)
    write_atomic(out, text)
    return text


def gap_report(draft: Draft) -> list[str]:
    """One line per construct left as ``#error`` in the draft."""
    return [gap.report() for gap in draft.gaps]
