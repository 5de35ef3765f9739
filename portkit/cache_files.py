"""Cache entries that check what they serve, and the cache folder they live in.

An entry is an artifact (a cubin, a PTX file, a CPU twin library, lint findings) with a
manifest beside it, ``<artifact>.manifest.json``: the artifact's SHA-256 and size and
whatever the caller keeps with it (symbols). Both are written whole (atomic_write); the
manifest last, so it is the commit marker, and both under the folder's lock (file_lock),
so concurrent builders of one entry never leave a reader a mismatched pair. Reading
hashes the artifact again: a truncated or overwritten artifact is a miss, said in one
line on stderr, and the caller rebuilds it.

The cache folder itself may be unusable (a file, or not writable): ``usable_folder`` then
says so once, naming the setting that chose it, and hands out a private temporary folder
for this process, so commands run on without a cache instead of failing every op; a
subfolder (``twins-cpu/``) likewise, through ``usable_subfolder``.
Temporary files and build folders a killed run left behind are swept after an hour.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from portkit.atomic_write import TEMP_SUFFIX, write_atomic
from portkit.file_lock import locked

MANIFEST_SUFFIX = ".manifest.json"
BUILD_PREFIX = ".build-"  # temporary build folders: <folder>/.build-XXXX
STALE_SECONDS = 3600  # no build takes an hour; anything older was left by a killed run

_swept: set[Path] = set()


def files_digest(paths: Iterable[Path], root: Path | None = None) -> str:
    """SHA-256 of each file's name (relative to ``root`` where inside it) and bytes, in
    order; a file that cannot be read counts as missing."""
    digest = hashlib.sha256()
    for path in paths:
        name = str(path)
        if root is not None and path.is_relative_to(root):
            name = path.relative_to(root).as_posix()
        try:
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError:
            digest.update(name.encode() + b"\0missing\0")
    return digest.hexdigest()


@functools.cache
def package_digest() -> str:
    """Every source file of portkit's package (``.py``, ``.h``, ``.cuh``), for the keys of
    what portkit's own code decides (lint findings, verdicts); once per process."""
    package = Path(__file__).resolve().parent
    return files_digest(
        sorted(p for p in package.rglob("*") if p.suffix in (".py", ".h", ".cuh")), package
    )


def manifest_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + MANIFEST_SUFFIX)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def store(artifact: Path, data: bytes | str | Path, meta: dict[str, Any] | None = None) -> None:
    """Keep ``data`` (bytes, text, or a finished file that is moved into place) as
    ``artifact`` with its manifest. Raises OSError when the folder cannot be written.
    The artifact and its manifest change under the folder's exclusive lock, so a reader
    never sees one writer's artifact with another's manifest (two builds of one entry
    need not be byte-identical: a CPU twin's debug information names its build folder)."""
    artifact.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(artifact.parent)
    raw = data.read_bytes() if isinstance(data, Path) else data
    raw = raw.encode() if isinstance(raw, str) else raw
    record = {"sha256": digest(raw), "size": len(raw), "meta": meta or {}}
    with locked(artifact.parent):
        if isinstance(data, Path):
            os.replace(data, artifact)
        else:
            write_atomic(artifact, raw)
        write_atomic(manifest_path(artifact), json.dumps(record, indent=1))


def load(artifact: Path) -> tuple[bytes, dict[str, Any]] | None:
    """(bytes, meta) of an entry whose artifact matches its manifest; None for a miss.
    A damaged entry is reported in one line on stderr and removed."""
    with locked(artifact.parent, shared=True):  # no writer is between artifact and manifest
        found = _read(artifact)
    if not isinstance(found, str):
        return found
    with locked(artifact.parent):  # another process may have rebuilt it since: look again
        found = _read(artifact)
        if isinstance(found, str):
            _discard(artifact, found)
            return None
    return found


def _read(artifact: Path) -> tuple[bytes, dict[str, Any]] | None | str:
    """The entry, None if there is none, or why it is damaged."""
    manifest = manifest_path(artifact)
    if not manifest.is_file():
        return None  # never stored, or its writer was killed before committing
    try:
        record = json.loads(manifest.read_text())
        expected, meta = record["sha256"], record.get("meta", {})
        data = artifact.read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable ({type(exc).__name__}: {exc})"
    if digest(data) != expected:
        return f"digest mismatch ({len(data)} bytes, manifest says {record.get('size')})"
    return data, meta


def _discard(artifact: Path, why: str) -> None:
    notice(f"cache entry {artifact} is damaged: {why}; rebuilding it")
    for path in (manifest_path(artifact), artifact):
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass  # the rebuild overwrites it, or runs without the cache


def notice(line: str) -> None:
    """One line on stderr, for what the user should know but is not a failure."""
    print(f"portkit: {line}", file=sys.stderr, flush=True)


def sweep_stale(folder: Path, older_than: float = STALE_SECONDS) -> None:
    """Remove the temporary files and build folders in ``folder`` older than
    ``older_than`` seconds (left by killed runs); once per folder and process."""
    if folder in _swept:
        return
    _swept.add(folder)
    cutoff = time.time() - older_than
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or not (
            name.startswith(BUILD_PREFIX) or name.endswith(TEMP_SUFFIX)
        ):
            continue
        try:
            if entry.lstat().st_mtime >= cutoff:
                continue  # perhaps another process's build, still running
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
        except OSError:
            continue


# functools.cache is not atomic: two threads asking at once (twin-cpu's two check builds
# compile side by side) would each probe, and each say an unusable folder.
_PROBING = threading.Lock()


def usable_folder(folder: Path, setting: str) -> Path:
    """``folder`` when it can be made and written; else, said once on stderr naming the
    folder and ``setting`` (what chose it), a private temporary folder removed at exit."""
    with _PROBING:
        return _usable_folder(folder, setting)


def usable_subfolder(folder: Path) -> Path:
    """A cache subfolder (``twins-cpu/``) when it can be made and written; else, said once,
    a private temporary one for this process: an unusable subfolder is no fault of an op."""
    with _PROBING:
        return _usable_subfolder(folder)


@functools.cache
def _usable_folder(folder: Path, setting: str) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe.", suffix=TEMP_SUFFIX)
        os.close(fd)
        os.unlink(probe)
        return folder
    except OSError as exc:
        fallback = Path(tempfile.mkdtemp(prefix="portkit-cache-"))
        atexit.register(shutil.rmtree, fallback, ignore_errors=True)
        reason = f"{type(exc).__name__}: {exc.strerror or exc}"
        notice(
            f"cache folder {folder} ({setting}) is not usable ({reason}); running without the cache"
        )
        return fallback


@functools.cache
def _usable_subfolder(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe.", suffix=TEMP_SUFFIX)
        os.close(fd)
        os.unlink(probe)
        os.listdir(folder)  # readable too: entries are looked up in it
        return folder
    except OSError as exc:
        fallback = Path(tempfile.mkdtemp(prefix=f"portkit-{folder.name}-"))
        atexit.register(shutil.rmtree, fallback, ignore_errors=True)
        reason = f"{type(exc).__name__}: {exc.strerror or exc}"
        if folder.exists() and not folder.is_dir():
            reason = "a file, not a folder"
        notice(f"cache folder {folder} is not usable ({reason}); skipping it for this run")
        return fallback
