"""``Session``: one project as a process works on it, with nothing hidden in the process.

It holds the ``ProjectConfig`` (pyproject.toml, with the ``Settings`` read from the
environment inside it), and the op catalog. The CLI builds one per command and the pytest
plugin one per test session, and pass it (or its config) down; a resident process (a
notebook, a watcher) keeps one and calls ``refresh()`` after an edit, which imports the
edited prototypes again as fresh modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from portkit.project.config import ProjectConfig, load_config
from portkit.project.discovery import Catalog, Op, discover, require_project
from portkit.project.environment import Settings


@dataclass
class Session:
    config: ProjectConfig
    catalog: Catalog

    @classmethod
    def from_environment(
        cls,
        start: Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        settings: Settings | None = None,
        budget: float | None = None,
        require: bool = True,
        strict: bool = False,
    ) -> Session:
        """The project at or above ``start`` (default: the working directory) with the
        settings of ``environ`` (default: ``os.environ``, the one place it is read), or
        ``settings`` already read. ``budget`` replaces ``sim-budget``; ``require``:
        outside a project is an error; ``strict`` (``--strict``) turns ``strict`` on."""
        config = load_config(start)
        if require:
            require_project(config)
        config = replace(config, settings=settings or Settings.from_environment(environ))
        if budget is not None:
            config = replace(config, sim_budget=budget)
        if strict:
            config = replace(config, strict=True)
        return cls.of(config)

    @classmethod
    def of(cls, config: ProjectConfig) -> Session:
        """A session of ``config`` as it is (its settings included), with a new catalog."""
        return cls(config, discover(config))

    @property
    def settings(self) -> Settings:
        return self.config.settings

    def configure(self, **settings: object) -> None:
        """Change switches for what follows (``--no-cache``: ``prototype_cache=False``)."""
        self.config = replace(self.config, settings=self.settings.changed(**settings))
        self.catalog.config = self.config

    def op(self, name: str) -> Op:
        return self.catalog.get(name)

    def refresh(self, keep_ops_on_twin_edit: bool = False) -> list[str]:
        """Forget the ops whose files changed since they were loaded (see
        ``Catalog.refresh``); the names forgotten."""
        return self.catalog.refresh(keep_ops_on_twin_edit)
