"""The launch configurations ``portkit check`` runs on a case: every one the op's tuning
table can pick for it (``tuning/<op>.json``: the entries, on any GPU, of the case's shape
bucket) and the defaults, so a configuration a GPU would choose in production is never
one that was not checked at that shape.

The bucket is the case's first input's (dtype and each dimension to the nearest power of
two, as ``portkit.knobs(k, x)`` reads it when a launcher passes its first input, as the
example ops do). An op without knobs, or a case no entry is for, runs once as its
backends pick (the defaults). Otherwise each implementation runs once per configuration,
pinned whatever the device, as a backend labelled ``twin (fwd_elems=8 ...)`` or ``twin
(defaults)``; prototype and twin are compared within one configuration. (Every
configuration on every case was tried first: on the CPU tiers it multiplied the checks of
a tuned op by its table's size, for shapes no table entry is chosen at;
tests/tuning/test_example_knobs.py runs every knob value in the simulator instead.) On a
GPU-sized case the CPU backends (simulator, CPU twin) run the defaults only: minutes per
configuration there, where the GPU checks the tuned ones at that shape in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from portkit.project.tuning_table import knob_choice
from portkit.results import configured
from portkit.runtime.knob_choice import KnobChoice, bucket, describe

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


class PinnedBackend:
    """A backend whose ``k`` runs one knob configuration; everything else is the backend's.
    Its rows carry the configuration as a field (``CheckResult.configuration``)."""

    def __init__(self, backend: Backend, choice: KnobChoice, label: str) -> None:
        self._backend, self._choice = backend, choice
        self.name = configured(backend.name, label)  # no [..]: rich reads it as markup
        self.label = label

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def knob_choice_for(self, op: Op) -> KnobChoice:
        return self._choice


def configuration_of(backend: Backend | str) -> str | None:
    """The knob configuration ``backend`` runs under (a ``PinnedBackend``'s label); None
    for any other backend, or a backend's bare name."""
    return backend.label if isinstance(backend, PinnedBackend) else None


def base_name(backend: Backend) -> str:
    """``backend``'s name without its configuration: "twin" for "twin (threads=64)"."""
    return backend._backend.name if isinstance(backend, PinnedBackend) else backend.name


def configuration_groups(
    op: Op, backends: Sequence[Backend], config: ProjectConfig | None, case: Case | None = None
) -> list[list[Backend]]:
    """The backends to run, one list per configuration (each compared within itself);
    with ``case``, the configurations the table can pick for its shape bucket."""
    if not op.definition.knobs or config is None:
        return [list(backends)]
    choice = knob_choice(op, config)
    configurations = choice.configurations(case_bucket(case) if case is not None else None)
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


def case_bucket(case: Case) -> str:
    """The shape bucket of the case's first input."""
    dtype = case.input_dtypes[0] if case.input_dtypes else case.dtype
    return bucket(dtype, case.shapes[0] if case.shapes else ())
