"""The one small interface every implementation of an op sits behind.

A backend answers three questions: can it run on this machine, can it run this
op, and what runs each of this op's kernels (its launch targets). Everything else
(``k`` around the targets, poisoned outputs and guard zones while checking, inputs,
autograd, comparison) is the caller's (``launch/compose.py``), so adding a backend never
touches the harness and a backend never sees the checker. What a backend can do beyond
that it declares as class attributes whose defaults here say "no" (the table in
docs/design.md, "Declared capabilities"); callers read them, never probe with hasattr.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from portkit.launch.kernel_set import KernelSet, LaunchTarget
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.runtime.knob_choice import KnobChoice
    from portkit.simt.machine import Machine

ROLES = ("reference", "prototype", "twin")


class Backend(ABC):
    name: ClassVar[str]
    role: ClassVar[str]  # one of ROLES
    device: ClassVar[str]  # torch device type its tensors live on: "cpu" or "cuda"
    simulated: ClassVar[bool] = False  # slow: skips cases marked gpu_only
    default: ClassVar[bool] = True  # run when no --backend is named
    description: ClassVar[str]

    # Declared capabilities.
    # Fast enough on a CPU for the `large` (GPU-sized) cases where no GPU runs them:
    # portkit's simulator (lockstep); a CPU twin or numba's simulator would take minutes.
    runs_large_cases_on_cpu: ClassVar[bool] = False
    # Compiles its kernels with line info when ``lineinfo`` is set (under compute-sanitizer,
    # so findings name source lines); a backend without the switch ignores ``lineinfo``.
    has_line_info: ClassVar[bool] = False
    # ``cache_report`` says where each kernel came from (`portkit check -v`).
    reports_cache: ClassVar[bool] = False

    lineinfo: bool = False
    # The simulated machine of the last ``launch_targets()`` call (records, tallies), where the
    # backend runs on portkit's simulator; None elsewhere.
    machine: Machine | None = None

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
    def launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]:
        """What runs each of ``op``'s kernels, by kernel name: the targets ``k`` launches
        (``k.NAME[grid, block](*args)`` ends in ``targets[NAME].launch(config, args)``)."""

    def checked_launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]:
        """The targets the harness runs while checking (``portkit check``, ``portkit
        diff``): a build made for finding bugs where the backend has one (twin-cpu's
        sanitized worker that runs each launch in two thread orders), else the plain ones."""
        return self.launch_targets(op)

    def knob_choice_for(self, op: Op) -> KnobChoice:
        """The op's declared knobs and tuning table: what ``portkit.knobs(k, x)`` reads."""
        from portkit.project.tuning_table import knob_choice

        return knob_choice(op, self.config)

    @property
    def implementation(self) -> str:
        """The name ``k`` carries (registered op names, guard reports): the backend's."""
        return self.name

    def kernels(self, op: Op) -> KernelSet:
        """The production ``k`` over the plain targets (``portkit.load``, tests): nothing
        poisoned, no guard zones. A checker composes its own (``launch/compose.py``)."""
        from portkit.launch.compose import compose_kernels

        return compose_kernels(self, op)

    def cache_report(self, ops: Sequence[Op]) -> list[str]:
        """One line per kernel on where it came from; only where ``reports_cache``."""
        return []

    def engine_report(self) -> list[str]:
        """``portkit check -v``: which engine ran the launches, where that says more
        than the results (the simulator's lockstep fallbacks)."""
        return []


def cuda_unavailable_reason() -> str | None:
    """Shared probe for backends that need an NVIDIA GPU through PyTorch."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch on this machine"
    return None
