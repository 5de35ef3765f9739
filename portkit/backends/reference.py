"""``torch``: the op's PyTorch reference. It has no kernels; the harness calls the
reference function itself and gradchecks it, proving the reference's backward."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from portkit.backends.base import Backend

if TYPE_CHECKING:
    from portkit.launch.kernel_set import LaunchTarget
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

    def launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]:
        raise TypeError("the torch reference has no kernels")
