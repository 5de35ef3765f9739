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


def write_draft(draft: Draft, out: Path, force: bool, prototypes_dir: Path | None = None) -> str:
    """Write the draft to ``out``; returns the text written. Only ever a regular file of
    this user's, whole (a temporary file renamed into place), never a prototype."""
    refuse_target(out, force, prototypes_dir)
    text = formatted(draft.text, out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, text)
    except OSError as exc:  # a read-only folder, a full disk: one line, nothing written
        raise PortkitError(f"cannot write {out}: {exc.strerror or exc}") from None
    return text


def refuse_target(out: Path, force: bool, prototypes_dir: Path | None) -> None:
    """What --out may not name: an existing file without --force, and even with it a
    folder, a FIFO or device (the write would block or feed it), a symbolic link (the
    link, not its target, would be replaced), another user's file, or a prototype."""
    import os
    import stat

    if out.suffix == ".py" or (prototypes_dir is not None and _is_prototype(out, prototypes_dir)):
        raise TwinExists(
            f"{out} is a Python file (a prototype or module); --out names the .cu file to write"
        )
    try:
        info = out.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PortkitError(f"cannot write {out}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise TwinExists(f"{out} is a folder; --out names the .cu file to write")
    if not force:
        raise TwinExists(f"{out} exists; pass --force to replace it with the draft")
    if stat.S_ISLNK(info.st_mode):
        raise TwinExists(f"{out} is a symbolic link; --out names the file itself")
    if not stat.S_ISREG(info.st_mode):
        raise TwinExists(f"{out} is not a regular file (a FIFO, socket or device); not replaced")
    if info.st_uid != os.geteuid():
        raise TwinExists(f"{out} belongs to another user; not replaced")


def _is_prototype(out: Path, prototypes_dir: Path) -> bool:
    """Whether ``out`` is (a link to) a file of the prototypes folder ending in .py."""
    try:
        real = out.resolve()
    except (OSError, RuntimeError):
        return False
    return real.suffix == ".py" and real.parent == prototypes_dir.resolve()


def gap_report(draft: Draft) -> list[str]:
    """One line per construct left as ``#error`` in the draft."""
    return [gap.report() for gap in draft.gaps]
