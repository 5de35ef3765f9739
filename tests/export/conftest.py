"""The project every export test writes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.package_env import project_with


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The repository's sigmoid and vector_add in a project whose namespace is expns."""
    return project_with(tmp_path / "proj", ["sigmoid", "vector_add"], "expns")
