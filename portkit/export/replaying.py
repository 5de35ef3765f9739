"""Replay of recorded launcher calls in an exported package, as ``portkit.load`` replays.

``portkit export`` ships this file as ``_replay.py`` beside byte-for-byte copies of
portkit's ``recorder.py`` (the recorder's rules: what a call did, whether a replay can
repeat it, when to give up), ``executor.py`` (the key) and ``steps.py`` (what a
recording holds). The first call of each input signature runs the launcher on a ``k``
that notes its buffers and launches while a ``TorchDispatchMode`` watches for any other
PyTorch operation; a call that did nothing else is kept, prepared into one Python
function (``_prepared.py``), and later calls of that signature run it without the
launcher's Python. Nothing is compiled but that Python: the compiled replayer needs a
C++ build, a package must not. A signature that cannot be recorded runs the launcher on
every call, with every check and message it had.

Imports only torch and the package's siblings (mypy: the [tool.mypy] overrides).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _driver_launch as driver_launch  # type: ignore[attr-defined]
from . import _launch_contract as contract
from ._prepared import PreparedReplayer
from .executor import MAX_SIGNATURES, flatten, repeats_a_tensor  # type: ignore[import-not-found]
from .recorder import Call, gives_up, not_recorded, record  # type: ignore[import-not-found]
from .steps import ReplayLaunch  # type: ignore[import-not-found]


def replay_wanted() -> bool:
    """``PORTKIT_REPLAY=0`` turns replay off, as in portkit."""
    return os.environ.get("PORTKIT_REPLAY", "auto").strip().lower() not in ("0", "off")


def replay_step(kernel: Any, config: Any, args: Sequence[Any]) -> ReplayLaunch | None:
    """The launch ``kernel`` (the runtime's ``Kernel``) just made, as its own ``launch``
    made it (same values, same choice of launcher), or None where it cannot be repeated."""
    plan = kernel._plans.get(tuple(args[i].dtype for i in kernel._deciders))
    if plan is None or plan.raw or len(args) != plan.count:
        return None
    values: list[Any] = list(args)
    for position, _ in plan.pointers:
        values[position] = None
    plain = all(type(values[p]) in ok for p, ok in plan.plain_scalars)
    grid, block = config.grid, config.block
    return ReplayLaunch(
        driver=plan.driver,
        grid=grid,
        block=block,
        shared_bytes=config.shared_bytes,
        warps=driver_launch.static_warps(grid, block) if plain else 0,
        values=tuple(values),
        pointers=tuple((position, position) for position, _ in plan.pointers),
        stream=_current_stream,
    )


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
            owner.call.launched(kernel.name, replay_step(kernel, checked, args), args)

        return launch


class _RecordingKernels:
    """``k`` for a recorded call: the package's kernels, reporting to ``call``."""

    def __init__(self, kernels: Any, kernel_names: Sequence[str]) -> None:
        self._k = kernels
        self.call = Call(())
        for name in kernel_names:
            setattr(self, name, _RecordingKernel(getattr(kernels, name), self))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._k, name)  # op, device, poison_outputs, ...

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self.call.allocated(self._k.empty, shape, dtype)

    def empty_like(self, tensor: Any) -> Any:
        return self.call.allocated(self._k.empty_like, tensor)


class ReplayingLauncher:
    """A launcher ``f(k, *args)`` that replays its recorded signatures on ``kernels`` and
    runs ``check`` (an input check reading metadata only, which the key holds) on every
    call it does not replay. ``outputs``: a forward's number of outputs, whose
    recordings also give the op's plain-eager result (``PreparedReplayer.run_eager``)."""

    def __init__(
        self,
        launcher: Callable[..., Any],
        kernels: Any,
        kernel_names: Sequence[str],
        flat: bool,
        check: Callable[[Sequence[Any]], None] | None = None,
        outputs: int | None = None,
    ) -> None:
        self._launcher, self._kernels, self._flat, self._check = launcher, kernels, flat, check
        self.replayer: PreparedReplayer | None = PreparedReplayer(outputs)
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
        replayer = self.replayer
        key = replayer.key(leaves)  # type: ignore[union-attr]  # _record implies a replayer
        if key is None or key in self.unreplayable or repeats_a_tensor(leaves):
            return self._launcher(k, *args)
        if not self._recording.acquire(blocking=False):  # another thread is recording
            return self._launcher(k, *args)
        try:
            result, recording, reason, _ = record(
                self._recording_kernels, self._launcher, args, leaves
            )
        finally:
            self._recording.release()
        if recording is not None and replayer.add(leaves, recording):  # type: ignore[union-attr]
            return result
        not_recorded(self.unreplayable, key, reason, MAX_SIGNATURES)
        if gives_up(self.unreplayable, replayer):
            self.replayer = None
        return result
