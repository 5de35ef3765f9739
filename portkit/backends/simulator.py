"""``sim``: the prototype run by numba's CUDA simulator on the CPU, in this process."""

from __future__ import annotations

from portkit.backends.base import Backend
from portkit.launch import KernelSet
from portkit.numba_sim import Breakpoint, SimulatedFunctions, SimulatedKernel, simulator_importable


class NumbaSimulator(Backend):
    name = "sim"
    role = "prototype"
    device = "cpu"
    simulated = True
    description = "prototype in numba's CUDA simulator on the CPU"
    # Set by `portkit sim --block/--thread`: stop in pdb there.
    breakpoint: Breakpoint | None = None

    def _probe(self) -> str | None:
        return simulator_importable()

    def kernels(self, op, *, poison_outputs: bool = False) -> KernelSet:
        functions = SimulatedFunctions()
        targets = {}
        for name, dispatcher in op.kernels.items():
            target = SimulatedKernel(name, dispatcher, functions)
            target.breakpoint = self.breakpoint
            targets[name] = target
        return KernelSet(op.name, self.name, self.device, targets, poison_outputs)
