"""The ``numba-sim`` backend: the prototype in numba's own CUDA simulator, kept for
cross-checks and not run unless asked for with ``--backend numba-sim``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from portkit.backends.base import Backend
from portkit.simt.debug import Breakpoint

if TYPE_CHECKING:
    from portkit.launch.kernel_set import LaunchTarget
    from portkit.project.discovery import Op


class NumbaSimulator(Backend):
    name = "numba-sim"
    role = "prototype"
    device = "cpu"
    simulated = True
    default = False
    description = "prototype in numba's CUDA simulator (no warps, no race checks; cross-check)"
    breakpoint: Breakpoint | None = None

    def _probe(self) -> str | None:
        from portkit.backends.numba_sim.functions import simulator_importable

        return simulator_importable()

    def unsupported_reason(self, op: Op) -> str | None:
        from portkit.backends.numba_sim.functions import uses_warp_intrinsics
        from portkit.simt.mlir_names import mlir_kernel_names

        if mlir_kernel_names(op):
            return "numba's simulator runs numba-cuda kernels only, not numba-cuda-mlir's"
        if uses_warp_intrinsics(op):
            return "numba's simulator has no warp intrinsics (shfl_*_sync, ballot_sync...)"
        return None

    def launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]:
        from portkit.backends.numba_sim.functions import SimulatedFunctions, SimulatedKernel

        functions = SimulatedFunctions()
        targets: dict[str, LaunchTarget] = {}
        for name, dispatcher in op.kernels.items():
            target = SimulatedKernel(name, dispatcher, functions)
            target.breakpoint = self.breakpoint
            targets[name] = target
        return targets
