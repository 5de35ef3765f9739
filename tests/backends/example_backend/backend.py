"""``example-cpu``: a backend written outside portkit, the way a third party writes one.

It is a prototype-role backend that runs an op's numba prototypes on the CPU through
portkit's simulator, under its own name: the smallest real backend (the ``k`` it returns
is the simulator's, so its rows agree with ``sim``'s). A backend for a new compiler or
device does the same three things with its own machinery:

- ``_probe``: why this machine cannot run it, or None;
- ``unsupported_reason(op)``: why it cannot run an op, or None;
- ``launch_targets(op)``: what runs each of the op's kernels, by kernel name; portkit
  wraps them in ``k`` (each launched as ``k.name[grid, block](*args)`` by the op's own
  host launcher), with poisoned outputs and guard zones when it checks.

It is registered two ways in tests/backends/test_plugins.py: by a project's
``[tool.portkit] backends = ["example_backend.backend:ExampleCPU"]`` and by an entry
point in the ``portkit.backends`` group, as an installed package would declare it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from portkit.backends import Backend, create

if TYPE_CHECKING:
    from portkit.launch.kernel_set import LaunchTarget
    from portkit.project.discovery import Op


class ExampleCPU(Backend):
    name = "example-cpu"
    role = "prototype"  # compared with the reference and, on a CPU, with twin-cpu
    device = "cpu"  # its tensors live on the CPU
    simulated = True  # slow: cases marked gpu_only are skipped
    default = False  # runs when named (--backend example-cpu), not in every check
    description = "the prototypes on the CPU (a worked third-party backend)"

    def _probe(self) -> str | None:
        try:
            import numba  # noqa: F401
        except ImportError:
            return "numba is not installed"
        return None

    def unsupported_reason(self, op: Op) -> str | None:
        if not op.kernels:
            return "the op has no prototype kernels"
        return None

    def launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]:
        engine = create("sim", self.config)
        targets = engine.launch_targets(op)
        self.machine = engine.machine  # the simulated launches' records, for diff and warnings
        return targets
