"""The rebuild log's evidence: which twins a run compiled. Both twin builders keep their
output in the cache folder under a name made of the op and a hash of everything that
changes the binary (``<op>-<arch>-<key>.cubin``, ``<op>-<mode>-<key>.so``), so an entry
that appears during a run is a compile, and an unchanged twin adds none."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

# cache sub-folder -> what compiled there
TWIN_CACHES = {"twins": "twin", "twins-cpu": "twin-cpu"}
BINARY_SUFFIXES = (".cubin", ".so")


def twin_cache_entries(cache_dir: Path) -> set[Path]:
    found: set[Path] = set()
    for folder in TWIN_CACHES:
        where = cache_dir / folder
        if where.is_dir():
            found |= {p for p in where.iterdir() if p.suffix in BINARY_SUFFIXES}
    return found


def compiled_since(before: set[Path], cache_dir: Path) -> list[str]:
    """ "op (twin-cpu check)" for each twin binary written since ``before`` was taken."""
    built = []
    for path in sorted(twin_cache_entries(cache_dir) - before):
        # an op's name has no "-"; a variant may ("check-zero", the twin-cpu zero build)
        op, rest = path.stem.split("-", 1)
        variant = rest.rsplit("-", 1)[0]
        built.append(f"{op} ({TWIN_CACHES[path.parent.name]} {variant})")
    return built


def digests(paths: Iterable[Path]) -> dict[Path, str]:
    """Each file's content digest ("" for a file that went away)."""
    found = {}
    for path in paths:
        try:
            found[path] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            found[path] = ""
    return found
