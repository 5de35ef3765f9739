"""Replay of recorded launcher calls in an exported package, as ``portkit.load`` replays.

``portkit export`` ships this file as ``_replay.py`` beside byte-for-byte copies of
portkit's ``executor.py`` (the Python replayer: the key, the replay) and ``steps.py``
(what a recording holds). The first call of each input signature runs the launcher on a
``k`` that notes its buffers and launches while a ``TorchDispatchMode`` watches for any
other PyTorch operation; a call that did nothing else is kept, and later calls of that
signature allocate and launch from the recording without the launcher's Python. Nothing
is compiled: the compiled replayer needs a C++ build, a package must not. The rules for
what can be recorded are portkit's (``launch/replay/recording.py``); a signature that
cannot be recorded runs the launcher on every call, with every check and message it had.

Imports only torch and the package's siblings (mypy: the [tool.mypy] overrides).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _driver_launch as driver_launch  # type: ignore[attr-defined]
from . import _launch_contract as contract
from .executor import (  # type: ignore[import-not-found]
    MAX_SIGNATURES,
    PythonReplayer,
    flatten,
    leaf_key,
    repeats_a_tensor,
)
from .steps import RecordedLaunch, Recording, ReplayLaunch  # type: ignore[import-not-found]

MAX_FAILURES = 8  # signatures not recorded before a launcher that never recorded gives up


def replay_wanted() -> bool:
    """``PORTKIT_REPLAY=0`` turns replay off, as in portkit."""
    return os.environ.get("PORTKIT_REPLAY", "auto").strip().lower() not in ("0", "off")


class _Call:
    """What one recorded call did so far, and the first reason it cannot be replayed."""

    def __init__(self, leaves: Sequence[Any]) -> None:
        self.leaves = leaves
        self.buffers: list[Any] = []
        self.launches: list[RecordedLaunch] = []
        self.allocating = 0
        self.spoiled: str | None = None

    def spoil(self, reason: str) -> None:
        if self.spoiled is None:
            self.spoiled = reason

    def ref(self, tensor: Any) -> int | None:
        for i, leaf in enumerate(self.leaves):
            if leaf is tensor:
                return i
        for j, buffer in enumerate(self.buffers):
            if buffer is tensor:
                return -1 - j
        return None

    def template(self, value: Any) -> Any:
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

    def launched(self, kernel: Any, config: Any, args: Sequence[Any]) -> None:
        """Note the launch ``kernel`` (the runtime's ``Kernel``) just made, as its own
        ``launch`` made it: same values, same choice of launcher."""
        plan = kernel._plans.get(tuple(args[i].dtype for i in kernel._deciders))
        if plan is None or plan.raw or len(args) != plan.count:
            self.spoil(f"kernel {kernel.name}: a launch that cannot be repeated")
            return
        values: list[Any] = list(args)
        refs = []
        for position, _ in plan.pointers:
            ref = self.ref(args[position])
            if ref is None:
                self.spoil(f"kernel {kernel.name}, argument {position}: not an input or buffer")
                return
            values[position] = None
            refs.append((position, ref))
        plain = all(type(values[p]) in ok for p, ok in plan.plain_scalars)
        grid, block = config.grid, config.block
        step = ReplayLaunch(
            driver=plan.driver,
            grid=grid,
            block=block,
            shared_bytes=config.shared_bytes,
            warps=driver_launch.static_warps(grid, block) if plain else 0,
            values=tuple(values),
            pointers=tuple((position, position) for position, _ in plan.pointers),
            stream=_current_stream,
        )
        self.launches.append(RecordedLaunch(step, tuple(refs)))


def _current_stream() -> int:
    """The stream ``Kernel.launch`` launches on."""
    return driver_launch.current_stream(torch.cuda.current_device())


class _RecordingKernel:
    def __init__(self, kernel: Any, owner: _RecordingKernels) -> None:
        self._kernel, self._owner = kernel, owner

    def __getitem__(self, config: Any) -> Callable[..., None]:
        kernel, owner = self._kernel, self._owner
        checked = contract.launch_config(config, kernel.name)

        def launch(*args: Any) -> None:
            kernel.launch(checked, args)
            owner.call.launched(kernel, checked, args)

        return launch


class _RecordingKernels:
    """``k`` for a recorded call: the package's kernels, reporting to ``call``."""

    def __init__(self, kernels: Any, kernel_names: Sequence[str]) -> None:
        self._k = kernels
        self.call = _Call(())
        for name in kernel_names:
            setattr(self, name, _RecordingKernel(getattr(kernels, name), self))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._k, name)  # op, device, poison_outputs, ...

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self._allocated(self._k.empty, shape, dtype)

    def empty_like(self, tensor: Any) -> Any:
        return self._allocated(self._k.empty_like, tensor)

    def _allocated(self, allocate: Callable[..., Any], *args: Any) -> Any:
        call = self.call
        call.allocating += 1
        try:
            buffer = allocate(*args)
        finally:
            call.allocating -= 1
        call.buffers.append(buffer)
        return buffer


