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
    assert run.stdout.count("KEPT") >= 3, run.stdout
    # portkit/runtime/ ships in exported packages: a forbidden contract keeps NumPy, numba
    # and the CLI's libraries out of it (and the layers keep the rest of portkit out).
    assert "The runtime imports the standard library, torch and cuda.bindings only KEPT" in (
        run.stdout
    )


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


# -- the one runtime, shipped verbatim ------------------------------------------------------
# portkit/runtime/ is copied byte for byte into every exported package as ``_runtime/``: its
# modules import the standard library, torch and cuda.bindings, and each other relatively.
RUNTIME_ROOTS_ALLOWED = {"torch", "cuda"}


def test_the_runtime_imports_only_the_standard_library_torch_and_cuda_bindings():
    wrong = []
    for path in sorted((PACKAGE / "runtime").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # a sibling: shipped with it
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                root = name.split(".")[0]
                if name.startswith("cuda.") and not name.startswith("cuda.bindings"):
                    wrong.append(f"{path.name}: {name}")
                elif root not in RUNTIME_ROOTS_ALLOWED and root not in sys.stdlib_module_names:
                    wrong.append(f"{path.name}: {name}")
    assert (PACKAGE / "runtime" / "launch_contract.py").exists()
    assert not wrong, f"portkit/runtime/ ships without portkit, NumPy or numba: {wrong}"


def test_the_runtime_modules_import_inside_portkit():
    import importlib

    for path in sorted((PACKAGE / "runtime").glob("*.py")):
        module = importlib.import_module(f"portkit.runtime.{path.stem}".removesuffix(".__init__"))
        assert module.__file__ == str(path), path.name


# -- private torch names: one adapter -------------------------------------------------------
TORCH_PRIVATE = PACKAGE / "runtime" / "torch_private.py"


def private_torch_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each private torch name ``tree`` reaches: an attribute chain from
    ``torch`` with a ``_name`` in it (``torch._C``, ``torch.utils._python_dispatch``), or
    an import of such a module. Dunder names (``torch.__version__``) are public."""

    def private(parts: list[str]) -> bool:
        return parts[0] == "torch" and any(
            p.startswith("_") and not p.startswith("__") for p in parts[1:]
        )

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                parts.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and private([value.id, *parts]):
                found.append((node.lineno, ".".join([value.id, *parts])))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if private(a.name.split("."))]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if private((node.module or "").split(".")):
                found.append((node.lineno, node.module or ""))
    return found


def test_private_torch_names_are_reached_only_through_torch_private():
    uses = {
        f"{path.relative_to(REPO)}:{line}": name
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != TORCH_PRIVATE
        for line, name in private_torch_uses(ast.parse(path.read_text()))
    }
    assert uses == {}, "reach private torch names through portkit/runtime/torch_private.py"
    assert private_torch_uses(ast.parse(TORCH_PRIVATE.read_text()))  # the one place


def test_the_private_torch_check_sees_every_spelling():
    source = (
        "import torch\nimport torch._dynamo\nfrom torch.utils._python_dispatch import X\n"
        "a = torch._C._cuda_getDevice\nb = getattr(torch._C, 'y')\nc = torch.__version__\n"
        "d = torch.cuda.current_device\n"
    )
    lines = [line for line, _ in private_torch_uses(ast.parse(source))]
    assert sorted(set(lines)) == [2, 3, 4, 5]
