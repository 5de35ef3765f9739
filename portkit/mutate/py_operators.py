"""Mutation operators for a prototype (Python), on the AST of its numba kernels only.

Only functions decorated with ``cuda.jit`` (kernels and device functions) are mutated;
the launchers, the reference and the cases stay as written. A mutant replaces one
node's span of the source text with the mutated node (``ast.unparse``), padded with the
newlines it spanned, so every other line, comment and line number stays as it was.
The twin-only kinds (``int32``, ``accum``: declared C types) have no Python operator.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from portkit.mutate.model import Mutant

Node = ast.stmt | ast.expr  # what has a span in the source
Edit = tuple[Node, str, str]  # (node whose span is replaced, replacement, description)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _is_kernel(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _dotted(target) in ("cuda.jit", "jit", "numba.cuda.jit"):
            return True
    return False


def _call_name(node: ast.AST) -> str:
    return _dotted(node.func) if isinstance(node, ast.Call) else ""


def _barriers(node: ast.AST) -> Iterator[Edit]:
    if isinstance(node, ast.Expr):
        name = _call_name(node.value)
        if name in ("cuda.syncthreads", "cuda.syncwarp", "syncthreads", "syncwarp"):
            yield node, "pass", f"{name}() dropped"


def _bounds(node: ast.AST) -> Iterator[Edit]:
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Lt):
        le = ast.Compare(node.left, [ast.LtE()], node.comparators)
        yield node, ast.unparse(le), f"`{ast.unparse(node)}` made `<=`"
    if _call_name(node) == "range" and isinstance(node, ast.Call) and node.args:
        at = 1 if len(node.args) >= 2 else 0
        stop = node.args[at]
        args = [*node.args]
        args[at] = _plus_one(stop)
        call = ast.Call(node.func, args, [])
        yield node, ast.unparse(call), f"range stop {ast.unparse(stop)} made inclusive (+ 1)"


def _plus_one(node: ast.expr) -> ast.expr:
    return ast.BinOp(node, ast.Add(), ast.Constant(1))


def _indices(node: ast.AST) -> Iterator[Edit]:
    if not isinstance(node, ast.Subscript) or not isinstance(node.ctx, (ast.Load, ast.Store)):
        return
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for position, part in enumerate(parts):
        if not isinstance(part, ast.Name) or part.id.isupper():
            continue
        shifted: list[ast.expr] = list(parts)
        shifted[position] = _plus_one(part)
        index = ast.Tuple(shifted, ast.Load()) if len(parts) > 1 else shifted[0]
        new = ast.Subscript(node.value, index, node.ctx)
        yield node, ast.unparse(new), f"{ast.unparse(node)} -> {ast.unparse(new)}"


def _atomics(node: ast.AST) -> Iterator[Edit]:
    if not isinstance(node, ast.Expr) or _call_name(node.value) != "cuda.atomic.add":
        return
    call = node.value
    assert isinstance(call, ast.Call)
    if len(call.args) != 3:
        return
    array, index, value = call.args
    new = ast.AugAssign(ast.Subscript(array, index, ast.Store()), ast.Add(), value)
    yield node, ast.unparse(new), f"cuda.atomic.add -> {ast.unparse(new)}"


def _tails(node: ast.AST) -> Iterator[Edit]:
    if isinstance(node, ast.For) and _call_name(node.iter) == "range":
        assert isinstance(node.iter, ast.Call)
        if len(node.iter.args) >= 2 and isinstance(node.iter.args[0], ast.BinOp):
            start = ast.unparse(node.iter.args[0])
            yield node, "pass", f"tail loop from {start} dropped"


_SHUFFLE_SWAP = {"shfl_down_sync": "shfl_up_sync", "shfl_up_sync": "shfl_down_sync"}
_SHUFFLE_SWAP["shfl_xor_sync"] = "shfl_down_sync"


def _shuffles(node: ast.AST) -> Iterator[Edit]:
    name = _call_name(node)
    kind = name.rsplit(".", 1)[-1]
    if kind not in _SHUFFLE_SWAP or not isinstance(node, ast.Call):
        return
    func = node.func
    assert isinstance(func, (ast.Attribute, ast.Name))
    swapped: ast.expr = (
        ast.Attribute(func.value, _SHUFFLE_SWAP[kind], ast.Load())
        if isinstance(func, ast.Attribute)
        else ast.Name(_SHUFFLE_SWAP[kind], ast.Load())
    )
    new = ast.Call(swapped, node.args, node.keywords)
    yield node, ast.unparse(new), f"{name} -> {_SHUFFLE_SWAP[kind]}"
    if len(node.args) >= 3:
        halved = ast.BinOp(node.args[2], ast.FloorDiv(), ast.Constant(2))
        new = ast.Call(func, [*node.args[:2], halved, *node.args[3:]], node.keywords)
        yield node, ast.unparse(new), f"{name} offset {ast.unparse(node.args[2])} halved"


def _compares(test: ast.expr) -> list[ast.cmpop]:
    tests = test.values if isinstance(test, ast.BoolOp) else [test]
    return [op for t in tests if isinstance(t, ast.Compare) for op in t.ops]


def _guards(node: ast.AST) -> Iterator[Edit]:
    if not isinstance(node, ast.If):
        return
    ops = _compares(node.test)
    shown = ast.unparse(node.test)
    if any(isinstance(op, (ast.Lt, ast.LtE)) for op in ops):
        yield node.test, "True", f"guard `if {shown}` removed"
    elif any(isinstance(op, (ast.Gt, ast.GtE)) for op in ops) and isinstance(
        node.body[0], ast.Return
    ):
        yield node.test, "False", f"early return `if {shown}` removed"


OPERATORS: dict[str, Callable[[ast.AST], Iterator[Edit]]] = {
    "barrier": _barriers,
    "bound": _bounds,
    "index": _indices,
    "atomic": _atomics,
    "tail": _tails,
    "shuffle": _shuffles,
    "guard": _guards,
}


def _splice(text: str, offsets: list[int], node: Node, replacement: str) -> str:
    """``text`` with ``node``'s span replaced; the lines it spanned kept as blank lines."""
    start = offsets[node.lineno - 1] + _column(text, offsets, node.lineno, node.col_offset)
    end_line = node.end_lineno or node.lineno
    end_col = node.end_col_offset or 0
    end = offsets[end_line - 1] + _column(text, offsets, end_line, end_col)
    return text[:start] + replacement + "\n" * (end_line - node.lineno) + text[end:]


def _column(text: str, offsets: list[int], line: int, byte_col: int) -> int:
    """ast columns count UTF-8 bytes; the text is indexed by characters."""
    begin = offsets[line - 1]
    row = text[begin : text.find("\n", begin) if "\n" in text[begin:] else len(text)]
    return len(row.encode()[:byte_col].decode(errors="ignore"))


def prototype_mutants(text: str, file: str, kinds: set[str] | None = None) -> list[Mutant]:
    """Every mutant of the kernels in the prototype ``text`` of the chosen ``kinds``
    (default all), in kind order then line order. A file that does not parse has none."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    kernels = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_kernel(n)]
    nodes = [n for kernel in kernels for stmt in kernel.body for n in ast.walk(stmt)]
    nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    mutants: list[Mutant] = []
    for kind, operator in OPERATORS.items():
        if kinds is not None and kind not in kinds:
            continue
        for node in nodes:
            for target, replacement, description in operator(node):
                source = _splice(text, offsets, target, replacement)
                mutants.append(
                    Mutant(kind, "prototype", file, target.lineno, description, source)
                )
    return mutants
