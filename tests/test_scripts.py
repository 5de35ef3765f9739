"""scripts/: every script imports without running work (its work waits for
``__name__ == "__main__"``), every portkit name it imports, even inside a function or a
shell script's Python heredoc, still exists, every shell script parses, and
scripts/README.md names each one."""

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


def portkit_imports(source: str) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every ``import portkit...`` and ``from portkit... import
    name`` anywhere in the source, function bodies included."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
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
    return unresolved_in(path.read_text(), path.name)


def unresolved_in(source: str, label: str, first_line: int = 1) -> list[str]:
    """The portkit names ``source`` imports that no longer exist, as label:line: why."""
    missing = []
    for line, module, name in portkit_imports(source):
        where = f"{label}:{line + first_line - 1}"
        try:
            imported = importlib.import_module(module)
        except ImportError as error:
            missing.append(f"{where}: {module} ({error})")
            continue
        if name is None or hasattr(imported, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")
        except ImportError:
            missing.append(f"{where}: {module} has no {name}")
    return missing


def shell_python(path: Path) -> list[tuple[int, str]]:
    """The Python a shell script feeds its interpreter in ``<<'PY'`` heredocs: (the
    snippet's first line in the script, its source)."""
    lines = path.read_text().splitlines()
    snippets: list[tuple[int, str]] = []
    start = None
    for number, line in enumerate(lines, 1):
        if start is None and line.rstrip().endswith("<<'PY'"):
            start = number
        elif start is not None and line.strip() == "PY":
            snippets.append((start + 1, "\n".join(lines[start : number - 1])))
            start = None
    return snippets


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
def test_every_portkit_name_a_shell_script_s_python_imports_exists(script):
    missing = [
        problem
        for first, source in shell_python(script)
        for problem in unresolved_in(source, script.name, first)
    ]
    assert not missing


def test_a_heredoc_s_removed_import_is_found(tmp_path):
    """gpu.sh's replay step imported a function a trim had removed: only a GPU run saw it."""
    script = tmp_path / "job.sh"
    script.write_text(
        "echo start\n"
        "python3 - <<'PY'\n"
        "from portkit.runtime.native_replayer import compiled_replayer, unavailable_reason\n"
        "PY\n"
    )
    snippets = shell_python(script)
    assert [first for first, _ in snippets] == [3]
    assert unresolved_in(snippets[0][1], "job.sh", 3) == [
        "job.sh:3: portkit.runtime.native_replayer has no unavailable_reason"
    ]


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
