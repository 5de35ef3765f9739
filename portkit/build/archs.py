"""Compile a twin ahead of time for several GPU architectures: a cubin per architecture
and the PTX of the newest one (the driver compiles it on a GPU newer than every cubin).

NVRTC runs on a machine without a GPU; the compile is the twin backend's
(``backends/twin/build.py``'s ``nvrtc_compile``), so an exported kernel is the binary
``portkit check`` tested. ptxas's verbose log gives each lowered kernel's registers and
static shared memory for the manifest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from portkit.backends.twin.build import nvrtc_compile, nvrtc_version
from portkit.errors import PortkitError

_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


@dataclass
class ArchBuild:
    arch: str
    cubin: bytes
    symbols: dict[str, str]  # name expression -> lowered name
    resources: dict[str, dict[str, int]]  # lowered name -> registers, shared_bytes
    ptx: bytes = field(default=b"", repr=False)


def supported_archs() -> list[str]:
    from cuda.bindings import nvrtc

    _, archs = nvrtc.nvrtcGetSupportedArchs()
    return [f"sm_{a}" for a in archs]


def parse_archs(text: str) -> list[str]:
    """``sm_80,sm_90`` -> sorted, checked against what this NVRTC can compile for."""
    archs = [a.strip() for a in text.split(",") if a.strip()]
    if not archs:
        raise PortkitError("--arch names no architecture; e.g. --arch sm_80,sm_90")
    known = supported_archs()
    for arch in archs:
        if arch not in known:
            raise PortkitError(
                f"unsupported architecture {arch!r}; NVRTC {nvrtc_version()} compiles for "
                f"{', '.join(known)}"
            )
    return sorted(set(archs), key=lambda a: int(a[3:]))


def compile_arch(path: Path, expressions: Sequence[str], arch: str, ptx: bool) -> ArchBuild:
    built = nvrtc_compile(path, expressions, arch, verbose=True, ptx=ptx)
    return ArchBuild(arch, built.cubin, built.symbols, _resources(built.ptxas_log), built.ptx)


def _resources(log: str) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    entry = None
    for line in log.splitlines():
        match = _ENTRY.search(line)
        if match:
            entry = match[1]
            continue
        used = _USED.search(line)
        if used and entry:
            smem = _SMEM.search(line)
            found[entry] = {
                "registers": int(used[1]),
                "shared_bytes": int(smem[1]) if smem else 0,
            }
            entry = None
    return found
