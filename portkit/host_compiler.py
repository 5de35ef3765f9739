"""The system C++ compiler: what the CPU twin and the simulator's math library build with.

``$CXX`` if set, else g++, clang++ or c++ on the PATH; found once per process, when first
needed. Its identity (version lines) is part of every cache key built with it. The
caller passes ``$CXX`` as the environment table has it (``tool_path("CXX")``,
portkit/project/environment.py): this module, at the bottom of the layers, reads no
environment.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Compiler:
    path: str
    identity: str  # first line of --version plus the full version: part of the cache key


@cache
def find_compiler(wanted: str | None) -> Compiler | None:
    """``wanted`` ($CXX) if set, else g++, clang++ or c++ on the PATH."""
    candidates = [shlex.split(wanted)[0]] if wanted else ["g++", "clang++", "c++"]
    for name in candidates:
        path = shutil.which(name)
        if not path:
            continue
        try:
            version = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.splitlines()[0]
            full = subprocess.run(
                [path, "-dumpfullversion", "-dumpversion"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError, IndexError):
            continue
        return Compiler(path, f"{version} {full}")
    return None
