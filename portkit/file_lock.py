"""A folder's lock, held with ``flock`` on the folder itself: shared for readers,
exclusive for a writer. No lock file is left beside the entries, and the kernel drops
the lock when its process dies, so a killed run leaves nothing to clear by hand. Where
the folder cannot be opened or the platform has no ``flock``, the block runs unlocked."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(folder: Path, shared: bool = False) -> Iterator[None]:
    """Hold ``folder``'s lock (shared or exclusive) for the block."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield  # a folder that cannot be opened cannot be written by anyone either
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
