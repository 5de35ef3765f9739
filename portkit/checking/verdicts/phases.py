"""Two phases of one check: what needs no GPU, and what does.

``--phase cpu`` (a hosted runner): the reference's gradcheck, the simulator, the CPU
twin, the compile checks for every arch of ``[tool.portkit] archs`` and lint. ``--phase
gpu`` (the GPU runner): numba on the GPU, the twin, prototype against twin. ``all``: both,
as one run on one machine. After a GPU phase ``unreachable`` lists what this machine's
hardware could not check: the archs the project ships for that are not its GPU's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.project.config import ProjectConfig


def phase_backends(backends: Sequence[Backend], phase: str) -> list[Backend]:
    """The backends a phase runs: by the device their tensors live on."""
    if phase == "all":
        return list(backends)
    wanted = "cuda" if phase == "gpu" else "cpu"
    return [b for b in backends if b.device == wanted]


def unreachable(config: ProjectConfig, gpu: dict[str, str]) -> list[tuple[str, str]]:
    """(what, why) for each thing this machine could not run: every listed arch other
    than the GPU's (each is compiled in the CPU phase, never run), or all of them and
    every GPU row where there is no GPU. ``gpu``: key.gpu_identity()."""
    here = gpu.get("arch")
    if here is None:
        return [("every GPU row", "no NVIDIA GPU visible here (`portkit check` says why)")]
    rows = []
    for arch in config.archs:
        if arch != here:
            rows.append(
                (
                    arch,
                    f"no {arch} GPU here (this one: {gpu['gpu']}, {here}); "
                    "compiled in the CPU phase, not run",
                )
            )
    return rows
