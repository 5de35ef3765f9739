"""Replay of recorded launcher calls, for ``portkit.load`` and an exported package alike.

``ReplayingLauncher`` wraps a forward or backward launcher: on the production ``k`` a
recorded signature is replayed (``native_replayer.py`` where it builds, else
``prepared.py``); a new one runs the launcher once on a ``RecordingKernels`` under the
recorder (``recorder.py``) and keeps the recording if a replay would repeat it; anything
else runs the launcher, with every check and message it had. ``replayed`` wraps an op's
launchers so; docs/fast-path.md explains.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from . import launch_contract as contract
from . import native_replayer
from .prepared import PreparedReplayer, flatten, repeats_a_tensor
from .recorder import MAX_FAILURES, Call, record
from .replay_setting import replay_mode
from .replayer_protocol import BackwardReplayer, Replayer, carries_backward
from .steps import MAX_SIGNATURES, eager_template


def package_replay_mode() -> str:
    """How an exported package replays: ``PORTKIT_REPLAY`` as portkit reads it ("off",
    "python": the prepared replayer, "auto": the compiled one where it builds; a
    package has no portkit, so it reads this one variable of portkit's table itself)."""
    return replay_mode(os.environ.get("PORTKIT_REPLAY", ""))


def replayers(who: str, mode: str) -> tuple[Replayer, Replayer] | None:
    """An op's forward and backward replayers for ``mode`` (``replay_mode``'s): None for
    "off"; the compiled ones where ``native.cpp`` builds or was built ("auto"), else,
    after one line on stderr naming ``who`` and why, the prepared ones."""
    if mode == "off":
        return None
    if mode == "auto":
        forward = native_replayer.compiled_replayer(who)
        backward = native_replayer.compiled_replayer(who)
        if forward is not None and backward is not None:
            return forward, backward
    return PreparedReplayer(), PreparedReplayer()


def replayed(
    forward: Callable[..., Any],
    backward: Callable[..., Any] | None,
    kernels: Any,
    check: Callable[[Sequence[Any]], None],
    custom_check: bool,
    layout: Any,
    mode: str,
    who: str,
) -> tuple[Any, Any, Callable[[Sequence[Any]], None]]:
    """An op's ``(forward, backward, check)`` replaying on ``kernels`` as ``mode`` asks
    (``replayers``), or as given. Without the author's check_inputs (``custom_check``)
    the input check reads metadata only, which a replay's key holds: the replaying
    forward runs it on the calls it does not replay, and the binding's check is
    ``checked_by_the_forward``."""
    moved = None if custom_check else check
    outputs = layout.outputs if moved is not None else None  # its eager call replays
    pair = replayers(who, mode)
    if pair is None:
        return forward, backward, check
    forward = ReplayingLauncher(forward, kernels, pair[0], True, moved, outputs, layout.saved)
    if backward is not None:
        backward = ReplayingLauncher(backward, kernels, pair[1], False)
    return forward, backward, check if moved is None else checked_by_the_forward


def checked_by_the_forward(inputs: Sequence[Any]) -> None:
    """The binding's check where the replaying forward runs the real one itself."""


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
            kernel[config](*args)  # the production k's launch, with its checks and messages

        return launch


class RecordingKernels:
    """``k`` for a recorded call: the production ``k``'s kernels (portkit's ``KernelSet``
    or a package's ``Kernels``, each with its launch ``targets``), reporting to ``call``."""

    def __init__(self, kernels: Any) -> None:
        self._k = kernels
        self.call = Call(())
        for name in kernels.targets:
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
    that replays recorded signatures on ``kernels`` with ``replayer`` (compiled or
    prepared) and records new ones on a ``RecordingKernels`` over the same kernels.
    ``unreplayable`` says why each signature that could not be recorded was not."""

    def __init__(
        self,
        launcher: Callable[..., Any],
        kernels: Any,
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
        self._recording_kernels = RecordingKernels(kernels)  # a k that records
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
        """The replayer's whole plain-eager call of the op, where this forward replays;
        None otherwise (a backward, or given up on)."""
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
        if len(self.unreplayable) >= MAX_SIGNATURES:
            self.unreplayable.clear()
        self.unreplayable[key] = reason or "its leaves cannot be keyed"
        if len(self.unreplayable) >= MAX_FAILURES and not len(replayer):
            self.replayer = None  # never recorded: its calls pay no key any more
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
