"""The Python replayer: each recording prepared once into one function.

Where the compiled replayer (``native.cpp``) does not build, or ``PORTKIT_REPLAY=python``
asks, ``portkit.load`` and an exported package replay with ``PreparedReplayer``: ``add``
turns a recording into the source of one straight-line function, built once with
Python's ``compile`` (no NVRTC, no C++):

    def replay(leaves):
        l0 = leaves[0]
        b0 = empty_like(l0)                 # a buffer shaped as an input; else empty_strided
        static(F0, 4, 1, 1, 8, 0, C0, (l0.data_ptr(), b0.data_ptr(), V0_2), stream(0))
        return b0

Everything fixed for the signature (handles, grids, scalars, argument codes, shapes) is
bound once; a call allocates, reads data pointers and launches, through torch's launcher
of inductor's cubins where ``DriverKernel``'s rule allows, else ``DriverKernel.launch``.
``ReplayedOp`` is the op's callable over it (docs/fast-path.md). The key of a call
(``leaf_key``) is the compiled replayer's too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

from . import driver_launch, torch_private
from .registration import OpCallable
from .steps import MAX_SIGNATURES, Recording

_PLAIN = (torch.Tensor, torch.nn.Parameter)  # subclasses: the launcher decides
_SCALARS = (int, bool, str, type(None))
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch_private.dispatch_mode_count
_function_modes = torch_private.function_mode_enabled
_functorch_level = torch_private.functorch_level
_grad_enabled = torch.is_grad_enabled


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
        elif kind in _SCALARS:
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


def eager_key(inputs: Sequence[Any]) -> tuple | None:
    """The key of a plain-eager call: per tensor its dtype, device, sizes and strides, per
    scalar its exact type and value (a float's bits); None where the call is not plain
    (a subclass, a tensor wanting a gradient, any other leaf)."""
    grad = _grad_enabled()
    parts: list[Any] = []
    for leaf in inputs:
        kind = type(leaf)
        if kind in _PLAIN:
            if grad and leaf.requires_grad:
                return None
            parts.append((leaf.dtype, leaf.device, leaf.shape, leaf.stride()))
        elif kind is float:
            parts.append((float, leaf.hex()))
        elif kind in _SCALARS:
            parts.append((kind, leaf))
        else:
            return None
    return tuple(parts)


class PreparedReplayer:
    """A ``Replayer`` (replayer_protocol.py): per signature (``leaf_key``) one prepared
    function, the ``capacity`` signatures added last; and ``run_eager``: the op's
    plain-eager result, for a forward's recordings that have one (``Recording.eager``)."""

    carries_backward = False
    op_kernels: Callable[..., Any] | None = None  # the compiled replayer's C++ op kernels

    def __init__(self, capacity: int = MAX_SIGNATURES) -> None:
        self._replays: dict[tuple, Callable[[Sequence[Any]], Any]] = {}
        self._capacity = capacity
        self.eager: dict[tuple, Callable[[Sequence[Any]], Any]] = {}  # eager_key -> function

    key = staticmethod(leaf_key)

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
            self.forget()  # the table is full: signatures follow a model's
        self._replays[key] = prepare(recording, recording.result, leaves)
        plain = eager_key(leaves) if recording.eager is not None else None
        if plain is not None:
            self.eager[plain] = prepare(recording, recording.eager, leaves)
        return True

    def forget(self) -> None:
        """Drop every recording."""
        self._replays.clear()
        self.eager.clear()

    def __len__(self) -> int:
        return len(self._replays)

    def run_eager(self, inputs: Sequence[Any]) -> Any:
        """The op's result for a plain-eager call of a recorded signature, else None."""
        if _dispatch_modes() or _function_modes() or _functorch_level() is not None:
            return None
        key = eager_key(inputs)
        replay = self.eager.get(key) if key is not None else None
        return None if replay is None else replay(inputs)


def prepare(
    recording: Recording, template: Any, leaves: Sequence[Any]
) -> Callable[[Sequence[Any]], Any]:
    """One function ``replay(leaves)`` that repeats ``recording`` on new leaves of the
    same signature (those of the recorded call: ``leaves``) and returns ``template``
    (tuples, lists and None, with references for tensors) built from them."""
    names: dict[str, Any] = {"empty_like": torch.empty_like, "empty_strided": torch.empty_strided}
    lines = ["def replay(leaves):"]
    used = {ref for launch in recording.launches for _, ref in launch.refs}
    used |= {ref for ref in _refs(template) if ref >= 0}
    lines += [f"    l{i} = leaves[{i}]" for i in sorted(r for r in used if r >= 0)]
    for j, meta in enumerate(recording.allocations):
        like = _same_layout(meta, leaves)
        if like is not None:
            lines.append(f"    b{j} = empty_like(leaves[{like}])")
        else:
            names[f"S{j}"], names[f"T{j}"] = tuple(meta.shape), tuple(meta.stride())
            names[f"D{j}"], names["DEVICE"] = meta.dtype, recording.device
            lines.append(f"    b{j} = empty_strided(S{j}, T{j}, dtype=D{j}, device=DEVICE)")
    static = driver_launch.static_launcher()
    names["static"] = static
    names["stream"] = torch_private.current_raw_stream() or driver_launch.current_stream
    device = recording.device.index or 0
    for n, launch in enumerate(recording.launches):
        step = launch.step
        pointers = {slot: _name(ref) + ".data_ptr()" for slot, ref in launch.refs}
        values = []
        for slot, value in enumerate(step.values):
            if slot not in pointers:
                names[f"V{n}_{slot}"] = value
            values.append(pointers.get(slot, f"V{n}_{slot}"))
        packed = "(" + "".join(v + ", " for v in values) + ")"
        grid, block = [int(g) for g in step.grid], [int(b) for b in step.block]
        shared = int(step.shared_bytes)
        codes = [""]  # torch's launcher takes whole warps and slot codes it knows
        if step.warps and static is not None:
            codes = [driver_launch.STATIC_CODES.get(s) or "" for s in step.driver.slots]
        if all(codes):
            names[f"F{n}"], names[f"C{n}"] = int(step.driver.handle), "".join(codes)
            lines.append(
                f"    static(F{n}, {grid[0]}, {grid[1]}, {grid[2]}, {int(step.warps)}, "
                f"{shared}, C{n}, {packed}, stream({device}))"
            )
        else:  # packed by struct and launched with cuLaunchKernel (cuda.bindings)
            names[f"K{n}"] = step.driver
            lines.append(
                f"    K{n}.launch({tuple(grid)}, {tuple(block)}, {shared}, stream({device}), "
                f"{packed}, 0)"
            )
    lines.append(f"    return {_source(template)}")
    exec(compile("\n".join(lines) + "\n", "<portkit replay>", "exec"), names)
    return names["replay"]


def _refs(template: Any) -> list[int]:
    if type(template) is int:
        return [template]
    if template is None:
        return []
    return [ref for item in template for ref in _refs(item)]


def _name(ref: int) -> str:
    return f"l{ref}" if ref >= 0 else f"b{-1 - ref}"


def _source(template: Any) -> str:
    """``template`` as an expression over the replay's tensors."""
    if type(template) is int:
        return _name(template)
    if template is None:
        return "None"
    items = "".join(_source(t) + ", " for t in template)
    return f"({items})" if type(template) is tuple else f"[{items}]"


def _same_layout(meta: Any, leaves: Sequence[Any]) -> int | None:
    """A leaf that ``torch.empty_like`` copies into a buffer of ``meta``'s layout (same
    dtype, sizes and strides; contiguous, so empty_like keeps its strides): allocating
    like a tensor costs about half what ``empty_strided`` with keywords does."""
    for i, leaf in enumerate(leaves):
        if (
            type(leaf) in _PLAIN
            and leaf.dtype == meta.dtype
            and leaf.shape == meta.shape
            and leaf.stride() == meta.stride()
            and leaf.numel() > 0
            and leaf.is_contiguous()
        ):
            return i
    return None


class ReplayedOp(OpCallable):
    """The package's op: a plain-eager call of a recorded signature is one prepared
    function (``PreparedReplayer.run_eager`` inlined); any other call is ``OpCallable``'s."""

    def __init__(self, registered: Any, binding: Any, replayer: PreparedReplayer) -> None:
        super().__init__(registered, binding)
        self._eager = replayer.eager
        if registered.layout.extras == 0:  # its result is the op's: torch.ops replays too
            registered.eager_forward = replayer.run_eager

    def __call__(self, *inputs: Any) -> Any:
        if not (
            _is_compiling()
            or _dispatch_modes()
            or _function_modes()
            or _functorch_level() is not None
        ):
            key = eager_key(inputs)
            replay = self._eager.get(key) if key is not None else None
            if replay is not None:
                return replay(inputs)
        return OpCallable.__call__(self, *inputs)
