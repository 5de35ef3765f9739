"""Where the C declaration of each Python variable goes.

A Python variable lives in the whole function; a C one in its block. A variable is
declared at its first assignment (``T s = 0;``) when that assignment is a statement of
the innermost block holding every use, else just before the statement of that block
where it first appears (``T b;``). A ``for`` loop's variable is the loop's own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

Path = tuple  # ((id of a statement list, index in it), ...) from the function body down


@dataclass
class Declarations:
    before: dict[int, list[str]] = field(default_factory=dict)  # id(stmt) -> names
    inline: dict[int, set[str]] = field(default_factory=dict)  # id(Assign) -> names it declares


@dataclass
class _Seen:
    path: Path
    plain_store: ast.Assign | None  # the ``name = value`` statement, if it is one
    stores: bool = False


def plan(body: list[ast.stmt], params: set[str]) -> Declarations:
    seen: dict[str, list[_Seen]] = {}
    statements: dict[tuple[int, int], ast.stmt] = {}

    def loads(node: ast.AST | None, path: Path, shadow: frozenset) -> None:
        for n in ast.walk(node) if node is not None else ():
            if isinstance(n, ast.Name) and n.id not in shadow:
                seen.setdefault(n.id, []).append(_Seen(path, None))

    def store(target: ast.AST, path: Path, shadow: frozenset, plain: ast.Assign | None) -> None:
        if isinstance(target, ast.Name):
            if target.id not in shadow:
                seen.setdefault(target.id, []).append(_Seen(path, plain, True))
        elif isinstance(target, ast.Tuple):
            for item in target.elts:
                store(item, path, shadow, plain)
        else:
            loads(target, path, shadow)

    def block(stmts: list[ast.stmt], path: Path, shadow: frozenset) -> None:
        for i, stmt in enumerate(stmts):
            here = (*path, (id(stmts), i))
            statements[(id(stmts), i)] = stmt
            statement(stmt, here, shadow)

    def statement(stmt: ast.stmt, path: Path, shadow: frozenset) -> None:
        if isinstance(stmt, ast.For):
            loads(stmt.iter, path, shadow)
            names = {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)}
            block(stmt.body, path, shadow | names)
            block(stmt.orelse, path, shadow)
        elif isinstance(stmt, (ast.While, ast.If)):
            loads(stmt.test, path, shadow)
            block(stmt.body, path, shadow)
            block(stmt.orelse, path, shadow)
        elif isinstance(stmt, ast.Assign):
            loads(stmt.value, path, shadow)
            plain = stmt if len(stmt.targets) == 1 else None
            for target in stmt.targets:
                store(target, path, shadow, plain)
        elif isinstance(stmt, ast.AugAssign):
            loads(stmt.value, path, shadow)
            loads(stmt.target, path, shadow)
            store(stmt.target, path, shadow, None)
        else:
            loads(stmt, path, shadow)

    block(body, (), frozenset())
    result = Declarations()
    for name, occurrences in seen.items():
        if name in params or not any(o.stores for o in occurrences):
            continue
        paths = [o.path for o in occurrences]
        level = 0
        while (
            all(len(p) > level + 1 for p in paths)
            and len({p[level] for p in paths}) == 1
            and len({p[level + 1][0] for p in paths}) == 1
        ):
            level += 1
        first = occurrences[0]
        if first.plain_store is not None and len(first.path) == level + 1:
            result.inline.setdefault(id(first.plain_store), set()).add(name)
        else:
            stmt = statements[first.path[level]]
            result.before.setdefault(id(stmt), []).append(name)
    return result
