"""portkit's type hints, checked: mypy runs on portkit/ with the [tool.mypy] configuration
in pyproject.toml (docs/design.md, "Types are checked") and must report no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _mypy(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy", reason="mypy is a test dependency: pip install -e .[test]")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def mypy_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Kept between runs in pytest's cache, so an unchanged tree is checked in seconds;
    a fresh folder where the cache is off (``-p no:cacheprovider``)."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("mypy") if cache is not None else tmp_path_factory.mktemp("mypy")


def test_portkit_type_checks(mypy_cache: Path) -> None:
    run = _mypy(mypy_cache)  # the files and options: pyproject.toml
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("Success: no issues found"), run.stdout


def test_the_configuration_refuses_an_unannotated_function(
    mypy_cache: Path, tmp_path: Path
) -> None:
    # The same options on one planted file: the check above is not vacuous.
    planted = tmp_path / "planted.py"
    planted.write_text("def twice(x):\n    return 2 * x\n\n\nlength: int = 'three'\n")
    run = _mypy(mypy_cache, "--config-file", str(REPO / "pyproject.toml"), str(planted))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "planted.py:1: error: Function is missing a type annotation" in run.stdout
    assert "planted.py:5: error: Incompatible types in assignment" in run.stdout


def test_the_python_310_branch_has_its_dependency() -> None:
    # mypy checks portkit as Python 3.10 (requires-python), where project/config.py
    # imports tomli: the package must depend on it there, not get it through pytest.
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10"
    assert "import tomli as tomllib" in (REPO / "portkit/project/config.py").read_text()
    tomli = [d for d in project["dependencies"] if d.split(">")[0].strip() == "tomli"]
    assert len(tomli) == 1 and "python_version < '3.11'" in tomli[0], tomli
