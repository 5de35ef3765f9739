"""The one place a backend's ``k`` is made: its launch targets, the op's knob choice, and
what a checker adds around them.

A backend only says what runs each kernel (``Backend.launch_targets(op)``, and
``checked_launch_targets(op)`` where it has a build made for finding bugs). Whoever asks
for ``k`` composes the rest here: the harness its poisoned outputs (``launch/poison.py``)
and guard zones (``launch/guards.py``), a benchmark the poison alone, ``portkit.load``
nothing. So no backend sees a checker's concern, and a new one cannot forget to pass one
on (docs/design.md, "Backends return launch targets").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from portkit.launch.kernel_set import KernelSet, LaunchTarget

if TYPE_CHECKING:
    from portkit.launch.guards import GuardZones
    from portkit.project.discovery import Op
    from portkit.runtime.knob_choice import KnobChoice


class TargetSource(Protocol):
    """What ``compose_kernels`` asks of a backend (``portkit.backends.Backend``; the
    protocol keeps this layer below the backends)."""

    @property
    def implementation(self) -> str: ...  # the name ``k`` carries: the backend's

    @property
    def device(self) -> str: ...

    def launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]: ...

    def checked_launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]: ...

    def knob_choice_for(self, op: Op) -> KnobChoice | None: ...


def compose_kernels(
    source: TargetSource,
    op: Op,
    *,
    checked: bool = False,
    poison: bool = False,
    guards: GuardZones | None = None,
) -> KernelSet:
    """``k`` for ``op`` on ``source``: the targets of its checked build where ``checked``
    (the harness: twin-cpu's sanitized worker), else its plain ones; outputs from
    ``k.empty*`` filled with the poison where ``poison``; every tensor the kernels see
    between ``guards``' zones, verified after each launch, where given. The defaults are
    the production ``k`` (``Backend.kernels``)."""
    targets = source.checked_launch_targets(op) if checked else source.launch_targets(op)
    return KernelSet(
        op.name,
        source.implementation,
        source.device,
        targets,
        poison,
        guards,
        knob_choice=source.knob_choice_for(op),
    )
