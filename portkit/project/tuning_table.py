"""The project's tuning tables: ``tuning/<op>.json``, one per op, written by ``portkit tune``
and committed with the op. Each holds, per GPU name and shape bucket, the knob
configuration that won there (with its time, the defaults' time and when it was tuned):

    {"format": 1, "op": "rmsnorm", "knobs": {"fwd_elems": [16, 8, 32], ...},
     "gpus": {"NVIDIA H200": {"bfloat16-16384x4096": {"config": {"fwd_elems": 8, ...},
                                                      "ms": 0.081, "default_ms": 0.093,
                                                      "case": "bfloat16-16384x4096"}}}}

``knob_choice(op, config)`` is what the backends hand their ``k`` (``k.knob_choice``): the
op's declaration with the table, read once per change of the file. A table that names a
knob or value the op no longer declares is a one-line error (run ``portkit tune`` again).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portkit.atomic_write import write_atomic
from portkit.errors import OpDefinitionError, PortkitError
from portkit.runtime.knob_choice import TABLE_FORMAT, KnobChoice, checked_values

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

TABLE_FOLDER = "tuning"

# (table path, the knobs declared) -> (file stamp, choice): keyed by what a choice is made
# of, so an edited op's declaration misses and an unchanged one hits whichever Op object
# asks (an object's id, the key once, outlived it and grew with every reload); the
# MAX_CHOICES used last are kept.
_choices: OrderedDict[tuple[Path, str], tuple[tuple[int, int] | None, KnobChoice]] = OrderedDict()
MAX_CHOICES = 64


def table_path(config: ProjectConfig, op_name: str) -> Path:
    return config.root / TABLE_FOLDER / f"{op_name}.json"


def read_table(path: Path) -> dict[str, Any] | None:
    """The table at ``path``, or None where there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PortkitError(f"{path}: cannot read the tuning table: {exc.strerror}") from exc
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PortkitError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(table, dict) or not isinstance(table.get("gpus", {}), dict):
        raise PortkitError(f"{path}: not a portkit tuning table (no 'gpus' object)")
    return table


def declared(op: Op) -> dict[str, tuple[Any, ...]]:
    return dict(op.definition.knobs)


def declared_choice(op: Op) -> KnobChoice:
    """The op's knobs with no table: the defaults everywhere (fake runs, traces)."""
    return KnobChoice(op.name, declared(op), None, OpDefinitionError)


def knob_choice(op: Op, config: ProjectConfig) -> KnobChoice:
    """The op's declaration and its table (the file as it is now; re-read when it changes)."""
    path = table_path(config, op.name)
    try:
        stat = path.stat()
        stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = None
    knobs = declared(op)
    key = (path, repr(sorted(knobs.items())))
    cached = _choices.get(key)
    if cached is not None and cached[0] == stamp:
        _choices.move_to_end(key)
        return cached[1]
    table = read_table(path) if stamp is not None else None
    choice = KnobChoice(op.name, knobs, table, OpDefinitionError, where=str(path))
    _choices[key] = (stamp, choice)
    _choices.move_to_end(key)
    while len(_choices) > MAX_CHOICES:
        _choices.popitem(last=False)
    return choice


def merge_results(
    path: Path, op: Op, gpu: str, results: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Write ``results`` (bucket -> entry) for ``gpu`` into the table at ``path`` (other
    GPUs' entries and other buckets kept; the knobs as declared now), whole or not at all.
    An entry tuned before a knob was declared keeps its place, that knob at its default
    (what the kernel did then, as the runtime reads it: a new knob's first value is the
    old behaviour); one naming a knob or value the op no longer declares is dropped:
    ``dropped`` in the returned table names its GPU."""
    table = read_table(path) or {}
    gpus, dropped = _still_declared(op, table.get("gpus", {}), str(path))
    gpus.setdefault(gpu, {}).update({bucket: dict(entry) for bucket, entry in results.items()})
    out = {
        "format": TABLE_FORMAT,
        "op": op.name,
        "knobs": {name: list(values) for name, values in declared(op).items()},
        "gpus": {name: dict(sorted(b.items())) for name, b in sorted(gpus.items()) if b},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(out, indent=1) + "\n")
    return {**out, "dropped": dropped}


def _still_declared(
    op: Op, gpus: Mapping[str, Any], where: str
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The table's entries whose configuration the op still declares (completed with the
    defaults of knobs declared since), and the GPUs that lost an entry."""
    knobs = declared(op)
    kept: dict[str, dict[str, Any]] = {}
    dropped: set[str] = set()
    for gpu, buckets in gpus.items():
        for bucket_name, entry in (buckets if isinstance(buckets, dict) else {}).items():
            try:
                config = checked_values(op.name, knobs, entry["config"], where, PortkitError)
            except (PortkitError, KeyError, TypeError, AttributeError):
                dropped.add(gpu)
                continue
            kept.setdefault(gpu, {})[bucket_name] = {**entry, "config": config}
    return kept, sorted(dropped)
