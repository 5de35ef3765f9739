"""The ``sim`` backend: the prototype on portkit's own CUDA simulator (``portkit.simt``),
the default prototype backend on a CPU. numba's simulator is ``backends/numba_sim``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from portkit.backends.base import Backend
from portkit.backends.numba_types import TypeCheck
from portkit.launch.kernel_set import LaunchConfig, LaunchTarget
from portkit.project.dtypes import BITS_VIEW, dtype_name, prototype_view
from portkit.simt.debug import Breakpoint

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


def host_array(tensor: Any) -> Any:
    """A CPU tensor as the simulator's NumPy array; bfloat16 (no NumPy dtype) as its bits
    in a ``BFloat16Bits`` array, which a simulated kernel reads as bfloat16 scalars."""
    from portkit.simt.scalars import BFloat16Bits

    array = prototype_view(tensor).numpy()
    return array.view(BFloat16Bits) if dtype_name(tensor.dtype) in BITS_VIEW else array


class SimulatedLaunch(LaunchTarget):
    """A launch target running one kernel on portkit's simulated machine."""

    def __init__(self, name: str, dispatcher: Any, machine: Any, types: Any = None) -> None:
        self.name, self._dispatcher, self._machine = name, dispatcher, machine
        self._types = types  # numba's type check (backends/numba_types.py), or None

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch

        if self._types is not None:  # what numba cannot compile is red before it runs
            # The simulator's own numba rules (simt/numba_rules.py) say it better: first.
            self._machine.rewriter.rewrite(self._dispatcher)
            self._types.check(self.name, args)
        host_args = [host_array(a) if isinstance(a, torch.Tensor) else a for a in args]
        self._machine.launch(self.name, self._dispatcher, config, host_args)


class PortkitSimulator(Backend):
    name = "sim"
    role = "prototype"
    device = "cpu"
    simulated = True
    runs_large_cases_on_cpu = True  # the lockstep engine runs 2^24 threads in seconds
    description = "prototype in portkit's CUDA simulator on the CPU (races, bounds, warps checked)"
    # Set by `portkit sim`: stop in pdb there, and report progress over blocks.
    breakpoint: Breakpoint | None = None
    on_block: Callable[[int, int], None] | None = None
    # The order blocks and threads run in (simt/schedule.py): `portkit sim --schedule`,
    # and `portkit check`'s second run of an op that sums floats atomically.
    schedule: str = "forward"

    def _probe(self) -> str | None:
        try:
            import numba.cuda  # noqa: F401
        except Exception as exc:  # pragma: no cover - depends on the install
            return f"numba-cuda cannot be imported: {exc}"
        return None

    def __init__(self, config: ProjectConfig) -> None:
        super().__init__(config)
        self._launches = 0  # launches of the machines before the current one
        self._fallbacks: dict[tuple[str, str], int] = {}  # (kernel, reason): launches

    def launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]:
        from portkit.simt.machine import Machine

        self._count_engines()
        self.machine = Machine(
            self.breakpoint,
            self.on_block,
            engine=self.config.settings.simt_engine,
            budget=self.config.sim_budget,
            schedule=self.schedule,
            strict=self.config.strict,
            lockstep_fallback=self.config.settings.lockstep_fallback
            or self.config.lockstep_fallback,
        )
        types = TypeCheck(op, self.config)
        return {
            name: SimulatedLaunch(name, dispatcher, self.machine, types)
            for name, dispatcher in op.kernels.items()
        }

    def _count_engines(self) -> None:
        """Move the last machine's engine choices into the backend's counts."""
        if self.machine is None:
            return
        self._launches += len(self.machine.engines)
        for choice in self.machine.engines:
            if choice.fallback:
                key = (choice.kernel, choice.reason)
                self._fallbacks[key] = self._fallbacks.get(key, 0) + 1
        self.machine.engines.clear()

    def engine_report(self) -> list[str]:
        """How many launches fell back from the lockstep engine per thread, and why."""
        self._count_engines()
        lines = [
            f"sim: lockstep fallbacks: {sum(self._fallbacks.values())} of {self._launches} "
            f"launch(es)"
        ]
        for (kernel, reason), n in sorted(self._fallbacks.items()):
            lines.append(f"sim: {kernel}: per-thread, {n} launch(es): {reason}")
        return lines
