"""The ``sim`` backend: the prototype on portkit's own CUDA simulator (``portkit.simt``),
the default prototype backend on a CPU. numba's simulator is ``backends/numba_sim``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from portkit.backends.base import Backend
from portkit.launch.kernel_set import KernelSet, LaunchConfig
from portkit.project.dtypes import prototype_view
from portkit.simt.debug import Breakpoint


class SimulatedLaunch:
    """A launch target running one kernel on portkit's simulated machine."""

    def __init__(self, name: str, dispatcher: Any, machine: Any) -> None:
        self.name, self._dispatcher, self._machine = name, dispatcher, machine

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch

        # bfloat16 has no NumPy dtype: the kernel gets its bits as uint16, as on the GPU.
        host_args = [prototype_view(a).numpy() if isinstance(a, torch.Tensor) else a for a in args]
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
