"""The resident engine behind ``portkit watch`` and the notebook API: one ``Session``
kept for the life of the process, refreshed before every run, and per run only the ops
the change touched, failed cases first.

What a change touches: an edited prototype (its op alone is imported again, as a fresh
module), an edited twin (its op is kept; the backends compile the twin again because
their caches are keyed by its content), an edited project module a prototype imports
(every op, since it may be shared). The first run runs every watched op.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from portkit.errors import OpNotFound, PortkitError, describe, failure_site
from portkit.results import Outcome
from portkit.watch.model import OpVerdict, Rerun
from portkit.watch.modes import make_mode
from portkit.watch.rebuilds import compiled_since, digests, twin_cache_entries

if TYPE_CHECKING:
    from portkit.project.session import Session

SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".h", ".hpp")


class Engine:
    def __init__(
        self,
        session: Session,
        op_names: Sequence[str] = (),
        mode: str = "check",
        *,
        backends: Sequence[str] = (),
        cases: Sequence[str] = (),
        quick: bool = True,
    ) -> None:
        self.session = session
        for name in op_names:
            if name not in session.catalog.names:
                raise OpNotFound(name, session.catalog.names)
        self.op_names = list(op_names)
        self.mode = make_mode(mode, session.config, cases, quick, backends)
        self.runs = 0
        self._twins: dict[str, str] = {}  # op -> its twin's digest at the last run
        self._failed: dict[str, set[str]] = {}  # op -> cases that failed at its last run
        self._idle: dict[str, str] = {}  # op -> why its last run checked nothing
        self._sources: dict[Path, str] = {}  # watched file -> digest at the last run

    @property
    def ops(self) -> list[str]:
        """The ops watched: those named, else every op of the project (as it is now)."""
        return self.op_names or self.session.catalog.names

    @property
    def failing(self) -> list[str]:
        """The watched ops whose latest verdict failed or that did not load."""
        return [n for n in self.ops if self._failed.get(n)]

    def not_run(self) -> list[str]:
        """What the latest runs did not check, one entry each: requested backends that
        cannot run here, ops whose every case was skipped or matched no --case."""
        idle = [f"{n} ({self._idle[n]})" for n in self.ops if self._idle.get(n)]
        return self.mode.not_run() + idle

    def watched_paths(self) -> list[Path]:
        """The folders and files a change in which can change a verdict."""
        config = self.session.config
        folders = [d for d in (config.prototypes_dir, config.cuda_src_dir) if d.is_dir()]
        inside = tuple(d.resolve() for d in folders)
        helpers = [
            p
            for p in self.session.catalog.helper_files
            if not any(p.is_relative_to(folder) for folder in inside)
        ]
        return folders + [p for p in helpers if p.is_file()]

    def sources(self) -> list[Path]:
        files: list[Path] = []
        for path in self.watched_paths():
            found = path.rglob("*") if path.is_dir() else [path]
            files += [p for p in found if p.suffix in SOURCE_SUFFIXES and p.is_file()]
        return sorted(files)

    def stale(self) -> bool:
        """Whether a watched file changed since the last run started (an edit saved while
        it ran, which a watcher started afterwards would not report)."""
        return digests(self.sources()) != self._sources

    def run(
        self,
        on_progress: Callable[[Rerun], None] = lambda rerun: None,
        *,
        every_op: bool = False,
    ) -> Rerun:
        """Refresh the session and run the ops a change touched (``every_op``: all the
        watched ops); ``on_progress`` sees the re-run after each case."""
        t0 = time.perf_counter()
        self._sources = digests(self.sources())
        forgotten = set(self.session.refresh(keep_ops_on_twin_edit=True))
        catalog = self.session.catalog
        twins = {n: digests([catalog.twins[n]])[catalog.twins[n]] for n in catalog.twins}
        names = self.ops
        if every_op or not self.runs:
            touched = list(names)
        else:
            touched = [
                n
                for n in names
                if n in forgotten or twins.get(n) != self._twins.get(n) or n not in self._failed
            ]
        self._twins = twins
        self.runs += 1
        rerun = Rerun(self.runs, reimported=sorted(forgotten & set(touched)))
        cache_before = twin_cache_entries(self.session.config.cache_dir)
        for name in sorted(touched, key=lambda n: not self._failed.get(n)):  # failed first
            self._run_op(name, rerun, t0, on_progress)
        rerun.recompiled = compiled_since(cache_before, self.session.config.cache_dir)
        rerun.seconds = time.perf_counter() - t0
        return rerun

    def _run_op(
        self, name: str, rerun: Rerun, t0: float, on_progress: Callable[[Rerun], None]
    ) -> None:
        verdict = rerun.verdicts[name] = OpVerdict(name, self.mode.name)
        started = time.perf_counter()
        try:
            op = self.session.op(name)
            self.mode.begin(op)
            failed_before = self._failed.get(name, set())
            cases = sorted(self.mode.cases(op), key=lambda c: c.name not in failed_before)
            for case in cases:
                results, diffs = self.mode.run(op, case)
                verdict.results += results
                verdict.diffs += diffs
                if rerun.first_verdict is None:
                    rerun.first_verdict = time.perf_counter() - t0
                verdict.seconds = time.perf_counter() - started
                on_progress(rerun)
            verdict.results += self.mode.closing_rows(op)
        except PortkitError as exc:  # the op does not load (a syntax error), or a user error
            verdict.error, verdict.exception = str(exc), exc
            verdict.error_site = failure_site(exc)
        except Exception as exc:  # a resident loop reports what broke and goes on
            verdict.error, verdict.error_site = describe(exc), failure_site(exc)
        verdict.done = True
        verdict.seconds = time.perf_counter() - started
        if rerun.first_verdict is None:
            rerun.first_verdict = time.perf_counter() - t0
        self._failed[name] = verdict.failed_cases() | ({""} if verdict.error else set())
        idle = verdict.status is Outcome.SKIP
        self._idle[name] = _why_idle(verdict, self.mode.case_names) if idle else ""
        on_progress(rerun)


def _why_idle(verdict: OpVerdict, case_names: Sequence[str]) -> str:
    """Why an op's run checked nothing: its first skipped row's reason, else no case."""
    skipped = [r.detail.splitlines()[0] for r in verdict.results if r.detail]
    if skipped:
        return skipped[0]
    if case_names:
        return f"no case named {', '.join(case_names)}"
    return "no case ran"
