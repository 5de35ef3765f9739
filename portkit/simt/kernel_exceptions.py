"""A kernel's own exception (``raise IndexError(...)`` in a kernel, or one Python raises
for it) as the launch raises it: an instance of the kernel's exception type, as numba
raises it (``except IndexError`` and ``assertRaises(MyError)`` catch it), that is also a
``SimulationFault`` (a ``KernelError``) carrying the kernel, block, thread and line.

The message is portkit's (kernel, block, thread, line) with numba's own words after it
(``tid=[x, y, z] ctaid=[x, y, z]: message``, as numba's simulator and a ``debug=True``
kernel on a GPU say it), so a test that matches numba's text matches portkit's.
"""

from __future__ import annotations

from portkit.simt.records import Place, SimulationFault


def _text(self: BaseException) -> str:
    return str(self.args[0]) if self.args else ""


_BOTH: dict[type, type[SimulationFault] | None] = {}


def _both(kind: type) -> type[SimulationFault] | None:
    """The class that is ``kind`` and a ``SimulationFault`` (made once per type), or None
    where Python cannot make one (a type whose C layout conflicts: ``OSError``'s...)."""
    if kind not in _BOTH:
        _BOTH[kind] = _combined(kind)
    return _BOTH[kind]


def _combined(kind: type) -> type[SimulationFault] | None:
    try:
        return type(
            kind.__name__,
            (kind, SimulationFault),
            # str() is the message, not the type's own rendering (KeyError's repr)
            {"__module__": kind.__module__, "__qualname__": kind.__qualname__, "__str__": _text},
        )
    except TypeError:
        return None


def raised(
    kernel: str,
    exc: BaseException,
    place: Place | None,
    block: tuple[int, int, int],
    thread: tuple[int, int, int],
) -> SimulationFault:
    """``exc`` (raised by thread ``thread`` of block ``block``) as the launch raises it."""
    message = str(exc)
    words = f"tid={list(thread)} ctaid={list(block)}" + (f": {message}" if message else "")
    detail = f"raised {type(exc).__name__}: {message}"
    plain = SimulationFault(kernel, "exception", detail, place)
    kind = _both(type(exc)) if isinstance(exc, Exception) else None
    if kind is None or isinstance(exc, SimulationFault):
        return plain
    text = f"{plain}\n  numba: {words}"
    fault = kind.__new__(kind, text)
    fault.__dict__.update(getattr(exc, "__dict__", {}))  # the user's own attributes
    fault.args = (text,)
    fault.kernel, fault.kind, fault.detail = kernel, "exception", detail
    fault.place, fault.other, fault.site = place, None, plain.site
    return fault
