"""The map in docs/design.md, checked: the layer contract and the acyclic contract in
pyproject.toml (import-linter), one module per CLI command, no oversized module, and no
subprocess below the CLI that runs the CLI."""

from __future__ import annotations

import ast
import re
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


# -- no subprocess round-trips into the CLI ------------------------------------------------
# The layers hold for processes too: below portkit.cli nothing starts `python -m portkit.cli`
# (or the `portkit` script) and reads its output back; it calls the engine it needs (the
# sanitizer's child is portkit.sanitize.child, which runs the harness itself).
CLI_IN_A_STRING = re.compile(r"(?:^|\s)-m\s+portkit\.cli\b")


def cli_round_trips(source: str) -> list[int]:
    """Lines of ``source`` that build a command running portkit's CLI: a list or tuple
    with ``"-m", "portkit.cli[...]"`` or ``"portkit", "<command>"`` first, or a string with
    ``-m portkit.cli`` (docstrings may describe one)."""
    from portkit.cli.app import main

    # `portkit <command>` is the script; ("portkit", "launch_contract.py") names a file.
    commands = set(main.commands)
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            pairs = zip(words, words[1:])
            module = any(
                a == "-m" and str(b).split(".")[:2] == ["portkit", "cli"] for a, b in pairs
            )
            script = words[:1] == ["portkit"] and len(words) > 1 and words[1] in commands
            if module or script:
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and CLI_IN_A_STRING.search(node.value):
                lines.append(node.lineno)
    return sorted(lines)


def test_the_round_trip_finder_finds_each_form():
    found = cli_round_trips(
        '"""Runs `python -m portkit.cli check` (a docstring: fine)."""\n'
        'a = [sys.executable, "-m", "portkit.cli", "check", "--json"]\n'
        'b = ("portkit", "check", op)\n'
        'c = f"{sys.executable} -m portkit.cli check {op}"\n'
        'd = [sys.executable, "-m", "portkit.sanitize.child", "--tool", tool]\n'
        'e = ["-m", "portkit.cli.app"]\n'
        'f = ("portkit", "launch_contract.py")\n'
    )
    assert found == [2, 3, 4, 6]


def test_nothing_below_the_cli_runs_the_cli_in_a_subprocess():
    offenders = {
        str(path.relative_to(REPO)): lines
        for path in PACKAGE.rglob("*.py")
        if PACKAGE / "cli" not in path.parents and (lines := cli_round_trips(path.read_text()))
    }
    assert not offenders, f"call the engine below instead of the CLI: {offenders}"
