"""One ``portkit export`` at a time into one folder: a lock file beside the folder, held
with ``flock`` (the kernel drops it when the process dies, so a killed export leaves no
stale lock to clear by hand)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from portkit.errors import PortkitError


def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.portkit-export.lock"


@contextlib.contextmanager
def export_lock(out: Path) -> Iterator[None]:
    """Hold the lock of ``out`` (its parent must exist); a second holder gets a one-line
    PortkitError at once rather than waiting behind a compile."""
    path = lock_path(out)
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise PortkitError(f"another portkit export is writing {out}") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed that file as it finished: lock the new one
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # before unlocking: a waiter then sees a file that is gone
        os.close(fd)
