"""The launch configurations ``portkit check`` runs: every one the op's tuning table can
pick (``tuning/<op>.json``: each distinct tuned configuration) and the defaults, so a
configuration a GPU would choose in production is never one that was not checked.

An op without knobs, or without a table entry, runs once as its backends pick (the
defaults). With entries, each implementation runs once per configuration, pinned
whatever the device and shape, as a backend labelled ``twin (fwd_elems=8 ...)`` or
``twin (defaults)``; prototype and twin are compared within one configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from portkit.runtime.knob_choice import KnobChoice, describe
from portkit.project.tuning_table import knob_choice

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.launch.kernel_set import KernelSet
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


class PinnedBackend:
    """A backend whose ``k`` runs one knob configuration; everything else is the backend's."""

    def __init__(self, backend: Backend, choice: KnobChoice, label: str) -> None:
        self._backend, self._choice = backend, choice
        self.name = f"{backend.name} ({label})"  # no [..]: rich reads it as markup
        self.label = label

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def kernels(self, op: Op, *, poison_outputs: bool = False) -> KernelSet:
        k = self._backend.kernels(op, poison_outputs=poison_outputs)
        k.knob_choice = self._choice
        return k


def configuration_groups(
    op: Op, backends: Sequence[Backend], config: ProjectConfig | None
) -> list[list[Backend]]:
    """The backends to run, one list per configuration (each compared within itself)."""
    if not op.definition.knobs or config is None:
        return [list(backends)]
    choice = knob_choice(op, config)
    configurations = choice.configurations()
    if len(configurations) == 1:  # no tuned entry differs from the defaults
        return [list(backends)]
    groups = []
    for knobs in configurations:
        values = knobs.as_dict()
        label = "defaults" if knobs is choice.defaults else describe(values)
        pinned = choice.pinned(values, label)
        groups.append(
            [
                b if b.role == "reference" else cast("Backend", PinnedBackend(b, pinned, label))
                for b in backends
            ]
        )
    return groups
