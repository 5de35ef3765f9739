"""``k`` declared: what an op's author may call on the ``k`` a launcher receives.

Every ``k`` (a backend's ``KernelSet``, registration's ``FakeKernels``, a package's
``Kernels``, replaying's ``RecordingKernels``) satisfies ``Kernels``, which
tests/launch/test_kernels_protocol.py checks. A launcher may use exactly this:

    out = k.empty_like(x)                       # or k.empty(shape, dtype)
    k.sigmoid_fwd[grid, block](x, out, n)       # or [grid, block, shared_bytes]
    grid = min(portkit.cdiv(n, 256), 8 * portkit.sm_count(k))

``kind``, ``knob_choice`` and ``plain_allocation`` are read as declared, never probed
for (docs/design.md, "Declared capabilities"). Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .launch_contract import KernelsKind as KernelsKind

if TYPE_CHECKING:
    import torch

    from .knob_choice import KnobChoice


class Kernel(Protocol):
    """``k.NAME``: ``k.NAME[grid, block]`` or ``k.NAME[grid, block, shared_bytes]`` is
    the launch of that configuration, called with the kernel's arguments."""

    def __getitem__(self, config: Any) -> Callable[..., None]: ...


@runtime_checkable
class Kernels(Protocol):
    """What an author may call on ``k``, besides ``k.NAME`` (a ``Kernel``) for each of the
    op's kernels: an attribute, so the protocol cannot list it."""

    op: str  # the op's name
    implementation: str  # "twin", "numba", "sim", ..., "exported twin", "fake", "trace"
    kind: KernelsKind
    knob_choice: KnobChoice | None  # the op's knobs and tuned table (portkit.knobs)
    plain_allocation: bool  # production: no guard zones, no poisoned outputs; replays run

    @property
    def device(self) -> Any: ...  # "cuda", "cpu", or a torch.device (fake runs)

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor: ...

    def empty_like(self, tensor: torch.Tensor) -> torch.Tensor: ...


# portkit.X helpers an author may reach for on k by mistake, and how they are called
_HELPERS_ON_PORTKIT = {
    "sm_count": "portkit.sm_count(k)",
    "cdiv": "portkit.cdiv(a, b)",
    "knobs": "portkit.knobs(k, x)",
}


def no_kernel_message(op: object, name: str, kernels: Sequence[str], where: str = "") -> str:
    """What ``k.NAME`` says when the op has no kernel NAME (``where``: "in its twin
    implementation", say), pointing at the portkit function a helper's name means."""
    listed = ", ".join(sorted(kernels)) or "none"
    message = f"op {op} has no kernel {name!r}{where}; kernels: {listed}"
    helper = _HELPERS_ON_PORTKIT.get(name)
    return f"{message}. {name} is not on k: call {helper}" if helper else message
