"""The map in docs/design.md, checked: the layer contract and the acyclic contract in
pyproject.toml (import-linter), one module per CLI command, and no oversized module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "portkit"
# "No module over ~400 lines": a little slack, so a docstring does not force a split.
MAX_MODULE_LINES = 420


def test_import_linter_contracts_are_kept():
    pytest.importorskip(
        "importlinter", reason="import-linter is a test dependency: pip install -e .[test]"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(no_cache=True, no_logo=True))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "BROKEN" not in run.stdout
    assert run.stdout.count("KEPT") >= 2, run.stdout


def test_every_command_lives_in_its_own_cli_module():
    from portkit.cli.app import main

    for name, command in main.commands.items():
        module = command.callback.__module__
        assert module.startswith("portkit.cli."), f"{name}: defined in {module}"
        stem = module.rsplit(".", 1)[1]
        assert stem == name or stem == name.replace("-", "_"), (
            f"command {name!r} is defined in {module}; expected portkit/cli/{name}.py"
        )


def test_no_module_is_oversized():
    oversized = {
        str(path.relative_to(REPO)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not oversized, f"split along its concepts: {oversized}"


def test_no_grab_bag_modules():
    bags = [p for p in PACKAGE.rglob("*.py") if p.stem in {"utils", "helpers", "misc", "common"}]
    assert not bags, f"name modules by concept: {bags}"
