"""scripts/: every script imports without running work (its work waits for
``__name__ == "__main__"``), every portkit name it imports, even inside a function,
still exists, every shell script parses, and scripts/README.md names each one."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
PYTHON_SCRIPTS = sorted(SCRIPTS.glob("*.py"))
SHELL_SCRIPTS = sorted(SCRIPTS.glob("*.sh"))
# Modules the scripts import, not scripts themselves: no __main__ block.
LIBRARIES = {"simulator_bench_kernels.py"}


def portkit_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every ``import portkit...`` and ``from portkit... import
    name`` anywhere in the file, function bodies included."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "portkit":
            found += [(node.lineno, node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name, None)
                for alias in node.names
                if alias.name.split(".")[0] == "portkit"
            ]
    return found


def unresolved(path: Path) -> list[str]:
    missing = []
    for line, module, name in portkit_imports(path):
        try:
            imported = importlib.import_module(module)
        except ImportError as error:
            missing.append(f"{path.name}:{line}: {module} ({error})")
            continue
        if name is None or hasattr(imported, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
        except ImportError:
            missing.append(f"{path.name}:{line}: {module} has no {name}")
    return missing


@pytest.mark.parametrize("script", PYTHON_SCRIPTS, ids=lambda p: p.name)
def test_script_imports_without_running(script, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(sys, "argv", [str(script), "--no-such-flag"])
    spec = importlib.util.spec_from_file_location(f"portkit_script_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # as `python script.py` has it
    spec.loader.exec_module(module)  # a script that parses argv at import exits here
    out, err = capsys.readouterr()
    assert (out, err) == ("", ""), f"{script.name} printed at import"
    if script.name not in LIBRARIES:
        assert "__main__" in script.read_text(), f"{script.name}: no __main__ block"


@pytest.mark.parametrize("script", PYTHON_SCRIPTS, ids=lambda p: p.name)
def test_every_portkit_name_a_script_imports_exists(script):
    assert not unresolved(script)


def test_a_moved_import_is_found(tmp_path):
    script = tmp_path / "old.py"
    script.write_text(
        "def main():\n    from portkit.bench.timing import host_call, no_such_name\n"
    )
    assert unresolved(script) == ["old.py:2: portkit.bench.timing has no no_such_name"]


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_script_parses(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_readme_names_every_script():
    readme = (SCRIPTS / "README.md").read_text()
    scripts = [p for p in SCRIPTS.iterdir() if p.is_file() and p.name != "README.md"]
    unnamed = [p.name for p in scripts if f"`{p.name}`" not in readme]
    assert not unnamed, f"scripts/README.md does not name {unnamed}"
    listed = {name for name in _backticked_names(readme) if name.endswith((".py", ".sh"))}
    gone = sorted(name for name in listed if not (SCRIPTS / name).exists())
    assert not gone, f"scripts/README.md names scripts that do not exist: {gone}"


def _backticked_names(text: str) -> list[str]:
    import re

    return re.findall(r"`([\w.-]+\.(?:py|sh))`", text)
