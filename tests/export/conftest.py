"""The project every export test writes from."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The repository's sigmoid and vector_add in a project whose namespace is expns."""
    root = tmp_path / "proj"
    (root / "prototypes").mkdir(parents=True)
    (root / "cuda_src").mkdir()
    for name in ("sigmoid", "vector_add"):
        for folder, suffix in (("prototypes", ".py"), ("cuda_src", ".cu")):
            (root / folder / f"{name}{suffix}").write_text(
                (REPO / folder / f"{name}{suffix}").read_text()
            )
    (root / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n[tool.portkit]\nnamespace = "expns"\n'
        'cache-dir = ".cache"\n'
    )
    return root
