"""Run a launcher once while recording what it did, and decide whether that can be replayed
(the rules: ``recorder.py``, which an exported package shares).

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
from portkit.runtime.recorder import Call
from portkit.runtime.recorder import record as record  # the tests' entry point


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
        self.call = Call(())
        targets = {
            name: _RecordingTarget(name, target, self) for name, target in kernels.targets.items()
        }
        super().__init__(
            kernels.op,
            kernels.implementation,
            kernels.device,
            targets,
            knob_choice=kernels.knob_choice,
            kind=kernels.kind,
        )

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self._allocated(super().empty, shape, dtype)

    def empty_like(self, tensor: Any) -> Any:
        return self._allocated(super().empty_like, tensor)

    def _allocated(self, allocate: Callable[..., Any], *args: Any) -> Any:
        return self.call.allocated(allocate, *args)
