"""``portkit tune --try``: named configurations, each timed beside the one this GPU runs.

A spec is ``knob=value[,knob=value...]``. It overrides the configuration the op's table
holds for this GPU and case (the declared defaults where it holds none), so
``--try bwd_elems=16`` asks what changing that knob alone would do. Values must be
declared ones: a launcher may rely on them (template instantiations, shared sizes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from portkit.errors import PortkitError
from portkit.runtime.knob_choice import bucket
from portkit.tuning.search import Config

if TYPE_CHECKING:
    from portkit.project.cases import Case


def parse_try(spec: str, declared: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """``"a=1,b=x"`` -> ``{"a": 1, "b": "x"}``, each value the declared one whose text it
    is. Raises PortkitError naming what is wrong: the form, the knob, the value."""
    overrides: dict[str, Any] = {}
    for part in (p.strip() for p in spec.split(",")):
        name, sep, text = part.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or not text:
            raise PortkitError(f"--try {spec!r}: write knob=value[,knob=value...]")
        if name not in declared:
            raise PortkitError(
                f"--try {spec!r}: no knob {name!r}; the op declares {', '.join(declared)}"
            )
        values = {str(v): v for v in declared[name]}
        if text not in values:
            raise PortkitError(
                f"--try {spec!r}: {name} takes {', '.join(values)} (its declared values); "
                f"got {text}"
            )
        overrides[name] = values[text]
    return overrides


def current_config(
    table: Mapping[str, Any] | None,
    gpu: str,
    case: Case,
    declared: Mapping[str, Sequence[Any]],
) -> Config:
    """What this GPU runs at ``case``: the configuration of its table entry (the one that
    records the case's name, else the one of its first input's shape bucket, which
    ``portkit.knobs(k, x)`` reads for a launcher's first input), else the defaults."""
    config = {name: values[0] for name, values in declared.items()}
    entries = (table or {}).get("gpus", {}).get(gpu, {})
    named = [e for e in entries.values() if isinstance(e, dict) and e.get("case") == case.name]
    dtype = case.input_dtypes[0] if case.input_dtypes else case.dtype
    entry = named[0] if named else entries.get(bucket(dtype, case.shapes[0] if case.shapes else ()))
    if isinstance(entry, dict):
        tabled = entry.get("config", {})
        config.update({k: v for k, v in tabled.items() if k in declared})
    return tuple(config.items())


def apply(current: Config, overrides: Mapping[str, Any]) -> Config:
    """``current`` with ``overrides`` set, in declaration order."""
    return tuple((name, overrides.get(name, value)) for name, value in current)
