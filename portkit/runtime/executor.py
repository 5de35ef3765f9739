"""``PythonReplayer``: keys calls by their leaves and replays recordings, in Python.

The compiled replayer (``native.cpp``) does the same per call in C++; this one is the
fallback where that cannot be built, and the executable statement of what replaying means
(the CPU tests exercise it). Both are ``Replayer``s (``replayer_protocol.py``).

This module and ``steps.py`` import only torch and each other: ``portkit export`` ships
them byte for byte, and an exported package replays with them (runtime/replaying.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

from .steps import Recording, build_result  # relative: portkit export ships both files

_PLAIN = (torch.Tensor, torch.nn.Parameter)  # subclasses: the launcher decides

MAX_SIGNATURES = 256  # per launcher; a model calls an op with a few dozen signatures


def leaf_key(leaves: Sequence[Any]) -> tuple | None:
    """What a launcher may depend on: per tensor its dtype, device, sizes and strides; per
    scalar its exact type and bits. None where a leaf is anything else (or tensors span
    devices): such calls always run the launcher. The compiled replayer keys the same."""
    parts: list[Hashable] = []
    device = None
    for leaf in leaves:
        kind = type(leaf)
        if kind in _PLAIN:
            where = leaf.device  # type and index: a CPU and a meta tensor differ
            if device is None:
                device = where
            elif where != device:
                return None
            parts.append((leaf.dtype, where, tuple(leaf.shape), leaf.stride()))
        elif kind is float:
            parts.append((float, leaf.hex()))  # bits: -0.0 and NaN key like themselves
        elif kind in (int, bool, str) or leaf is None:
            parts.append((kind, leaf))
        else:
            return None
    return tuple(parts)


def flatten(args: Sequence[Any]) -> tuple[Any, ...]:
    """A backward's ``(saved, *grads)`` as leaves, led by a string of its structure so that
    two structures never share a key."""
    structure, leaves = [], []
    for arg in args:
        if type(arg) in (tuple, list):
            structure.append(f"{type(arg).__name__}{len(arg)}")
            leaves.extend(arg)
        else:
            structure.append("-")
            leaves.append(arg)
    return (",".join(structure), *leaves)


def repeats_a_tensor(leaves: Sequence[Any]) -> bool:
    """``f(x, x)``: a recording names tensors by position, and could not tell which."""
    tensors = [id(leaf) for leaf in leaves if isinstance(leaf, torch.Tensor)]
    return len(tensors) != len(set(tensors))


class PythonReplayer:
    """A ``Replayer`` (replayer_protocol.py) that carries no backward: per signature
    (``leaf_key``) a function of the leaves that replays its recording, the ``capacity``
    signatures added last. ``prepared`` makes the function: here ``replay`` reading the
    recording on each call; a package's ``PreparedReplayer`` compiles one (prepared.py)."""

    carries_backward = False
    # The compiled replayer's whole plain-eager call (native.py); this one has none.
    run_eager: Callable[[tuple], Any] | None = None
    op_kernels: Callable[..., Any] | None = None  # the compiled replayer's C++ op kernels

    def __init__(self, capacity: int = MAX_SIGNATURES) -> None:
        self._replays: dict[tuple, Callable[[Sequence[Any]], Any]] = {}
        self._capacity = capacity

    def key(self, leaves: Sequence[Any]) -> tuple | None:
        return leaf_key(leaves)

    def run(self, leaves: Sequence[Any]) -> Any:
        """The result of replaying this signature's recording, or None (not recorded)."""
        key = leaf_key(leaves)
        replayed = self._replays.get(key) if key is not None else None
        return None if replayed is None else replayed(leaves)

    def add(self, leaves: Sequence[Any], recording: Recording) -> bool:
        key = leaf_key(leaves)
        if key is None:
            return False
        if len(self._replays) >= self._capacity:
            self.forget()
        self._replays[key] = self.prepared(recording, leaves)
        return True

    def prepared(self, recording: Recording, leaves: Sequence[Any]) -> Callable[..., Any]:
        """What replays ``recording`` for calls of the signature of ``leaves``."""
        return functools.partial(replay, recording)

    def forget(self) -> None:
        """Drop every recording (the table is full: signatures follow a model's)."""
        self._replays.clear()

    def __len__(self) -> int:
        return len(self._replays)


def replay(recording: Recording, leaves: Sequence[Any]) -> Any:
    device = recording.device
    buffers = [
        torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype, device=device)
        for meta in recording.allocations
    ]
    for launch in recording.launches:
        step = launch.step
        values = list(step.values)
        for slot, ref in launch.refs:
            values[slot] = (leaves[ref] if ref >= 0 else buffers[-1 - ref]).data_ptr()
        step.driver.launch(
            step.grid, step.block, step.shared_bytes, step.stream(), values, step.warps
        )
    return build_result(recording.result, leaves, buffers)
