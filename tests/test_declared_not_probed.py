"""Declared, not probed: the twin runtime (portkit/runtime/) and the op layer over it
(portkit/torch_op/) tell objects apart by what they declare (a class attribute such as a
replayer's ``carries_backward``, a Protocol, ``isinstance`` of a named type, a language
protocol such as ``operator.index``), never by asking whether an object happens to have
an attribute. These modules run per launch and ship in every exported package, where a
probe silently takes the other branch for an object that grew or lost a method.

The check parses the modules (it does not grep): a call of ``hasattr``, however spelled
(``builtins.hasattr``, an alias), is a probe unless ``ALLOWED`` names it with the reason.
So is ``getattr`` with a default (three arguments): ``getattr(k, "knob_choice", None)``
asks whether ``k`` has the attribute as surely as ``hasattr`` does. ``getattr`` of a name
the object must have (two arguments: ``getattr(torch.ops, namespace)``) is a lookup by a
name known only at run time, and stays; a default is allowed only at the sites
``ALLOWED_DEFAULTS`` names, each with why no declaration can serve there."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("portkit/runtime", "portkit/torch_op")

# (module, the attribute asked about) -> why a probe is right there. Empty: every probe
# these folders had became a declaration (replayer_protocol.py, isinstance, operator.index).
# An entry must say why no declaration can serve, e.g. a third party's object whose only
# contract is the attribute (the CUDA array interface of an array portkit did not make).
ALLOWED: dict[tuple[str, str], str] = {}

# (module, the attribute asked about) -> why ``getattr`` with a default is right there.
ALLOWED_DEFAULTS: dict[tuple[str, str], str] = {
    # torch_private.py is the adapter for torch's private names: whether a torch
    # release has one is the question it exists to answer, once, for the rest of portkit.
    ("portkit/runtime/torch_private.py", "_cuda_getCurrentRawStream"): "private torch name",
    ("portkit/runtime/torch_private.py", "_StaticCudaLauncher"): "private torch name",
    ("portkit/runtime/torch_private.py", "_launch_kernel"): "private torch name",
    # The tensor a launcher passes to portkit.knobs(k, x): the author's argument (a tensor,
    # a tensor-like, None or a number), not portkit's object; one with no device picks the
    # defaults, as it always did.
    ("portkit/runtime/knob_choice.py", "device"): "the launcher's argument, not portkit's",
}


def probes(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, attribute)`` for each ``hasattr`` in ``tree``: called by name, through a
    module (``builtins.hasattr``), or bound to another name first (``has = hasattr``);
    the attribute is "?" where it is not a string literal."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_hasattr(node.func):
            name = node.args[1] if len(node.args) > 1 else None
            literal = isinstance(name, ast.Constant) and isinstance(name.value, str)
            found.append((node.lineno, name.value if literal else "?"))  # type: ignore[union-attr]
        elif _is_hasattr(node) and not _called(tree, node):
            found.append((node.lineno, "?"))  # passed on or aliased
    return sorted(found)


def defaulted_getattrs(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, attribute)`` for each ``getattr`` with a default in ``tree`` (called by
    name or through a module), and each ``getattr`` passed on or aliased ("?": what it
    will be called with cannot be seen); the attribute is "?" where it is not a literal."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_named(node.func, "getattr"):
            if len(node.args) >= 3 or any(isinstance(a, ast.Starred) for a in node.args):
                name = node.args[1] if len(node.args) > 1 else None
                literal = isinstance(name, ast.Constant) and isinstance(name.value, str)
                found.append((node.lineno, name.value if literal else "?"))  # type: ignore[union-attr]
        elif _is_named(node, "getattr") and not _called(tree, node):
            found.append((node.lineno, "?"))
    return sorted(found)


def _is_named(node: ast.AST, builtin: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == builtin) or (
        isinstance(node, ast.Attribute) and node.attr == builtin
    )


def _is_hasattr(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "hasattr") or (
        isinstance(node, ast.Attribute) and node.attr == "hasattr"
    )


def _called(tree: ast.AST, target: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and n.func is target for n in ast.walk(tree))


def _modules() -> list[Path]:
    return sorted(path for folder in CHECKED for path in (REPO / folder).rglob("*.py"))


def test_the_runtime_and_the_op_layer_do_not_probe_for_attributes() -> None:
    found = [
        (str(path.relative_to(REPO)), line, attribute)
        for path in _modules()
        for line, attribute in probes(ast.parse(path.read_text()))
    ]
    unexplained = [
        f"{module}:{line} hasattr(.., {attribute!r})"
        for module, line, attribute in found
        if (module, attribute) not in ALLOWED
    ]
    assert not unexplained, "declare the capability instead: " + ", ".join(unexplained)
    stale = set(ALLOWED) - {(module, attribute) for module, _, attribute in found}
    assert not stale, f"allowed probes that are gone (drop them from ALLOWED): {stale}"


def test_the_check_sees_every_spelling_of_a_probe() -> None:
    source = """
