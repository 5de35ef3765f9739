"""``Replayer`` declared: what a ``ReplayingLauncher`` (``replaying.py``) asks of its
replayer, the compiled one (``native_replayer.NativeReplayer``) or the prepared one
(``prepared.PreparedReplayer``). What one can do beyond ``key``, ``run``, ``add`` and
``len`` (``carries_backward``, ``run_eager``, ``op_kernels``) is a class attribute it
declares, never guessed from the methods it has (docs/design.md, "Declared
capabilities").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .steps import Recording


class Replayer(Protocol):
    """Keys calls by their leaves, keeps recordings and replays them."""

    carries_backward: bool  # see the module's docstring; a class attribute of each

    @property
    def run_eager(self) -> Callable[..., Any] | None: ...

    @property
    def op_kernels(self) -> Callable[..., Any] | None: ...

    def key(self, leaves: Sequence[Any]) -> Hashable | None: ...

    def run(self, leaves: Sequence[Any]) -> Any: ...  # None: not recorded

    def add(self, leaves: Sequence[Any], recording: Recording) -> bool: ...

    def __len__(self) -> int: ...


class BackwardReplayer(Replayer, Protocol):
    """A replayer that declares ``carries_backward = True``."""

    def add(
        self, leaves: Sequence[Any], recording: Recording, saved: tuple[int, ...] | None = None
    ) -> bool: ...

    def set_backward(
        self,
        backward: Any,
        name: str,
        grads: Sequence[bool],
        structure: str,
        fallback: Callable[..., Any],
    ) -> None: ...


def carries_backward(replayer: Replayer | None) -> bool:
    """Whether ``replayer`` (None: no replayer) declares ``carries_backward``."""
    return replayer is not None and replayer.carries_backward
