"""The one small interface every implementation of an op sits behind.

A backend answers three questions: can it run on this machine, can it run this
op, and what is ``k`` (the kernels) for this op. Everything else (inputs, autograd,
comparison) is shared, so adding a backend never touches the harness.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from portkit.launch.kernel_set import KernelSet
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

ROLES = ("reference", "prototype", "twin")


class Backend(ABC):
    name: ClassVar[str]
    role: ClassVar[str]  # one of ROLES
    device: ClassVar[str]  # torch device type its tensors live on: "cpu" or "cuda"
    simulated: ClassVar[bool] = False  # slow: skips cases marked gpu_only
    default: ClassVar[bool] = True  # run when no --backend is named
    description: ClassVar[str]

    def __init__(self, config: ProjectConfig) -> None:
        self.config = config

    @cached_property
    def unavailable_reason(self) -> str | None:
        """Why this machine cannot run the backend, or None if it can."""
        return self._probe()

    @abstractmethod
    def _probe(self) -> str | None: ...

    def unsupported_reason(self, op: Op) -> str | None:
        """Why this backend cannot run ``op`` (e.g. it has no twin), or None."""
        return None

    @abstractmethod
    def kernels(self, op: Op, *, poison_outputs: bool = False) -> KernelSet: ...


def cuda_unavailable_reason() -> str | None:
    """Shared probe for backends that need an NVIDIA GPU through PyTorch."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch on this machine"
    return None
