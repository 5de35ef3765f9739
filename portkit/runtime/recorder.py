"""The recorder's rules, over any ``k`` that records (``replaying.RecordingKernels``):
what one recorded call did and whether a replay could repeat it.

``record`` runs a launcher under a ``TorchDispatchMode``: any other PyTorch operation (a
view, a ``torch.zeros``, an ``.item()``), a tensor that is neither an input nor a buffer
from ``k.empty*``, or a result made of anything else leaves the signature to the
launcher (docs/fast-path.md, "Replaying recorded calls").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .steps import RecordedLaunch, Recording, Ref, ReplayLaunch  # relative: shipped as is

# Signatures that could not be recorded before replay is given up for a launcher that
# never recorded one: its calls then pay no key at all.
MAX_FAILURES = 8


class Call:
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

    def allocated(self, allocate: Callable[..., Any], *args: Any) -> Any:
        """``allocate(*args)``, noted as one of the call's buffers."""
        self.allocating += 1
        try:
            buffer = allocate(*args)
        finally:
            self.allocating -= 1
        if not self.allocating:  # empty_like may call empty: note the buffer once
            self.buffers.append(buffer)
        return buffer

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


def record(
    kernels: Any,
    launcher: Callable[..., Any],
    args: Sequence[Any],
    leaves: Sequence[Any],
) -> tuple[Any, Recording | None, str | None, bool]:
    """Run ``launcher(kernels, *args)`` with a fresh ``kernels.call``: its result, its
    recording or why there is none, and whether a launch took the checked path (worth
    one more try)."""
    import torch

    from .torch_private import TorchDispatchMode

    call = kernels.call = Call(leaves)

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
        kernels.call = Call(())
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