import builtins
def f(x, name):
    if hasattr(x, "set_backward"):
        return builtins.hasattr(x, "data_ptr")
    has = hasattr
    return has(x, name) or any(map(hasattr, [x], ["item"]))
"""
    assert probes(ast.parse(source)) == [(4, "set_backward"), (5, "data_ptr"), (6, "?"), (7, "?")]
    # ... and not reading a declared attribute, or getattr of a name the object must have
    assert probes(ast.parse("x = obj.has_plain_launch\ny = getattr(k, 'op')")) == []


def test_the_runtime_and_the_op_layer_ask_no_attribute_with_a_default() -> None:
    found = [
        (str(path.relative_to(REPO)), line, attribute)
        for path in _modules()
        for line, attribute in defaulted_getattrs(ast.parse(path.read_text()))
    ]
    unexplained = [
        f"{module}:{line} getattr(.., {attribute!r}, default)"
        for module, line, attribute in found
        if (module, attribute) not in ALLOWED_DEFAULTS
    ]
    assert not unexplained, "declare the member and read it: " + ", ".join(unexplained)
    stale = set(ALLOWED_DEFAULTS) - {(module, attribute) for module, _, attribute in found}
    assert not stale, f"allowed defaults that are gone (drop them): {stale}"


def test_the_check_sees_every_getattr_with_a_default() -> None:
    source = """
import builtins
def f(k, name, args):
    choice = getattr(k, "knob_choice", None)
    kind = builtins.getattr(k, "kind", None)
    get = getattr
    return getattr(k, name, 0), getattr(*args), list(map(getattr, [k], ["op"]))
"""
    found = defaulted_getattrs(ast.parse(source))
    assert found == [(4, "knob_choice"), (5, "kind"), (6, "?"), (7, "?"), (7, "?"), (7, "?")]
    # a lookup by a name the object must have is no probe
    assert defaulted_getattrs(ast.parse("ops = getattr(torch.ops, namespace)")) == []


def test_every_site_allowed_a_default_says_why() -> None:
    for site, reason in {**ALLOWED, **ALLOWED_DEFAULTS}.items():
        assert (REPO / site[0]).is_file(), site
        assert len(reason.split()) >= 3, site


def test_the_check_reads_the_folders_it_names() -> None:
    names = {path.name for path in _modules()}
    assert {"replaying.py", "twin_launch.py", "prepared.py", "cupy_arrays.py"} <= names


def test_numpy_scalars_are_known_by_their_base_class_without_importing_numpy() -> None:
    """twin_launch's ``python_number``: NumPy's scalar types derive from ``numpy.generic``;
    an array of one element, which has ``item()`` too, is not a number."""
    import numpy as np

    from portkit.runtime.twin_launch import python_number

    for scalar, number in [(np.float32(0.5), 0.5), (np.int64(-3), -3), (np.bool_(True), True)]:
        value = python_number(scalar)
        assert value == number and type(value) is type(number)

    class Derived(np.float64):  # a subclass defined outside NumPy is one still
        pass

    assert type(python_number(Derived(2.0))) is float
    for other in [np.ones(1), np.array(2.5), 7, "7", None]:
        assert python_number(other) is other


def test_cupy_arrays_are_refused_beside_anything_but_a_scalar() -> None:
    import numpy as np

    from portkit.torch_op.cupy_arrays import _is_array

    class ForeignDeviceArray:  # numba's device array, say
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "version": 3}

    for array in [np.ones(2), ForeignDeviceArray(), [1.0, 2.0]]:
        assert _is_array(array), array
    for scalar in [2.0, 3, True, None, np.float32(2.0), np.int64(1)]:
        assert not _is_array(scalar), scalar
