"""Replay of recorded launcher calls, for ``portkit.load`` and an exported package alike.

``ReplayingLauncher`` wraps a forward or backward launcher: on the production ``k`` a
call whose signature was recorded is replayed by its replayer (the compiled one,
``native_replayer.py``, in portkit and in a package where it builds; else portkit's
Python one, ``executor.py``, or a package's prepared functions, ``prepared.py``); a new
signature runs the launcher once on a recording ``k`` under the recorder
(``recorder.py``: a ``TorchDispatchMode`` watches for any other PyTorch operation) and
keeps the recording if it can be replayed; anything else (another ``k``, a signature
that cannot be recorded) runs the launcher, with every check and message it had.
``RecordingKernels`` is the package's recording ``k`` (portkit's, over its launch
targets, is launch/replay/recording.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from . import launch_contract as contract
from .executor import MAX_SIGNATURES, flatten, repeats_a_tensor
from .recorder import Call, gives_up, not_recorded, record
from .replay_setting import replay_mode
from .replayer_protocol import BackwardReplayer, Replayer, carries_backward
from .steps import eager_template


def package_replay_mode() -> str:
    """How an exported package replays: ``PORTKIT_REPLAY`` as portkit reads it ("off",
    "python": its prepared functions, "auto": the compiled replayer where it builds; a
    package has no portkit, so it reads this one variable of portkit's table itself)."""
    return replay_mode(os.environ.get("PORTKIT_REPLAY", ""))


def replay_wanted() -> bool:
    """Whether an exported package replays at all."""
    return package_replay_mode() != "off"


class _RecordingKernel:
    def __init__(self, kernel: Any, owner: RecordingKernels) -> None:
        self._kernel, self._owner = kernel, owner

    def __getitem__(self, config: Any) -> Callable[..., None]:
        kernel, owner = self._kernel, self._owner
        checked = contract.launch_config(config, kernel.name)
        target = kernel.target
        fast = target.plain_launch(checked)

        def launch(*args: Any) -> None:
            if fast(args):
                owner.call.launched(kernel.name, target.replay_step(checked, args), args)
                return
            call = owner.call  # the checked path: a first launch of a dtype, say
            call.spoil(f"kernel {kernel.name}: a launch took the checked path")
            call.checked_path = True
            target.launch(checked, args)

        return launch


class RecordingKernels:
    """``k`` for a recorded call: the package's kernels, reporting to ``call``."""

    def __init__(self, kernels: Any, kernel_names: Sequence[str]) -> None:
        self._k = kernels
        self.call = Call(())
        for name in kernel_names:
            setattr(self, name, _RecordingKernel(getattr(kernels, name), self))

    # The protocol's members are spelled out: Python 3.12's isinstance on a
    # runtime_checkable Protocol looks attributes up statically, past __getattr__.
    @property
    def op(self) -> str:
        return str(self._k.op)

    @property
    def implementation(self) -> str:
        return str(self._k.implementation)

    @property
    def kind(self) -> Any:
        return self._k.kind

    @property
    def device(self) -> Any:
        return self._k.device

    @property
    def knob_choice(self) -> Any:
        return self._k.knob_choice

    @property
    def plain_allocation(self) -> bool:
        return bool(self._k.plain_allocation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._k, name)  # poison_outputs, ...

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self.call.allocated(self._k.empty, shape, dtype)

    def empty_like(self, tensor: Any) -> Any:
        return self.call.allocated(self._k.empty_like, tensor)


class ReplayingLauncher:
    """A forward or backward launcher, called as ``f(k, *args)`` like the launcher itself,
    that replays recorded signatures on ``kernels`` with ``replayer`` (compiled, Python
    or prepared) and records new ones on ``recording_kernels``, a ``k`` over the same
    kernels that reports to a ``recorder.Call``. ``unreplayable`` says why each signature
    that could not be recorded was not."""

    def __init__(
        self,
        launcher: Callable[..., Any],
        kernels: Any,
        recording_kernels: Any,
        replayer: Replayer,
        flat: bool,
        check: Callable[[Sequence[Any]], None] | None = None,
        outputs: int | None = None,
        saved: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        functools.update_wrapper(self, launcher)
        self._outputs = outputs  # a forward's number of outputs: recordings get an eager result
        # A forward's layout of saved tensors (OpLayout.saved): with a compiled replayer,
        # recordings name them so that replays can save them for backward (native.cpp).
        self._saved = saved if carries_backward(replayer) else None
        self._launcher, self._kernels = launcher, kernels
        self.replayer: Replayer | None = replayer
        # An input check that depends on the inputs' metadata only, run here before the
        # launcher rather than by the caller: a replayed signature passed it when recorded.
        self._check = check
        self._flat = flat  # a forward's arguments are leaves; a backward's start with a tuple
        self._recording_kernels = recording_kernels  # a k that records (recorder.Call)
        self.unreplayable: dict[Any, str] = {}  # key -> why, for signatures seen
        # Calls run under the recorder: one per signature (two for a twin's first, whose
        # first launch builds its plan on the checked path).
        self.recorded = 0
        self._retried: set[Any] = set()
        self._recording = threading.Lock()

    def __call__(self, k: Any, *args: Any) -> Any:
        replayer = self.replayer
        # plain_allocation: no guard zones and no poisoned outputs, i.e. production.
        if replayer is not None and k is self._kernels and k.plain_allocation:
            leaves = args if self._flat else flatten(args)
            result = replayer.run(leaves)
            if result is not None:
                return result
            if self._check is not None:
                self._check(args)
            return self._record(replayer, k, args, leaves)
        if self._check is not None:
            self._check(args)
        return self._launcher(k, *args)

    @property
    def run_eager(self) -> Callable[[tuple], Any] | None:
        """The compiled replayer's whole plain-eager call of the op (``run_eager`` in
        native.cpp), where this forward replays with it; None otherwise."""
        replayer = self.replayer  # None once given up on (see _record_call)
        return replayer.run_eager if replayer is not None and self._outputs is not None else None

    def _record(
        self, replayer: Replayer, k: Any, args: Sequence[Any], leaves: Sequence[Any]
    ) -> Any:
        key = replayer.key(leaves)
        if key is None or key in self.unreplayable or repeats_a_tensor(leaves):
            return self._launcher(k, *args)
        # One recording at a time (the recording k is shared): another thread's call
        # meanwhile runs the launcher.
        if not self._recording.acquire(blocking=False):
            return self._launcher(k, *args)
        try:
            return self._record_call(replayer, args, leaves, key)
        finally:
            self._recording.release()

    def _record_call(
        self, replayer: Replayer, args: Sequence[Any], leaves: Sequence[Any], key: Any
    ) -> Any:
        self.recorded += 1
        result, recording, reason, retry = record(
            self._recording_kernels, self._launcher, args, leaves
        )
        saved = None  # set where the replayer carries backward (self._saved)
        if recording is not None and self._outputs is not None:
            eager = eager_template(recording.result, self._outputs)
            recording = dataclasses.replace(recording, eager=eager)
            if self._saved is not None and eager is not None:
                saved = saved_refs(recording.result, self._saved)
        if recording is not None and (
            replayer.add(leaves, recording)
            if saved is None
            else cast(BackwardReplayer, replayer).add(leaves, recording, saved)
        ):
            return result
        if retry and key not in self._retried:
            self._retried.add(key)  # a first launch's checked path: record the next call
            return result
        not_recorded(self.unreplayable, key, reason, MAX_SIGNATURES)
        if gives_up(self.unreplayable, replayer):
            self.replayer = None
        return result


def saved_refs(result: Any, layout: Sequence[tuple[str, int]]) -> tuple[int, ...] | None:
    """The references of what a forward's ``(outputs, saved)`` template saves, where they
    are what ``split_forward`` accepts for ``layout`` (an input saved is that input, an
    output that output, an extra a tensor); None otherwise (the Python path explains)."""
    if type(result) not in (tuple, list) or len(result) != 2:
        return None
    outputs, saved = (
        [part] if type(part) is int else list(part) if type(part) in (tuple, list) else None
        for part in result
    )
    if outputs is None or saved is None or len(saved) != len(layout):
        return None
    for (kind, index), ref in zip(layout, saved):
        if type(ref) is not int:
            return None
        if kind == "input" and ref != index:
            return None
        if kind == "output" and (index >= len(outputs) or ref != outputs[index]):
            return None
    return tuple(saved)