class ReplayingLauncher:
    """A launcher ``f(k, *args)`` that replays its recorded signatures on ``kernels`` and
    runs ``check`` (an input check reading metadata only, which the key holds) on every
    call it does not replay."""

    def __init__(
        self,
        launcher: Callable[..., Any],
        kernels: Any,
        kernel_names: Sequence[str],
        flat: bool,
        check: Callable[[Sequence[Any]], None] | None = None,
    ) -> None:
        self._launcher, self._kernels, self._flat, self._check = launcher, kernels, flat, check
        self.replayer: PythonReplayer | None = PythonReplayer()
        self._recording_kernels = _RecordingKernels(kernels, kernel_names)
        self.unreplayable: dict[Any, str] = {}
        self._recording = threading.Lock()

    def __call__(self, k: Any, *args: Any) -> Any:
        replayer = self.replayer
        production = replayer is not None and k is self._kernels
        if production:
            leaves = args if self._flat else flatten(args)
            result = replayer.run(leaves)  # type: ignore[union-attr]  # production implies a replayer
            if result is not None:
                return result
        if self._check is not None:
            self._check(args)
        if production:
            return self._record(k, args, leaves)
        return self._launcher(k, *args)

    def _record(self, k: Any, args: Sequence[Any], leaves: Sequence[Any]) -> Any:
        key = leaf_key(leaves)
        if key is None or key in self.unreplayable or repeats_a_tensor(leaves):
            return self._launcher(k, *args)
        if not self._recording.acquire(blocking=False):  # another thread is recording
            return self._launcher(k, *args)
        try:
            result, recording, reason = self._run_recorded(args, leaves)
        finally:
            self._recording.release()
        replayer = self.replayer
        if replayer is None or (recording is not None and replayer.add(leaves, recording)):
            return result
        if len(self.unreplayable) >= MAX_SIGNATURES:
            self.unreplayable.clear()
        self.unreplayable[key] = reason or "its leaves cannot be keyed"
        if len(self.unreplayable) >= MAX_FAILURES and not len(replayer):
            self.replayer = None
        return result

    def _run_recorded(
        self, args: Sequence[Any], leaves: Sequence[Any]
    ) -> tuple[Any, Recording | None, str | None]:
        kernels = self._recording_kernels
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
                result = self._launcher(kernels, *args)
        finally:
            kernels.call = _Call(())
        template = call.template(result)
        devices = {t.device for t in (*leaves, *call.buffers) if isinstance(t, torch.Tensor)}
        if len(devices) != 1:
            call.spoil("the call's tensors are not all on one device")
        if call.spoiled is not None:
            return result, None, call.spoiled
        allocations = tuple(
            torch.empty_strided(b.shape, b.stride(), dtype=b.dtype, device="meta")
            for b in call.buffers
        )
        return result, Recording(devices.pop(), allocations, tuple(call.launches), template), None
