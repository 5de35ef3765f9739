"""Serving stored verdicts: run only the units whose key changed, record what passed.

``Verdicts`` binds a store (store.py) to a project and computes each op's source digest
once. ``case_rows`` is ``run_case`` that first looks every unit of the case up: a
backend on the case, and each prototype/twin pair on it. A unit found is served (its rows
marked ``cached``); the rest run, and a pair whose verdict is missing runs both its sides.
``op_rows`` does the same for an op's compile and lint rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from portkit.checking.harness import run_case, skip_reason
from portkit.checking.verdicts import key as keys
from portkit.checking.verdicts.store import VerdictStore, open_store
from portkit.results import CheckResult, comparison_check

if TYPE_CHECKING:
    from pathlib import Path

    from portkit.backends import Backend
    from portkit.checking.case_runner import CheckSettings
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


def open_verdicts(config: ProjectConfig, path: Path | None, enabled: bool) -> Verdicts | None:
    """The run's verdict store bound to the project, None when off (``enabled`` False,
    or the project's settings turn the store off): what `portkit check` and each
    ``-j N`` worker read and update."""
    store = open_store(config.cache_dir, path, enabled and config.settings.verdict_cache)
    return None if store is None else Verdicts(store, config)


@dataclass
class Verdicts:
    store: VerdictStore
    config: ProjectConfig
    _sources: dict[str, str] = field(default_factory=dict)

    def sources(self, op: Op) -> str:
        if op.name not in self._sources:
            self._sources[op.name] = keys.op_sources(op, self.config)
        return self._sources[op.name]

    def backend_key(self, op: Op, case: Case, backend: Backend) -> str:
        return keys.unit_key(
            op, self.config, self.sources(op), "run", backend.device, [backend.name], case
        )

    def pair_key(self, op: Op, case: Case, prototype: Backend, twin: Backend) -> str:
        names, check = [prototype.name, twin.name], comparison_check(twin.name)
        return keys.unit_key(
            op, self.config, self.sources(op), "pair", twin.device, names, case, check
        )

    def op_key(self, op: Op, check: str) -> str:
        return keys.unit_key(op, self.config, self.sources(op), check, "cpu", [])

    # -- the harness's Reuse protocol (harness.py) ---------------------------------
    def case(
        self,
        op: Op,
        case: Case,
        backends: Sequence[Backend],
        settings: CheckSettings | None,
        unbuilt: dict[str, str],
    ) -> list[CheckResult]:
        return case_rows(self, op, case, backends, settings, unbuilt)

    def op_rows(
        self, op: Op, check: str, compute: Callable[[], list[CheckResult]]
    ) -> list[CheckResult]:
        return op_rows(self, op, check, compute)


def pairs_of(backends: Sequence[Backend]) -> list[tuple[Backend, Backend]]:
    """(prototype, twin) on one device: what ``cross_compare`` compares."""
    return [
        (p, t)
        for t in backends
        if t.role == "twin"
        for p in backends
        if p.role == "prototype" and p.device == t.device
    ]


def case_rows(
    verdicts: Verdicts,
    op: Op,
    case: Case,
    backends: Sequence[Backend],
    settings: CheckSettings | None,
    unbuilt: dict[str, str],
) -> list[CheckResult]:
    """``run_case`` with every unit whose verdict is stored served from the store."""
    store = verdicts.store
    active = [
        b for b in backends if not (skip_reason(op, case, b, backends) or unbuilt.get(b.name))
    ]
    served: dict[str, list[CheckResult]] = {}
    for backend in active:
        rows = store.lookup(verdicts.backend_key(op, case, backend))
        if rows is not None:
            served[backend.name] = rows
    pairs = pairs_of(active)
    served_pairs: dict[tuple[str, str], list[CheckResult]] = {}
    need = {b.name for b in active if b.name not in served}
    for prototype, twin in pairs:
        rows = store.lookup(verdicts.pair_key(op, case, prototype, twin))
        if rows is None:
            need |= {prototype.name, twin.name}
        else:
            served_pairs[(prototype.name, twin.name)] = rows
    to_run = [b for b in backends if b not in active or b.name in need]
    fresh = run_case(op, case, to_run, settings, unbuilt, context=backends) if to_run else []
    label = f"{op.name} / {{}} / {case.name}"
    for backend in active:
        if backend.name in need:  # ran: its verdict is stored, or forgotten if it failed
            own = [r for r in fresh if _of(r, backend.name) and not r.is_comparison]
            store.record(verdicts.backend_key(op, case, backend), label.format(backend.name), own)
    for prototype, twin in pairs:
        if (prototype.name, twin.name) not in served_pairs:
            check = comparison_check(twin.name)
            rows = [r for r in fresh if _of(r, prototype.name) and r.compared_with == twin.name]
            unit = label.format(f"{prototype.name} {check}")
            store.record(verdicts.pair_key(op, case, prototype, twin), unit, rows)
    results = list(fresh)
    for name, rows in served.items():
        if name in need:  # ran again for a pair: the fresh rows stand
            continue
        results += rows
    fresh_checks = {(r.backend, r.check) for r in fresh}
    for rows in served_pairs.values():
        results += [r for r in rows if (r.backend, r.check) not in fresh_checks]
    order = {b.name: i for i, b in enumerate(backends)}
    results.sort(key=lambda r: (r.is_comparison, order.get(r.base_backend, len(order))))
    return results


def _of(row: CheckResult, backend: str) -> bool:
    """Whether ``row`` came from ``backend`` (a tuned op runs each per configuration)."""
    return row.base_backend == backend


def op_rows(
    verdicts: Verdicts | None,
    op: Op,
    check: str,
    compute: Callable[[], list[CheckResult]],
) -> list[CheckResult]:
    """An op's rows of one kind (its compile rows, its lint row): served or computed."""
    if verdicts is None:
        return compute()
    unit = verdicts.op_key(op, check)
    rows = verdicts.store.lookup(unit)
    if rows is not None:
        return rows
    rows = compute()
    verdicts.store.record(unit, f"{op.name} / {check}", rows)
    return rows
