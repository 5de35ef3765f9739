"""``torch``: the op's PyTorch reference. It has no kernels; the harness calls the
reference function itself and gradchecks it, proving the reference's backward."""

from __future__ import annotations

from typing import TYPE_CHECKING

from portkit.backends.base import Backend
from portkit.launch.kernel_set import KernelSet

if TYPE_CHECKING:
    from portkit.project.discovery import Op


class TorchReference(Backend):
    name = "torch"
    role = "reference"
    device = "cpu"
    description = "the op's PyTorch reference (gradchecked in float64)"

    def _probe(self) -> str | None:
        try:
            import torch  # noqa: F401
        except ImportError:
            return "torch is not installed"
        return None

    def kernels(self, op: Op, *, poison_outputs: bool = False) -> KernelSet:
        raise TypeError("the torch reference has no kernels")
