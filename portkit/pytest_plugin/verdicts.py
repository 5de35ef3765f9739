"""The generated tests served from the verdict store (checking/verdicts), as `portkit
check` is: an item whose unit passed before under an unchanged key passes at once and is
reported as ``cached`` (its own category: ``c`` in the progress line, CACHED with ``-v``,
"N cached" in the final line), never as a plain pass. ``--portkit-no-cache`` (or
PORTKIT_VERDICT_CACHE=0) runs every item; ``--portkit-verdicts FILE`` names the store
(default: the cache dir's verdicts.json). Each worker saves its verdicts at the end of
the session, merged under the file's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from portkit.results import comparison_check

if TYPE_CHECKING:
    from portkit.backends import Backend
    from portkit.checking.verdicts.serve import Verdicts
    from portkit.project.cases import Case
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op
    from portkit.results import CheckResult

NO_CACHE_OPTION = "--portkit-no-cache"
VERDICTS_OPTION = "--portkit-verdicts"
CACHED = "portkit_cached"  # the user property of an item served from the store
_KEY = pytest.StashKey[Any]()


def add_options(group: Any) -> None:
    group.addoption(
        NO_CACHE_OPTION,
        action="store_true",
        default=False,
        help="run every generated item: serve no stored verdict and store none",
    )
    group.addoption(
        VERDICTS_OPTION,
        metavar="FILE",
        default=None,
        help="the verdict store to read and update (default: the cache dir's "
        "verdicts.json; a CI artefact shared with `portkit check --verdicts`)",
    )


def session_verdicts(config: pytest.Config, project: ProjectConfig) -> Verdicts | None:
    """The session's store bound to ``project``, or None where it is off (the option,
    the setting, --portkit-seeds N, or a sanitizer child)."""
    if _KEY not in config.stash:
        from pathlib import Path

        from portkit.checking.verdicts.serve import Verdicts
        from portkit.checking.verdicts.store import open_store

        enabled = (
            project.settings.verdict_cache
            and not config.getoption(NO_CACHE_OPTION, False)
            and config.getoption("--portkit-seeds", 1) <= 1
            and not config.getoption("portkit_under_sanitizer", None)
        )
        path = config.getoption(VERDICTS_OPTION, None)
        store = open_store(project.cache_dir, Path(path) if path else None, enabled)
        config.stash[_KEY] = None if store is None else Verdicts(store, project)
    return config.stash[_KEY]


def save(config: pytest.Config) -> None:
    verdicts = config.stash.get(_KEY, None)
    if verdicts is not None:
        verdicts.store.save()


def served(
    item: pytest.Item, verdicts: Verdicts | None, unit: str | None
) -> list[CheckResult] | None:
    """The stored rows of ``unit`` (a key), marking the item cached; None to run it."""
    if verdicts is None or unit is None:
        return None
    rows = verdicts.store.lookup(unit)
    if rows is not None:
        item.user_properties.append((CACHED, True))
    return rows


Belongs = Callable[["CheckResult"], bool]


def _own_rows(backend: str) -> Belongs:
    return lambda r: r.base_backend == backend and not r.is_comparison


def _pair_rows(prototype: str, twin: str) -> Belongs:
    return lambda r: r.base_backend == prototype and r.compared_with == twin


def every_row(row: CheckResult) -> bool:
    return True


def case_units(
    verdicts: Verdicts | None, op: Op, case: Case, backends: Sequence[Backend]
) -> dict[str, tuple[str, Belongs]]:
    """Unit label -> (key, which rows belong to it) for a case item's backends."""
    if verdicts is None:
        return {}
    units = {b.name: (verdicts.backend_key(op, case, b), _own_rows(b.name)) for b in backends}
    if len(backends) == 2:
        prototype, twin = backends
        check = comparison_check(twin.name)
        key = verdicts.pair_key(op, case, prototype, twin)
        units[f"{prototype.name} {check}"] = (key, _pair_rows(prototype.name, twin.name))
    return units


def record(
    verdicts: Verdicts | None,
    units: dict[str, tuple[str, Belongs]],
    op: Op,
    case: str,
    results: Sequence[CheckResult],
) -> None:
    if verdicts is None:
        return
    for label, (key, belongs) in units.items():
        rows = [r for r in results if belongs(r)]
        verdicts.store.record(key, f"{op.name} / {label} / {case}", rows)


def op_unit(verdicts: Verdicts | None, op: Op, check: str) -> str | None:
    return None if verdicts is None else verdicts.op_key(op, f"pytest {check}")


def report_status(report: pytest.TestReport) -> tuple[str, str, Any] | None:
    """``pytest_report_teststatus`` for an item served from the store."""
    if report.when != "call" or not report.passed:
        return None
    properties = getattr(report, "user_properties", ()) or ()
    if any(list(p)[:1] == [CACHED] for p in properties):
        return "cached", "c", ("CACHED", {"cyan": True})
    return None
