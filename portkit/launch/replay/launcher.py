"""``replaying(launcher, kernels)``: a launcher that replays its recorded calls.

On the production ``k`` (no guard zones, no poisoned outputs) a call whose signature was
recorded is replayed (runtime/``executor.py`` or ``native_replayer.py``); a new signature
runs the launcher once under the recorder and keeps the recording if it can be
replayed; anything else (another ``k``, such as ``FakeKernels`` or a checker's guarded
one; a signature that cannot be recorded) runs the launcher as always.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from portkit.launch.kernel_set import KernelSet
from portkit.launch.replay.recording import RecordingKernels
from portkit.runtime import replaying as runtime_replaying
from portkit.runtime.executor import PythonReplayer
from portkit.runtime.recorder import MAX_FAILURES as MAX_FAILURES  # tests read it here
from portkit.runtime.replayer_protocol import Replayer
from portkit.runtime.replaying import saved_refs as saved_refs  # native_replayer's docstring


def make_replayer(mode: str = "auto") -> Replayer | None:
    """The replayer ``mode`` asks for (the session's ``replay`` setting, PORTKIT_REPLAY):
    None ("off"), the Python one ("python"), or the compiled one where it builds, the
    Python one where it does not ("auto", after one line on stderr saying why: the
    runtime's ``compiled_replayer``, which an exported package asks the same way)."""
    if mode == "off":
        return None
    if mode != "python":
        from portkit.runtime.native_replayer import compiled_replayer

        native = compiled_replayer("portkit")
        if native is not None:
            return native
    return PythonReplayer()


def replays_launches(kernels: KernelSet) -> bool:
    """Whether every target of ``kernels`` can repeat its launches (the twin's can)."""
    return all(t.has_plain_launch and t.has_replay_step for t in kernels.targets.values())


class ReplayingLauncher(runtime_replaying.ReplayingLauncher):
    """The runtime's replaying launcher (``runtime/replaying.py``, the one an exported
    package uses) over portkit's ``k``, recording on ``RecordingKernels``."""

    def __init__(
        self,
        launcher: Callable[..., Any],
        kernels: KernelSet,
        replayer: Replayer,
        flat: bool,
        check: Callable[[Sequence[Any]], None] | None = None,
        outputs: int | None = None,
        saved: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        recording = RecordingKernels(kernels)
        super().__init__(launcher, kernels, recording, replayer, flat, check, outputs, saved)


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
