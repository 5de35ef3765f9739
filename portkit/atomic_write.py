"""Files written whole or not at all: a temporary file beside the target, renamed into
place. Twin caches, saved benchmark reports and plots use it, so an interrupted command
never leaves a half-written file for the next one to read."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Temporary files end in this, so a sweep can tell them (left by a killed run) from entries.
TEMP_SUFFIX = ".tmp"


def write_atomic(target: Path, data: bytes | str) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``target``; its folder must exist."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
