"""Guard zones: every tensor a checked kernel sees sits inside a larger allocation.

While checking, ``k.empty`` outputs and (through the harness) copies of the inputs live
in the middle of a buffer with a guard region before and after them, filled with a
signature value: the output poison NaN for floats, the byte 0xA5 for integers. After
each launch the guards of every tensor passed to the kernel are compared with that
value; a changed guard is a store outside the tensor, the porting bug (``i <= n``) that
otherwise lands in the caching allocator's padding where no comparison looks. Input
guards hold NaN, so an out-of-bounds *read* that feeds an output shows as a value
mismatch too.

``portkit.load`` never asks for guards: the production path allocates plainly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from portkit.errors import GuardViolation

if TYPE_CHECKING:
    import torch

# 4 KiB on each side: more than a block of 1,024 float32 threads can overrun by one
# element each, and a multiple of every alignment a kernel may assume (float4, 256 B).
GUARD_BYTES = 4096
INTEGER_GUARD_BYTE = 0xA5
SANITIZER_HINT = "portkit check {op} --sanitize memcheck"


def guard_element(dtype: torch.dtype) -> torch.Tensor:
    """One element of guard value, as bytes: the poison NaN for float32/float64, a NaN
    for other floats, 0xA5 bytes for integers and bool."""
    import torch

    from portkit.launch.kernel_set import poison_bits

    poison = poison_bits(dtype)
    if poison is not None:
        return torch.tensor([poison[1]], dtype=poison[0]).view(torch.uint8)
    if dtype.is_floating_point:
        return torch.tensor([math.nan], dtype=dtype).view(torch.uint8)
    itemsize = torch.empty((), dtype=dtype).element_size()
    return torch.full((itemsize,), INTEGER_GUARD_BYTE, dtype=torch.uint8)


@dataclass
class GuardedBuffer:
    """One allocation: ``guard`` elements, the tensor's ``numel`` elements, ``guard`` more."""

    buffer: torch.Tensor  # 1-D, the whole allocation
    numel: int
    guard: int
    pattern: torch.Tensor  # one element's bytes, on the buffer's device

    def regions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The guards before and after, as (elements, itemsize) byte matrices."""
        raw = self.buffer.view(torch_uint8()).view(-1, self.buffer.element_size())
        return raw[: self.guard], raw[self.guard + self.numel :]

    def changed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per guard element, whether it no longer holds the guard value."""
        before, after = self.regions()
        return (before != self.pattern).any(dim=1), (after != self.pattern).any(dim=1)


def torch_uint8() -> Any:
    import torch

    return torch.uint8


class GuardZones:
    """The guarded buffers of one implementation during one check, keyed by storage."""

    def __init__(self, parameter_names: dict[str, list[str]] | None = None) -> None:
        self.parameter_names = parameter_names or {}
        self._buffers: dict[int, GuardedBuffer] = {}

    def allocate(self, shape: Sequence[int], dtype: torch.dtype, device: str) -> torch.Tensor:
        """A tensor of ``shape`` (contents undefined) in the middle of a guarded buffer."""
        import torch

        numel = math.prod(shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        guard = max(1, GUARD_BYTES // itemsize)
        buffer = torch.empty(guard + numel + guard, dtype=dtype, device=device)
        pattern = guard_element(dtype).to(device)
        raw = buffer.view(torch.uint8).view(-1, itemsize)
        raw[:guard] = pattern
        raw[guard + numel :] = pattern
        record = GuardedBuffer(buffer, numel, guard, pattern)
        self._buffers[buffer.untyped_storage().data_ptr()] = record
        # detach(): a leaf sharing the storage, so the harness may set requires_grad.
        return buffer[guard : guard + numel].view(tuple(shape)).detach()

    def copy_in(self, tensor: torch.Tensor) -> torch.Tensor:
        """A guarded copy of ``tensor`` (an input), with its requires_grad."""
        copy = self.allocate(tensor.shape, tensor.dtype, tensor.device.type)
        copy.copy_(tensor.detach())
        return copy.requires_grad_(tensor.requires_grad)

    def verify(self, op: str, implementation: str, kernel: str, args: Sequence[Any]) -> None:
        """Raise ``GuardViolation`` if the launch of ``kernel`` changed a guard of one of
        the tensors in ``args``."""
        import torch

        checked: list[tuple[int, GuardedBuffer, torch.Tensor, torch.Tensor]] = []
        for position, arg in enumerate(args):
            if not isinstance(arg, torch.Tensor):
                continue
            record = self._buffers.get(arg.untyped_storage().data_ptr())
            if record is not None and all(record is not c[1] for c in checked):
                checked.append((position, record, *record.changed()))
        if not checked:
            return
        # One device-to-host transfer for all guards of this launch.
        flags = torch.stack([torch.cat([b, a]).any() for _, _, b, a in checked]).tolist()
        for (position, record, before, after), hit in zip(checked, flags):
            if hit:
                raise self._violation(
                    op, implementation, kernel, position, args, record, before.cpu(), after.cpu()
                )

    def _violation(self, op, implementation, kernel, position, args, record, before, after):
        names = self.parameter_names.get(kernel, [])
        name = f" ({names[position]})" if position < len(names) else ""
        parts = []
        if before.any():
            # Guard element j before the tensor is index -(guard - j).
            first = int(before.nonzero()[0]) - record.guard
            parts.append(f"{int(before.sum())} element(s) before its start (lowest index {first})")
        if after.any():
            last = record.numel + int(after.nonzero()[-1])
            parts.append(
                f"{int(after.sum())} element(s) after its end (indices {record.numel} to {last} "
                f"of a tensor of {record.numel})"
            )
        return GuardViolation(
            f"kernel {kernel} ({implementation}) wrote outside tensor argument {position}{name}, "
            f"{args[position].dtype} of shape {tuple(args[position].shape)}: "
            f"{'; '.join(parts)}. Run `{SANITIZER_HINT.format(op=op)}` for the thread and line",
            kernel=kernel,
            implementation=implementation,
            argument=position,
            before=int(before.sum()),
            after=int(after.sum()),
        )
