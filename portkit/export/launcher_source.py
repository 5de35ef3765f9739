"""The host launchers of an op as a standalone Python module, for an exported package.

The prototype file imports numba and portkit; its ``@portkit.op`` class does not need
them. This copies the class's source (without its decorator) and what it refers to in
the prototype module: constants as literals, modules as imports, helper functions by
their source. ``portkit`` inside the launchers is the package's ``_runtime`` (``cdiv``,
``InputError``...). Anything else (a numba kernel called directly, an object that has no
source or literal form) stops the export with a message naming it.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from pathlib import Path
from typing import Any

from portkit.errors import PortkitError
from portkit.runtime.launch_contract import LAUNCHER_NAMES

RUNTIME_NAMES = set(LAUNCHER_NAMES)
FORBIDDEN_ROOTS = ("numba", "portkit")
LITERAL_TYPES = (bool, int, float, str, bytes, type(None))


def _free_names(tree: ast.AST) -> list[str]:
    """Names read in ``tree`` that it does not bind itself (its parameters, assignments)."""
    bound: set[str] = set()
    read: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                read.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not tree:
            bound.add(node.name)
    return [n for n in dict.fromkeys(read) if n not in bound and not hasattr(builtins, n)]


def _portkit_attributes(tree: ast.AST) -> set[str]:
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "portkit"
    }


def _is_literal(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_is_literal(v) for v in value)
    return isinstance(value, LITERAL_TYPES)


def _root(module_name: str) -> str:
    return module_name.split(".", 1)[0]


def launcher_module_source(op_name: str, cls: type, module: types.ModuleType) -> str:
    """Python source defining ``cls`` (undecorated) and everything it needs."""
    where = f"op {op_name}"
    source = inspect.getsource(module)
    tree = ast.parse(source)
    class_node = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__), None
    )
    if class_node is None:
        raise PortkitError(f"{where}: cannot find class {cls.__name__} in {module.__file__}")
    class_node.decorator_list = []  # the decorator (reference, cases) is not shipped
    class_source = "\n".join(
        source.splitlines()[class_node.lineno - 1 : class_node.end_lineno]
    )  # from the `class` line on
    imports: dict[str, str] = {}
    definitions: dict[str, str] = {}
    pending = [(class_node, class_source)]
    while pending:
        node, _ = pending.pop()
        unknown = _portkit_attributes(node) - RUNTIME_NAMES
        if unknown:
            raise PortkitError(
                f"{where}: the launchers use portkit.{sorted(unknown)[0]}; an exported package "
                f"offers only portkit.{', portkit.'.join(sorted(RUNTIME_NAMES))}"
            )
        for name in _free_names(node):
            if name in imports or name in definitions or name == "portkit":
                continue
            if name not in vars(module):
                continue  # a name bound elsewhere (a comprehension, global of a method)
            value = vars(module)[name]
            text, dependency = _define(where, name, value, module)
            if dependency is None:
                (imports if text.startswith(("import ", "from ")) else definitions)[name] = text
            else:
                definitions[name] = text
                pending.append((dependency, text))
    header = [
        f'"""Host launchers of op {op_name}, copied by portkit export from '
        f'{Path(inspect.getfile(module)).name}."""',
        "",
        *sorted(set(imports.values())),
        "",
        "from .. import _runtime as portkit",
        "",
    ]
    body = [text + "\n" for text in reversed(list(definitions.values()))]
    return "\n".join(header + body + ["", class_source, ""])


def _define(where: str, name: str, value: Any, module: types.ModuleType) -> tuple[str, Any]:
    """(source line(s) giving ``name`` its value, AST to scan for more names or None)."""
    if isinstance(value, types.ModuleType):
        if _root(value.__name__) in FORBIDDEN_ROOTS:
            raise PortkitError(
                f"{where}: the launchers use module {value.__name__} ({name}); an exported "
                f"package runs without numba and portkit"
            )
        if value.__name__ == name:
            return f"import {name}", None
        return f"import {value.__name__} as {name}", None
    if _is_literal(value):
        return f"{name} = {value!r}", None
    if hasattr(value, "py_func"):
        raise PortkitError(
            f"{where}: the launchers call numba function {name} directly; launch kernels "
            f"through k (k.{name}[grid, block](...)) so the twin runs them"
        )
    owner = getattr(value, "__module__", None) or ""
    if owner == module.__name__ and isinstance(value, (types.FunctionType, type)):
        text = textwrap.dedent(inspect.getsource(value))
        return text, ast.parse(text).body[0]
    if owner and _root(owner) not in FORBIDDEN_ROOTS and getattr(value, "__name__", None):
        return f"from {owner} import {value.__name__} as {name}", None
    raise PortkitError(
        f"{where}: the launchers use {name} ({type(value).__name__}), which cannot be copied "
        f"into an exported package; make it a literal constant or a function in the file"
    )
