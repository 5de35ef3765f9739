"""The loop: run once, then wait for a save (``watchfiles``: the operating system's file
notifications, debounced, rather than a polling loop of our own) and run again, until
``runs`` runs are done, ``stop`` is set, or Ctrl-C."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from portkit.watch.engine import SOURCE_SUFFIXES, Engine
from portkit.watch.model import Rerun

# watchfiles groups the events of one save (an editor's write, rename and chmod): it
# yields once nothing changed for STEP_MS, and at the latest after DEBOUNCE_MS.
STEP_MS = 50
DEBOUNCE_MS = 1600
# How often the watcher looks at ``stop`` while nothing changes.
STOP_POLL_MS = 200


def _source_filter() -> Callable[[Any, str], bool]:
    from watchfiles import DefaultFilter

    default = DefaultFilter()
    return lambda change, path: default(change, path) and Path(path).suffix in SOURCE_SUFFIXES


def wait_for_change(engine: Engine, stop: threading.Event) -> bool:
    """Block until a watched source changes (True) or ``stop`` is set (False)."""
    from watchfiles import watch

    if engine.stale():  # saved while the last run ran
        return True
    paths = engine.watched_paths()
    for _changes in watch(
        *paths,
        watch_filter=_source_filter(),
        step=STEP_MS,
        debounce=DEBOUNCE_MS,
        stop_event=stop,
        rust_timeout=STOP_POLL_MS,
        yield_on_timeout=True,
        raise_interrupt=True,
    ):
        if stop.is_set():
            return False
        if engine.stale():  # an event whose content is what ran (a touch, a revert): wait on
            return True
    return False


def watch_loop(
    engine: Engine,
    view: Any,
    *,
    runs: int | None = None,
    stop: threading.Event | None = None,
    on_run: Callable[[Rerun], None] = lambda rerun: None,
) -> Rerun:
    """Run, show, wait, repeat; the last run. ``runs``: stop after that many runs (the
    first included); ``stop``: set from another thread to end the loop."""
    stop = stop or threading.Event()
    with view:
        while True:
            rerun = engine.run(view.progress)
            view.finished(rerun)
            on_run(rerun)
            if (runs is not None and engine.runs >= runs) or stop.is_set():
                return rerun
            view.waiting(engine.watched_paths())
            if not wait_for_change(engine, stop):
                return rerun
