"""Recursive device functions (numba compiles them): while a function is being
rewritten, a call of it from its own body gets a stand-in that calls the rewritten
function once it exists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from portkit.errors import KernelError


class Recursion:
    """The functions a ``Rewriter`` is rewriting, each with the slot its stand-in reads."""

    def __init__(self) -> None:
        self._pending: dict[int, list[Any]] = {}  # [rewritten function, or None yet]

    def calling(self, dispatcher: Any) -> tuple[Callable[..., Any], tuple[str, ...]] | None:
        """A stand-in (function, parameters) where ``dispatcher`` is being rewritten."""
        slot = self._pending.get(id(dispatcher))
        if slot is None:
            return None
        slot.append("called")

        def call(*args: Any, **kwargs: Any) -> Any:
            return slot[0](*args, **kwargs)

        code = dispatcher.py_func.__code__
        return call, code.co_varnames[: code.co_argcount]

    @contextmanager
    def rewriting(self, dispatcher: Any) -> Iterator[Callable[[Any, bool], None]]:
        """While ``dispatcher`` is rewritten; yields ``finish(function, waits)``, which
        gives its stand-ins the rewritten function."""
        slot: list[Any] = [None]
        self._pending[id(dispatcher)] = slot

        def finish(function: Any, waits: bool) -> None:
            if waits and len(slot) > 1:
                raise KernelError(
                    f"{dispatcher.py_func.__name__} calls itself and waits at a barrier or "
                    f"warp operation: the simulator runs recursion without barriers only"
                )
            slot[0] = function

        try:
            yield finish
        finally:
            del self._pending[id(dispatcher)]
