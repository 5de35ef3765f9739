"""A prototype kernel compiled to PTX by numba for one signature, through the disk cache.

numba's ``compile_ptx`` needs no GPU. ``portkit compile``/``check``/``lint``
(build/compile_checks.py) and the simulator's type check before a launch (backends/numba_types.py)
both compile here, so a signature one of them compiled is on disk for the other: its
PTX under the prototype cache's content key (backends/prototype_cache.py). A failure is
never stored on disk.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import portkit.backends.prototype_cache as prototype_cache
from portkit import cache_files
from portkit.simt.numba_check import ARCH, COMPUTE_CAPABILITY, compile_for_arch

if TYPE_CHECKING:
    from pathlib import Path

    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

def ptx_key(op: Op, root: Path) -> str:
    """The prototype cache's content key of the op's kernels compiled to PTX."""
    options = {"check": "compile_ptx", "cc": COMPUTE_CAPABILITY}
    return prototype_cache.cache_key(op.kernels.values(), root, options)


def ptx_cache_folder(op: Op, config: ProjectConfig | None, key: str | None = None) -> Path | None:
    """Where the PTX of this op's checked signatures is kept, or None (cache off)."""
    if config is None or not config.settings.prototype_cache:
        return None
    key = key or ptx_key(op, config.root)
    return prototype_cache.entry_directory(config.cache_dir, op.name, key) / f"ptx-{ARCH}"


def signature_ptx(
    kernel: Any,
    folder: Path | None,
    name: str,
    sig: tuple,
    lineinfo: bool = False,
    ask_driver: bool = True,
) -> tuple[str, bool]:
    """The PTX of ``kernel`` (a dispatcher named ``name``) for ``sig`` (from ``folder``
    when it is there), and whether it came from there. Raises numba's error when the
    kernel does not compile. ``ask_driver=False``: no CUDA driver call, GPU or not."""
    signature = hashlib.sha256(f"{name}{tuple(map(str, sig))}".encode()).hexdigest()
    suffix = "-lineinfo" if lineinfo else ""
    entry = folder / f"{name}-{signature[:20]}{suffix}.ptx" if folder else None
    stored = cache_files.load(entry) if entry is not None else None
    if stored is not None:  # digest-checked: a truncated entry is compiled again
        return stored[0].decode(), True
    ptx = compile_for_arch(kernel.py_func, sig, lineinfo, ask_driver)
    if entry is not None:
        _remember(entry, ptx)
    return ptx, False


def _remember(entry: Path, ptx: str) -> None:
    """Keep the PTX of a signature that compiled; a cache that cannot be written is no
    reason to fail a compile check."""
    try:
        cache_files.store(entry, ptx)
    except OSError:
        pass
