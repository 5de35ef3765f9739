"""Kernel parameters no thread can write: their reads need no bookkeeping.

The read stamps of an element serve one purpose: a later write by another thread
checks them (a read-write race). A parameter the kernel only ever reads element by
element (``seq[k]``, ``x[i, j]`` with as many indices as the array has dimensions),
besides ``len(seq)`` and ``seq.shape``-like attributes, is never written in the launch:
not by a store, not by an atomic, not through a view or a device function (those
need the bare name, or fewer indices than dimensions, which disqualify it). So its
read stamps would never be read, by the lockstep engine or by the per-thread engine a
failed chunk hands over to: the lockstep engine skips recording them
(``LaneArray.unwritten``), which is most of a load's cost in a loop that reads the
same input from many threads (advent-of-numba's ``find_contiguous``).
"""

from __future__ import annotations

import ast

_ATTRIBUTES = {"shape", "size", "ndim", "dtype", "itemsize", "strides", "nbytes"}


def unwritten_parameters(
    definition: ast.FunctionDef, parameters: tuple[str, ...], scope: dict
) -> dict[str, frozenset[int]]:
    """The parameters only read element by element (with the numbers of indices their
    subscripts use: the array is unwritten when each equals its dimensions)."""
    parents = {
        child: node for node in ast.walk(definition) for child in ast.iter_child_nodes(node)
    }
    counts: dict[str, set[int]] = {p: set() for p in parameters}
    spoiled: set[str] = set()
    for node in ast.walk(definition):
        if not isinstance(node, ast.Name) or node.id not in counts:
            continue
        parent = parents.get(node)
        if not isinstance(node.ctx, ast.Load):
            spoiled.add(node.id)  # rebound
        elif isinstance(parent, ast.Subscript) and parent.value is node:
            items = parent.slice.elts if isinstance(parent.slice, ast.Tuple) else [parent.slice]
            if not isinstance(parent.ctx, ast.Load) or any(
                isinstance(i, (ast.Slice, ast.Starred)) for i in items
            ):
                spoiled.add(node.id)
            else:
                counts[node.id].add(len(items))
        elif isinstance(parent, ast.Attribute) and parent.attr in _ATTRIBUTES:
            continue
        elif (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id == "len"
            and "len" not in scope
            and parent.args == [node]
        ):
            continue
        else:
            spoiled.add(node.id)  # passed, aliased, returned: it may be written
    return {p: frozenset(c) for p, c in counts.items() if c and p not in spoiled}
