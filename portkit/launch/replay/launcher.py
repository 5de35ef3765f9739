"""``replaying(launcher, kernels)``: a launcher that replays its recorded calls.

On the production ``k`` (no guard zones, no poisoned outputs) a call whose signature was
recorded is replayed (``executor.py``/``native.py``); a new signature runs the launcher
once under the recorder and keeps the recording if it can be replayed; anything else
(another ``k``, such as ``FakeKernels`` or a checker's guarded one; a signature that cannot
be recorded) runs the launcher as always.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from portkit.launch.kernel_set import KernelSet
from portkit.launch.replay.executor import (
    MAX_SIGNATURES,
    PythonReplayer,
    flatten,
    repeats_a_tensor,
)
from portkit.launch.replay.recorder import MAX_FAILURES as MAX_FAILURES  # tests read it here
from portkit.launch.replay.recorder import gives_up, not_recorded
from portkit.launch.replay.recording import RecordingKernels, record
from portkit.launch.replay.steps import eager_template


def make_replayer(mode: str = "auto") -> Any:
    """The replayer ``mode`` asks for (the session's ``replay`` setting, PORTKIT_REPLAY):
    None ("off"), the Python one ("python"), or the compiled one where it builds, the
    Python one where it does not ("auto")."""
    if mode == "off":
        return None
    if mode != "python":
        from portkit.launch.replay.native import native_replayer, unavailable_reason

        native = native_replayer()
        if native is not None:
            return native
        _say_once(f"portkit: launches replay in Python: {unavailable_reason()}")
    return PythonReplayer()


_said: set[str] = set()


def _say_once(line: str) -> None:
    """One line on stderr per process: why the compiled replayer is not used."""
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr)


def replays_launches(kernels: KernelSet) -> bool:
    """Whether every target of ``kernels`` can repeat its launches (the twin's can)."""
    return all(t.has_plain_launch and t.has_replay_step for t in kernels.targets.values())


class ReplayingLauncher:
    """A forward or backward launcher, called as ``f(k, *args)`` like the launcher itself,
    that replays recorded signatures on ``kernels`` (see the module docstring).
    ``unreplayable`` says why each signature that could not be recorded was not."""

    def __init__(
        self,
        launcher: Callable[..., Any],
        kernels: KernelSet,
        replayer: Any,
        flat: bool,
        check: Callable[[Sequence[Any]], None] | None = None,
        outputs: int | None = None,
        saved: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        functools.update_wrapper(self, launcher)
        self._outputs = outputs  # a forward's number of outputs: recordings get an eager result
        # A forward's layout of saved tensors (OpLayout.saved): with a compiled replayer,
        # recordings name them so that replays can save them for backward (native.cpp).
        self._saved = saved if hasattr(replayer, "set_backward") else None
        self._launcher, self._kernels, self.replayer = launcher, kernels, replayer
        # An input check that depends on the inputs' metadata only, run here before the
        # launcher rather than by the caller: a replayed signature passed it when recorded.
        self._check = check
        self._flat = flat  # a forward's arguments are leaves; a backward's start with a tuple
        self._recording_kernels = RecordingKernels(kernels)
        self.unreplayable: dict[Any, str] = {}  # key -> why, for signatures seen
        # Calls run under the recorder: one per signature (two for a twin's first, whose
        # first launch builds its plan on the checked path).
        self.recorded = 0
        self._retried: set[Any] = set()
        self._recording = threading.Lock()

    def __call__(self, k: Any, *args: Any) -> Any:
        replayer = self.replayer
        # _plain_allocation: no guard zones and no poisoned outputs, i.e. production.
        production = replayer is not None and k is self._kernels and k._plain_allocation
        if production:
            leaves = args if self._flat else flatten(args)
            result = replayer.run(leaves)
            if result is not None:
                return result
        if self._check is not None:
            self._check(args)
        if production:
            return self._record(k, args, leaves)
        return self._launcher(k, *args)

    @property
    def run_eager(self) -> Callable[[tuple], Any] | None:
        """The compiled replayer's whole plain-eager call of the op (``run_eager`` in
        native.cpp), where this forward replays with it; None otherwise."""
        replayer = self.replayer  # None once given up on (see _record_call)
        return replayer.run_eager if replayer is not None and self._outputs is not None else None

    def _record(self, k: Any, args: Sequence[Any], leaves: Sequence[Any]) -> Any:
        key = self.replayer.key(leaves)
        if key is None or key in self.unreplayable or repeats_a_tensor(leaves):
            return self._launcher(k, *args)
        # One recording at a time (the recording k is shared): another thread's call
        # meanwhile runs the launcher.
        if not self._recording.acquire(blocking=False):
            return self._launcher(k, *args)
        try:
            return self._record_call(args, leaves, key)
        finally:
            self._recording.release()

    def _record_call(self, args: Sequence[Any], leaves: Sequence[Any], key: Any) -> Any:
        self.recorded += 1
        result, recording, reason, retry = record(
            self._recording_kernels, self._launcher, args, leaves
        )
        saved = None
        if recording is not None and self._outputs is not None:
            eager = eager_template(recording.result, self._outputs)
            recording = dataclasses.replace(recording, eager=eager)
            if self._saved is not None and eager is not None:
                saved = saved_refs(recording.result, self._saved)
        if recording is not None and (
            self.replayer.add(leaves, recording)
            if saved is None
            else self.replayer.add(leaves, recording, saved)
        ):
            return result
        if retry and key not in self._retried:
            self._retried.add(key)  # a first launch's checked path: record the next call
            return result
        not_recorded(self.unreplayable, key, reason, MAX_SIGNATURES)
        if gives_up(self.unreplayable, self.replayer):
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


def replaying(
    launcher: Callable[..., Any] | None,
    kernels: KernelSet,
    flat: bool,
    check: Callable[[Sequence[Any]], None] | None = None,
    outputs: int | None = None,
    mode: str = "auto",
    saved: Sequence[tuple[str, int]] | None = None,
) -> Any:
    """``launcher`` wrapped to replay on ``kernels`` with a replayer of its own (and to run
    ``check`` on every call it does not replay) where it can; ``launcher`` itself otherwise
    (or with ``mode`` "off")."""
    if launcher is None or not replays_launches(kernels):
        return launcher
    replayer = make_replayer(mode)
    if replayer is None:
        return launcher
    return ReplayingLauncher(launcher, kernels, replayer, flat, check, outputs, saved)
