"""Run a launcher once while recording what it did, and decide whether that can be replayed.

``RecordingKernels`` is a ``k`` over the same launch targets as the production one, whose
``k.empty*`` note the buffers they return and whose launches ask their target for a
``ReplayLaunch`` (``LaunchTarget.replay_step``). A ``TorchDispatchMode`` sees every
PyTorch operation the launcher runs: anything but those allocations (a view, a
``torch.zeros``, an ``.item()``) means the call did work a replay would not repeat.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from portkit.launch.kernel_set import KernelSet, LaunchConfig, LaunchTarget
from portkit.launch.replay.steps import RecordedLaunch, Recording, Ref, ReplayLaunch


class _Call:
    """What one recorded call did so far, and the first reason it cannot be replayed."""

    def __init__(self, leaves: Sequence[Any]) -> None:
        self.leaves = leaves
        self.buffers: list[Any] = []
        self.launches: list[RecordedLaunch] = []
        self.allocating = 0  # inside k.empty*: its PyTorch operations are the allocation
        self.spoiled: str | None = None
        # A launch took the checked path, which a target's first launch of a dtype does
        # (the twin builds its plan there): the next call may well record.
        self.checked_path = False

    def spoil(self, reason: str) -> None:
        if self.spoiled is None:
            self.spoiled = reason

    def ref(self, tensor: Any) -> Ref | None:
        for i, leaf in enumerate(self.leaves):
            if leaf is tensor:
                return i
        for j, buffer in enumerate(self.buffers):
            if buffer is tensor:
                return -1 - j
        return None

    def launched(self, kernel: str, step: ReplayLaunch | None, args: Sequence[Any]) -> None:
        if step is None:
            self.spoil(f"kernel {kernel}: its target cannot repeat this launch")
            return
        refs = []
        for slot, position in step.pointers:
            ref = self.ref(args[position])
            if ref is None:
                self.spoil(
                    f"kernel {kernel}, argument {position}: a tensor that is neither an "
                    f"input nor a buffer from k.empty*"
                )
                return
            refs.append((slot, ref))
        self.launches.append(RecordedLaunch(step, tuple(refs)))

    def template(self, value: Any) -> Any:
        """The result's structure with a reference for each tensor."""
        import torch

        if isinstance(value, torch.Tensor):
            ref = self.ref(value)
            if ref is None:
                self.spoil("the result holds a tensor that is neither an input nor a buffer")
            return ref
        if value is None:
            return None
        if type(value) in (tuple, list):
            return type(value)(self.template(v) for v in value)
        self.spoil(f"the result holds a {type(value).__name__}")
        return None


class _RecordingTarget(LaunchTarget):
    """A launch target that reports each launch to the call being recorded (it wraps
    targets that replay, so it offers their plain launch)."""

    has_plain_launch = True

    def __init__(self, name: str, target: LaunchTarget, owner: RecordingKernels) -> None:
        self._name, self._target, self._owner = name, target, owner

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        # The checked path: arguments the production path doubted (NumPy scalars, say).
        call = self._owner.call
        call.spoil(f"kernel {self._name}: a launch took the checked path")
        call.checked_path = True
        self._target.launch(config, args)

    def plain_launch(self, config: LaunchConfig) -> Callable[[Sequence[Any]], bool]:
        inner = self._target.plain_launch(config)
        replay_step = self._target.replay_step
        owner, name = self._owner, self._name

        def launch(args: Sequence[Any]) -> bool:
            if not inner(args):
                return False
            owner.call.launched(name, replay_step(config, args), args)
            return True

        return launch


class RecordingKernels(KernelSet):
    """``k`` for a recorded call: the production kernels, reporting to ``call``."""

    def __init__(self, kernels: KernelSet) -> None:
        self.call = _Call(())
        targets = {
            name: _RecordingTarget(name, target, self) for name, target in kernels.targets.items()
        }
        super().__init__(kernels.op, kernels.implementation, kernels.device, targets)

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self._allocated(super().empty, shape, dtype)

    def empty_like(self, tensor: Any) -> Any:
        return self._allocated(super().empty_like, tensor)

    def _allocated(self, allocate: Callable[..., Any], *args: Any) -> Any:
        call = self.call
        call.allocating += 1
        try:
            buffer = allocate(*args)
        finally:
            call.allocating -= 1
        if not call.allocating:  # empty_like may call empty: note the buffer once
            call.buffers.append(buffer)
        return buffer


def record(
    kernels: RecordingKernels,
    launcher: Callable[..., Any],
    args: Sequence[Any],
    leaves: Sequence[Any],
) -> tuple[Any, Recording | None, str | None, bool]:
    """Run ``launcher(kernels, *args)``: its result, its recording or why there is none,
    and whether a launch took the checked path (worth one more try)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    call = kernels.call = _Call(leaves)

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            if not call.allocating:
                call.spoil(f"the launcher ran {func}")
            return func(*args, **(kwargs or {}))

    try:
        with Watch():
            result = launcher(kernels, *args)
    finally:
        kernels.call = _Call(())
    template = call.template(result)
    devices = {t.device for t in (*leaves, *call.buffers) if isinstance(t, torch.Tensor)}
    if len(devices) != 1:
        call.spoil("the call's tensors are not all on one device")
    if call.spoiled is not None:
        return result, None, call.spoiled, call.checked_path
    allocations = tuple(
        torch.empty_strided(b.shape, b.stride(), dtype=b.dtype, device="meta") for b in call.buffers
    )
    recording = Recording(devices.pop(), allocations, tuple(call.launches), template)
    return result, recording, None, False
