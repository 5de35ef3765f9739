"""The verdict store: one plain JSON file of passing units, keyed by content (key.py).

    {"format": 2, "verdicts": {"<key>": {"unit": "sigmoid / sim / float32-n129",
                                          "used": "2026-11-27", "rows": [<CheckResult>...]}}}

Format 2 rows carry their ``stage`` (results.Stage); a format-1 file, which predates it,
is said in one line and treated as empty (each row is checked again and stored anew).

Only units whose every row passed are kept; a unit that fails is removed, so a failure is
never served. The default file is ``<cache-dir>/verdicts.json``; ``--verdicts PATH``
names another (a CI artefact restored before the run and saved after it). Writing takes
a lock beside the file, reads what other processes (pytest-xdist workers) stored
meanwhile, merges, and replaces the file whole (atomic_write). A file that cannot be
read or parsed is said in one line on stderr and treated as empty; one that cannot be
written costs the next run its time, never this run its result. Entries unused for
``KEEP_DAYS`` days are dropped when the file is written.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from portkit.atomic_write import write_atomic
from portkit.cache_files import notice
from portkit.errors import ConfigError
from portkit.file_lock import locked
from portkit.results import CheckResult, Outcome

FORMAT = 2
FILE_NAME = "verdicts.json"
KEEP_DAYS = 30


def default_path(cache_dir: Path) -> Path:
    return cache_dir / FILE_NAME


def checked_path(path: Path) -> Path:
    """A ``--verdicts PATH`` the run can write: its folder must exist. Raises ConfigError
    (exit 2) before anything runs."""
    path = path.expanduser()
    if path.is_dir():
        raise ConfigError(f"--verdicts {path}: is a folder; name a file, e.g. {path / FILE_NAME}")
    if not path.parent.is_dir():
        raise ConfigError(
            f"--verdicts {path}: folder {path.parent} does not exist (create it, or restore "
            f"the CI artefact into an existing folder)"
        )
    return path


def _today() -> str:
    return datetime.date.today().isoformat()


def _row(data: dict[str, Any]) -> CheckResult:
    # served, not run: the time column shows what this run spent
    return replace(CheckResult.from_dict(data), cached=True, seconds=0.0)


_SAID: set[str] = set()  # the lines already said in this process


def _say_once(line: str) -> None:
    """A line said once: a run reads the file when it starts and again when it saves."""
    if line not in _SAID:
        _SAID.add(line)
        notice(line)


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of ``path``; {} when missing, and, said once, when unreadable."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        _say_once(f"verdict file {path} is unreadable ({exc.strerror or exc}); re-checking all")
        return {}
    try:
        data = json.loads(text)
        version = data.get("format") if isinstance(data, dict) else None
        if isinstance(version, int) and version < FORMAT:
            _say_once(
                f"verdict file {path} is of an older portkit (format {version}); re-checking all"
            )
            return {}
        if data.get("format") != FORMAT or not isinstance(data.get("verdicts"), dict):
            raise ValueError(f"not a verdict file of format {FORMAT}")
        return {
            k: v
            for k, v in data["verdicts"].items()
            if isinstance(v, dict) and isinstance(v.get("rows"), list)
        }
    except (ValueError, AttributeError, TypeError) as exc:
        _say_once(f"verdict file {path} is damaged ({exc}); treated as empty, re-checking all")
        return {}


@dataclass
class VerdictStore:
    path: Path
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    added: dict[str, dict[str, Any]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    served: int = 0  # units served from the store in this run

    @classmethod
    def open(cls, path: Path) -> VerdictStore:
        return cls(path, _read(path))

    def lookup(self, key: str) -> list[CheckResult] | None:
        """The rows of a unit stored as passing under ``key`` (marked cached), or None."""
        entry = self.added.get(key) or self.entries.get(key)
        if entry is None or key in self.removed:
            return None
        try:
            rows = [_row(r) for r in entry["rows"]]
        except (KeyError, TypeError, ValueError):
            return None  # a hand-edited entry: checked again
        if not rows or any(r.status != Outcome.PASS for r in rows):
            return None  # never serve anything but a pass
        if entry.get("used") != _today():
            self.added[key] = {**entry, "used": _today()}
        self.served += 1
        return rows

    def record(self, key: str, unit: str, rows: Sequence[CheckResult]) -> None:
        """Keep a unit that passed in full; forget one that did not (a unit with no
        rows, e.g. the reference on a case without gradcheck, is neither)."""
        if not rows:
            return
        if all(r.status == Outcome.PASS and not r.cached for r in rows):
            stored = [asdict(replace(r, cached=False)) for r in rows]
            for row in stored:
                row["status"] = str(row["status"])
            self.added[key] = {"unit": unit, "used": _today(), "rows": stored}
            self.removed.discard(key)
        elif not any(r.cached for r in rows):
            self.added.pop(key, None)
            self.removed.add(key)

    def save(self) -> None:
        """Merge this run's changes into the file, under its lock; a file that cannot be
        written is said on stderr (the verdicts are lost, not the run's results)."""
        if not self.added and not self.removed:
            return
        try:
            with locked(self.path.parent):
                current = _read(self.path) if self.path.exists() else {}
                if not self.added and not any(key in current for key in self.removed):
                    self.removed = set()  # failures never stored: nothing to write
                    return
                current.update(self.added)
                for key in self.removed:
                    current.pop(key, None)
                cutoff = (datetime.date.today() - datetime.timedelta(days=KEEP_DAYS)).isoformat()
                kept = {k: v for k, v in current.items() if str(v.get("used", "")) >= cutoff}
                text = json.dumps({"format": FORMAT, "verdicts": kept}, indent=0)
                write_atomic(self.path, text.encode())
        except OSError as exc:
            notice(f"could not write verdict file {self.path} ({exc.strerror or exc})")
            return
        self.entries, self.added, self.removed = kept, {}, set()


def open_store(cache_dir: Path, path: Path | None, enabled: bool) -> VerdictStore | None:
    """The run's store: ``path`` (--verdicts) or the cache folder's, None when off."""
    if not enabled:
        return None
    return VerdictStore.open(checked_path(path) if path is not None else default_path(cache_dir))
