"""One table of environment variables (portkit/project/environment.py), rendered in
docs/environment.md, and no portkit switch read from os.environ anywhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from portkit.project.environment import VARIABLES

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "portkit" / "project" / "environment.py"
# An environment read: os.environ[...] / .get / getenv, the variable named on the line.
READ = re.compile(r"(os\.environ|getenv)\W.*PORTKIT_|PORTKIT_.*\W(os\.environ|getenv)")


def test_the_docs_table_lists_every_variable_with_its_default_and_meaning():
    rows = {}
    for line in (ROOT / "docs" / "environment.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:]
    expected = {v.name: [v.kind, v.default or "(unset)", v.meaning] for v in VARIABLES}
    assert rows == expected


# Shipped into exported packages, which run without portkit: it reads PORTKIT_REPLAY (a
# variable of the table) itself, the same way.
SHIPPED_READERS = {ROOT / "portkit" / "runtime" / "replaying.py"}


def test_no_portkit_switch_is_read_from_the_environment_outside_the_table():
    readers = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "portkit").rglob("*.py")
        if path != TABLE and path not in SHIPPED_READERS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if READ.search(line)
    ]
    assert readers == []


def test_every_portkit_variable_the_code_names_is_in_the_table():
    named = {
        match
        for path in (ROOT / "portkit").rglob("*.py")
        for match in re.findall(r"\bPORTKIT_[A-Z_]+\b", path.read_text())
    }
    # C macros of portkit_math.h and the CPU twin's headers are not variables
    macros = {
        n for n in named if n.startswith(("PORTKIT_MATH_", "PORTKIT_WITH_", "PORTKIT_SHARED_"))
    }
    assert named - macros <= {v.name for v in VARIABLES}


def _environment_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """Every touch of the process environment in a module: ``os.environ`` (read, copy,
    write), ``os.environb``, ``os.getenv``/``putenv``/``unsetenv``, and the same names
    imported from ``os`` (by any alias)."""
    os_names = {"os"}
    direct: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {a.asname or a.name for a in node.names if a.name == "os"}
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for a in node.names:
                if a.name in ENVIRONMENT_NAMES:
                    direct[a.asname or a.name] = a.name
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ):
            found.append((node.lineno, f"os.{node.attr}"))
        elif isinstance(node, ast.Name) and node.id in direct:
            found.append((node.lineno, direct[node.id]))
    return found


ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def test_the_environment_is_touched_in_the_table_module_only():
    """Not a spelling: every module's syntax tree, for every way to reach os.environ."""
    # portkit/runtime/ ships in exported packages, which have no table: it reads its own
    shipped = set((ROOT / "portkit" / "runtime").glob("*.py"))
    touches = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted((ROOT / "portkit").rglob("*.py"))
        if path != TABLE and path not in shipped
        for line, what in _environment_reads(ast.parse(path.read_text()))
    ]
    assert touches == [], "read the environment through portkit/project/environment.py"


def test_the_scan_sees_every_spelling():
    source = (
        "import os\nimport os as o\nfrom os import environ as E, getenv\n"
        "a = os.environ.get('X')\nb = o.getenv('Y')\nc = E['Z']\nd = getenv('W')\n"
        "os.environ['V'] = '1'\ne = dict(os.environ)\nf = os.path.join('a')\n"
    )
    lines = [line for line, _ in _environment_reads(ast.parse(source))]
    assert sorted(lines) == [4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    "value, mode",
    [("false", "off"), ("0", "off"), (" No ", "off"), ("OFF", "off"), ("python", "python")]
    + [("", "auto"), ("1", "auto"), ("auto", "auto")],
)
def test_portkit_and_an_exported_package_read_portkit_replay_alike(value, mode, monkeypatch):
    """One parse (portkit/runtime/replay_setting.py): ``false`` turned replay off in
    portkit but not in an exported package before."""
    from portkit.project.environment import Settings
    from portkit.runtime import replaying

    assert Settings.from_environment({"PORTKIT_REPLAY": value}).replay == mode
    monkeypatch.setenv("PORTKIT_REPLAY", value)
    assert replaying.package_replay_mode() == mode
