"""Which outputs of a case float atomics sum into, and how much: the ``n`` and ``S`` of
each element that ``order_bound`` compares with.

They come from the simulator, which counts every float ``atomic.add``/``sub`` into
global memory (simt/tally.py): from the ``sim`` backend's own run of the case when it
ran, otherwise from a counting run of the prototype in the simulator on the case's
inputs (the GPU backends, the CPU twin). A counting run costs a simulated forward and
backward, so it runs only for ops whose kernels call ``cuda.atomic.add``/``sub`` (read
from their source) and only on cases the simulator runs (not ``large`` or GPU-only
ones: those keep the plain tolerance, and the row says so). The counts depend on the
inputs alone, so the verdict they lead to is the same on every run.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portkit.checking.order_bound import OrderBound, bound_for

if TYPE_CHECKING:
    import torch

    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


@dataclass(frozen=True)
class Contributions:
    """Per output and per input gradient of one case: its ``OrderBound`` or None."""

    outputs: tuple[OrderBound | None, ...] = ()
    grads: tuple[OrderBound | None, ...] = ()
    note: str = ""  # why there are none although the kernels sum atomically

    def of(self, what: str) -> tuple[OrderBound | None, ...]:
        return self.grads if what.startswith("grad") else self.outputs


NONE = Contributions()


def from_machine(
    machine: Any, outputs: tuple[torch.Tensor, ...], grads: tuple[torch.Tensor | None, ...]
) -> Contributions:
    """What a simulator ``machine`` counted into ``outputs`` and ``grads`` (its run's)."""
    tally = getattr(machine, "tally", None)
    if not tally:
        return NONE
    return Contributions(
        tuple(bound_for(o, tally) for o in outputs),
        tuple(bound_for(g, tally) if g is not None else None for g in grads),
    )


def counting_run(op: Op, case: Case, config: ProjectConfig) -> Contributions:
    """The prototype's forward (and backward) on ``case`` in the simulator, for its counts.
    A kernel fault here is the ``sim`` row's to report: the counts are then unknown."""
    if not sums_atomically(op):
        return NONE
    if case.large or case.gpu_only:
        return Contributions(
            note="the kernels call cuda.atomic.add/sub, but a large case is not counted "
            "in the simulator: plain tolerance, the verdict may depend on the GPU's order"
        )
    import torch

    from portkit.backends.sim import PortkitSimulator
    from portkit.launch.compose import compose_kernels
    from portkit.launch.op_inputs import as_tuple
    from portkit.project.cases import make_grad_outputs, make_inputs
    from portkit.torch_op.load import registered_callable

    sim = PortkitSimulator(config)
    try:
        kernels = compose_kernels(sim, op, poison=True)
        inputs = [
            t.detach().requires_grad_(t.dtype.is_floating_point) for t in make_inputs(case, "cpu")
        ]
        fn = registered_callable(op, kernels, config.namespace, define_now=False)
        outputs = as_tuple(fn(*inputs, *case.extra))
        grads: tuple = ()
        if op.definition.has_backward:
            wanted = [t for t in inputs if t.requires_grad]
            grads = torch.autograd.grad(
                outputs, wanted, make_grad_outputs(case, outputs), allow_unused=True
            )
    except Exception as exc:  # noqa: BLE001 - reported by the sim row, not here
        return Contributions(note=f"the counting run in the simulator failed ({exc})"[:200])
    return from_machine(
        sim.machine,
        tuple(o.detach() for o in outputs),
        tuple(g.detach() if g is not None else None for g in grads),
    )


def sums_atomically(op: Op) -> bool:
    """Whether the modules of ``op``'s kernels (and of the device functions they name)
    call ``cuda.atomic.add`` or ``sub`` anywhere: the types are not known here, so this
    says only that a counting run may find float sums."""
    modules = set()
    for dispatcher in op.kernels.values():
        function = getattr(dispatcher, "py_func", None)
        if function is None:
            continue
        modules.add(inspect.getmodule(function))
        for name in function.__code__.co_names:
            helper = getattr(function.__globals__.get(name), "py_func", None)
            if helper is not None:
                modules.add(inspect.getmodule(helper))
    return any(_calls_atomic_sum(module) for module in modules if module is not None)


def _calls_atomic_sum(module: Any) -> bool:
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return True  # no source to read: count, to be safe
    return any(
        isinstance(node, ast.Attribute)
        and node.attr in ("add", "sub")
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "atomic"
        for node in ast.walk(tree)
    )
