"""The simulators: ``sim`` (portkit's own, the default) and ``numba-sim`` (numba's, kept
for cross-checks and not run unless asked for with ``--backend numba-sim``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from portkit.backends.base import Backend
from portkit.launch import KernelSet, LaunchConfig
from portkit.simt.debug import Breakpoint


class SimulatedLaunch:
    """A launch target running one kernel on portkit's simulated machine."""

    def __init__(self, name: str, dispatcher: Any, machine: Any) -> None:
        self.name, self._dispatcher, self._machine = name, dispatcher, machine

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch

        host_args = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
        self._machine.launch(self.name, self._dispatcher, config, host_args)


class PortkitSimulator(Backend):
    name = "sim"
    role = "prototype"
    device = "cpu"
    simulated = True
    description = "prototype in portkit's CUDA simulator on the CPU (races, bounds, warps checked)"
    # Set by `portkit sim`: stop in pdb there, and report progress over blocks.
    breakpoint: Breakpoint | None = None
    on_block: Callable[[int, int], None] | None = None

    def _probe(self) -> str | None:
        try:
            import numba.cuda  # noqa: F401
        except Exception as exc:  # pragma: no cover - depends on the install
            return f"numba-cuda cannot be imported: {exc}"
        return None

    def kernels(self, op, *, poison_outputs: bool = False) -> KernelSet:
        from portkit.simt.machine import Machine

        self.machine = Machine(self.breakpoint, self.on_block)
        targets = {
            name: SimulatedLaunch(name, dispatcher, self.machine)
            for name, dispatcher in op.kernels.items()
        }
        return KernelSet(op.name, self.name, self.device, targets, poison_outputs)


class NumbaSimulator(Backend):
    name = "numba-sim"
    role = "prototype"
    device = "cpu"
    simulated = True
    default = False
    description = "prototype in numba's CUDA simulator (no warps, no race checks; cross-check)"
    breakpoint: Breakpoint | None = None

    def _probe(self) -> str | None:
        from portkit.numba_sim import simulator_importable

        return simulator_importable()

    def unsupported_reason(self, op) -> str | None:
        from portkit.numba_sim import uses_warp_intrinsics

        if uses_warp_intrinsics(op):
            return "numba's simulator has no warp intrinsics (shfl_*_sync, ballot_sync...)"
        return None

    def kernels(self, op, *, poison_outputs: bool = False) -> KernelSet:
        from portkit.numba_sim import SimulatedFunctions, SimulatedKernel

        functions = SimulatedFunctions()
        targets = {}
        for name, dispatcher in op.kernels.items():
            target = SimulatedKernel(name, dispatcher, functions)
            target.breakpoint = self.breakpoint
            targets[name] = target
        return KernelSet(op.name, self.name, self.device, targets, poison_outputs)
