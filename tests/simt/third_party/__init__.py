"""numba CUDA kernels nobody on the portkit team wrote, each copied verbatim from a
public source (named with its licence in the file's header) with a small driver of
ours, ``run()``, that launches it on small inputs and returns the arrays it left.

``tests/simt/test_third_party.py`` runs every driver under numba's own simulator (a
child process with ``NUMBA_ENABLE_CUDASIM=1``) and under portkit's simulator
(``simulated_cuda()``) and asserts the same outcome: the same values, or the same
exception type. ``python -m tests.simt.third_party.runner --table`` prints the table of
docs/numba-world.md. The files are not test modules (no ``test_`` prefix): pytest
collects only the comparison.
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def kernel_files() -> list[Path]:
    """Every third-party kernel file of this folder, by name."""
    return sorted(p for p in FOLDER.glob("*.py") if p.stem not in ("__init__", "runner"))
