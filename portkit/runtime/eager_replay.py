"""``ReplayedOpCallable``: ``OpCallable`` whose plain-eager calls of a recorded signature
are one call into the compiled replayer (``run_eager``, which asks in C++ what
``OpCallable`` asks in Python), with a C++ autograd node where the backward replays too
(``differentiate``); and ``op_callable``, which picks an op's callable. Any other call
takes ``OpCallable``'s path unchanged (docs/fast-path.md, "The plain-eager call in one
compiled call" and "Forward + backward in the compiled replayer").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

import torch

from .autograd_function import Binding, as_tuple, eager_backward
from .prepared import PreparedReplayer, ReplayedOp, flatten
from .registration import OpCallable, RegisteredOp, _is_compiling
from .replayer_protocol import BackwardReplayer, Replayer, carries_backward
from .replaying import ReplayingLauncher, checked_by_the_forward


def op_callable(registered: RegisteredOp, binding: Binding) -> OpCallable:
    """The op's callable (``portkit.load``'s and a package's): where its forward replays
    and runs its input check itself (``replaying.replayed``), a plain-eager call of a
    recorded signature is one call into the compiled replayer (``ReplayedOpCallable``)
    or one prepared function (``prepared.ReplayedOp``); else ``OpCallable``."""
    forward = binding.forward
    if isinstance(forward, ReplayingLauncher) and binding.check is checked_by_the_forward:
        replayer, run_eager = forward.replayer, forward.run_eager
        if carries_backward(replayer) and run_eager is not None:
            return ReplayedOpCallable(registered, binding, run_eager)
        if isinstance(replayer, PreparedReplayer):
            return ReplayedOp(registered, binding, replayer)
    return OpCallable(registered, binding)


def replayer_of(launcher: Any) -> Replayer | None:
    """The replayer of a ``ReplayingLauncher``; None for a plain launcher (or none)."""
    return launcher.replayer if isinstance(launcher, ReplayingLauncher) else None


def differentiate(forward: Any, backward: Any, registered: RegisteredOp, binding: Binding) -> None:
    """Give ``forward``'s compiled replayer ``backward``'s (both ``ReplayingLauncher``s)
    so that its plain-eager replays wanting a gradient get its autograd node; nothing
    where either does not replay with the compiled replayer."""
    forward_replayer, backward_replayer = replayer_of(forward), replayer_of(backward)
    layout = registered.layout
    if not layout.has_backward or not (
        carries_backward(forward_replayer) and carries_backward(backward_replayer)
    ):
        return
    # The compiled replayer keeps the fallback, and the forward keeps the replayer: a
    # fallback holding the whole binding would close a cycle through C++, which the
    # collector cannot see, and keep the op's kernels (their library) loaded for good
    # after it is loaded again. Without the forward it keeps what its backward needs.
    backward_only = dataclasses.replace(binding, forward=_forward_gone)
    once = torch.autograd.function.once_differentiable(
        eager_backward(registered.name, layout, backward_only)
    )

    def fallback(saved: tuple, *grads: Any) -> tuple:
        return as_tuple(once(saved, *grads))  # once_differentiable unpacks a single one

    structure = flatten(((None,) * len(layout.saved), *[None] * layout.outputs))[0]
    cast(BackwardReplayer, forward_replayer).set_backward(
        backward_replayer, registered.name, layout.grads, structure, fallback
    )


def _forward_gone(*args: Any) -> Any:
    raise RuntimeError("the backward's fallback has no forward")  # never called


class ReplayedOpCallable(OpCallable):
    def __init__(
        self, registered: RegisteredOp, binding: Binding, run_eager: Callable[[tuple], Any]
    ) -> None:
        super().__init__(registered, binding)
        self._run_eager, self._kernels = run_eager, binding.kernels
        differentiate(binding.forward, binding.backward, registered, binding)
        if registered.layout.extras == 0:  # its result is the op's: torch.ops replays too
            registered.eager_forward = self._eager_forward
            replayer = replayer_of(binding.forward)
            op_kernels = replayer.op_kernels if replayer is not None else None
            # C++ kernels for the op at its device's keys; the twin's are CUDA, the CPU
            # tests' CPU; any other device keeps the Python kernels.
            device_type = str(self._kernels.device).split(":")[0]
            if op_kernels is not None and device_type in ("cpu", "cuda"):
                qualname, has_backward = registered.qualname, registered.layout.has_backward
                device = self._kernels.device
                registered.use_native_kernels(lambda: op_kernels(qualname, device, has_backward))

    def _eager_forward(self, inputs: tuple) -> Any:
        """The registered op's plain-eager call (its Autograd kernel asked the rest)."""
        return self._run_eager(inputs) if self._kernels.plain_allocation else None

    def __call__(self, *inputs: Any) -> Any:
        # plain_allocation: the production k (no guard zones, no poisoned outputs).
        if not _is_compiling() and self._kernels.plain_allocation:
            outputs = self._run_eager(inputs)
            if outputs is not None:
                return outputs
        return OpCallable.__call__(self, *inputs)
