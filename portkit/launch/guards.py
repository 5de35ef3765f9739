"""Guard zones: every tensor a checked kernel sees sits inside a larger allocation.

While checking, ``k.empty`` outputs and (through the harness) copies of the inputs live
in the middle of a buffer with a guard region before and after them, filled with a
signature value: the output poison NaN for floats (another NaN around inputs), the byte
0xA5 for integers. After each launch the guards of every tensor passed to the kernel are
compared with that value; a changed guard is a store outside the tensor, the porting bug
(``i <= n``) that otherwise lands in the caching allocator's padding where no comparison
looks. Input
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


def guard_element(dtype: torch.dtype, around_input: bool = False) -> torch.Tensor:
    """One element of guard value, as bytes: the poison NaN around outputs, another NaN
    around inputs (``poison.input_guard_bits``), a NaN for other floats, 0xA5 bytes for
    integers and bool."""
    import torch

    from portkit.launch.poison import input_guard_bits, poison_bits

    poison = input_guard_bits(dtype) if around_input else poison_bits(dtype)
    if poison is not None:
        return torch.tensor([poison[1]], dtype=poison[0]).view(torch.uint8)
    if dtype.is_floating_point:
        return torch.tensor([math.nan], dtype=dtype).view(torch.uint8)
    return torch.full((dtype.itemsize,), INTEGER_GUARD_BYTE, dtype=torch.uint8)


@dataclass
class GuardedBuffer:
    """One allocation: ``guard`` elements, the tensor's ``numel`` elements, ``guard`` more."""

    buffer: torch.Tensor  # 1-D, the whole allocation
    numel: int
    guard: int
    expected: torch.Tensor  # the bytes one guard region must hold, on the buffer's device

    def regions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The guards before and after, as flat byte tensors."""
        import torch

        raw = self.buffer.view(torch.uint8)
        size = self.expected.numel()
        return raw[:size], raw[raw.numel() - size :]

    def intact(self) -> bool:
        import torch

        before, after = self.regions()
        return torch.equal(before, self.expected) and torch.equal(after, self.expected)

    def changed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per guard element, whether it no longer holds the guard value (on the CPU)."""
        itemsize = self.buffer.element_size()
        expected = self.expected.view(-1, itemsize).cpu()
        before, after = (r.view(-1, itemsize).cpu() for r in self.regions())
        return (before != expected).any(dim=1), (after != expected).any(dim=1)


class GuardZones:
    """The guarded buffers of one implementation during one check, keyed by storage."""

    def __init__(self, parameter_names: dict[str, list[str]] | None = None) -> None:
        self.parameter_names = parameter_names or {}
        self._buffers: dict[int, GuardedBuffer] = {}
        self._expected: dict[tuple[Any, str, bool], torch.Tensor] = {}

    def _guard_bytes(self, dtype: torch.dtype, device: str, around_input: bool) -> torch.Tensor:
        """One guard region's bytes for ``dtype`` on ``device``, made once."""
        key = (dtype, device, around_input)
        if key not in self._expected:
            element = guard_element(dtype, around_input)
            count = max(1, GUARD_BYTES // element.numel())
            self._expected[key] = element.repeat(count).to(device)
        return self._expected[key]

    def allocate(
        self, shape: Sequence[int], dtype: torch.dtype, device: str, around_input: bool = False
    ) -> torch.Tensor:
        """A tensor of ``shape`` (contents undefined) in the middle of a guarded buffer."""
        import torch

        numel = math.prod(shape)
        expected = self._guard_bytes(dtype, device, around_input)
        guard = expected.numel() // dtype.itemsize
        buffer = torch.empty(guard + numel + guard, dtype=dtype, device=device)
        raw = buffer.view(torch.uint8)
        raw[: expected.numel()] = expected
        raw[raw.numel() - expected.numel() :] = expected
        record = GuardedBuffer(buffer, numel, guard, expected)
        self._buffers[buffer.untyped_storage().data_ptr()] = record
        # detach(): a leaf sharing the storage, so the harness may set requires_grad.
        return buffer[guard : guard + numel].view(tuple(shape)).detach()

    def copy_in(self, tensor: torch.Tensor) -> torch.Tensor:
        """A guarded copy of ``tensor`` (an input), with its requires_grad."""
        copy = self.allocate(tensor.shape, tensor.dtype, tensor.device.type, around_input=True)
        copy.copy_(tensor.detach())
        return copy.requires_grad_(tensor.requires_grad)

    def verify(self, op: str, implementation: str, kernel: str, args: Sequence[Any]) -> None:
        """Raise ``GuardViolation`` if the launch of ``kernel`` changed a guard of one of
        the tensors in ``args``."""
        import torch

        seen: set[int] = set()
        for position, arg in enumerate(args):
            if not isinstance(arg, torch.Tensor):
                continue
            key = arg.untyped_storage().data_ptr()
            record = self._buffers.get(key)
            if record is None or key in seen:
                continue
            seen.add(key)
            if not record.intact():
                raise self._violation(op, implementation, kernel, position, args, record)

    def _violation(
        self,
        op: str,
        implementation: str,
        kernel: str,
        position: int,
        args: Sequence[Any],
        record: GuardedBuffer,
    ) -> GuardViolation:
        before, after = record.changed()
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
