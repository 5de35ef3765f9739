"""Errors portkit raises for a user's mistake.

Every class here is a ``PortkitError``: the CLI prints its message (no traceback) and
exits nonzero. Anything else that escapes is a bug in portkit and keeps its traceback.
"""

from __future__ import annotations

from portkit.results import FailureSite

# The errors a launch raises are the launch contract's (shipped verbatim in exported
# packages): one class object each, here and there.
from portkit.runtime.launch_contract import InputError as InputError
from portkit.runtime.launch_contract import LaunchError as LaunchError
from portkit.runtime.launch_contract import OpDefinitionError as OpDefinitionError
from portkit.runtime.launch_contract import PortkitError as PortkitError


class ConfigError(PortkitError):
    """pyproject.toml's [tool.portkit] table is wrong, or a folder it names is missing."""


class OpNotFound(PortkitError):
    """An op name that discovery does not know."""

    def __init__(self, name: str, known: list[str]) -> None:
        listing = ", ".join(known) if known else "none were found"
        super().__init__(f"unknown op {name!r}; known ops: {listing}")
        self.name = name
        self.known = known


class BackwardContractError(OpDefinitionError):
    """An op's backward breaks the contract (the wrong number of gradients): a failure of
    the backward, even when it is found while the forward is being registered."""

    @classmethod
    def gradient_count(cls, op: str, returned: int, inputs: int) -> BackwardContractError:
        return cls(
            f"op {op}: backward returned {returned} gradient(s), expected {inputs} (one per "
            f"input of the forward, None for an input without one; scalars after the tensors, "
            f"a case's extra=, count as inputs)"
        )


class TwinSignatureError(OpDefinitionError):
    """portkit cannot read a twin kernel's parameter list. Callers that have a compiler
    let it speak first: a syntax error is its to report (backends/twin*/build.py)."""


class DtypeError(OpDefinitionError):
    """An op's dtypes and its kernels or reference disagree: a twin template that cannot
    be instantiated for a dtype the op accepts, or a reference that returns another dtype
    than the implementation. A contract error (exit 2), not one failed check."""


class Located(PortkitError):
    """An error that knows where it happened: ``site``, set where it is raised, is what
    ``failure_site`` gives a check row (results.FailureSite); None where nothing names a
    place. The message says the same for people."""

    site: FailureSite | None = None  # also for one made without __init__ (kernel_exceptions)

    def __init__(self, message: str, site: FailureSite | None = None) -> None:
        super().__init__(message)
        self.site = site


class OpLoadError(Located, OpDefinitionError):
    """An op's prototype that does not import (a syntax error, an exception at import);
    ``site``: the line."""


class LauncherError(Located, OpDefinitionError):
    """An op's launcher (its forward or backward) raised while portkit traced its launches
    on one of its own cases; ``site``: the deepest line in the op's prototype file."""


class TwinCompileError(Located):
    """NVRTC or the host C++ compiler rejected a twin; the message carries its log and
    ``site`` the file and line of its first error, where the log names one."""


class ReferenceFailure(Located):
    """An op's PyTorch reference raised on a case. ``stage`` is "forward" (calling it) or
    "backward" (its autograd); the message and ``site`` name the reference's file:line."""

    def __init__(self, message: str, stage: str, site: FailureSite | None = None) -> None:
        super().__init__(message, site)
        self.stage = stage


class KernelError(Located):
    """A kernel raised while it ran in the simulator; the message names block and thread,
    and ``site`` holds them where the simulator knew them."""


class GuardViolation(KernelError):
    """A kernel wrote into the guard zone around a tensor during a check: a store past
    the end (or before the start) that would otherwise land unseen."""

    def __init__(
        self,
        message: str,
        *,
        kernel: str,
        implementation: str,
        argument: int,
        before: int,
        after: int,
    ) -> None:
        super().__init__(message, FailureSite(kernel))
        self.kernel, self.implementation, self.argument = kernel, implementation, argument
        self.before, self.after = before, after


class TooLarge(PortkitError):
    """A case that cannot fit in this machine's available memory (said before allocating)."""


class BackendUnavailable(PortkitError):
    """The machine lacks what a backend needs (no GPU, package missing)."""


def describe(exc: Exception, prototype: object = None) -> str:
    """A portkit error's own message; for anything else its type and where it was raised:
    in the op's ``prototype`` file where given and on the way (``deepest_site``)."""
    if isinstance(exc, PortkitError):
        return str(exc)
    site = deepest_site(exc, prototype)
    where = f" (at {site.file}:{site.line})" if site else ""
    return f"{type(exc).__name__}: {exc}{where}"


def deepest_site(exc: BaseException, path: object) -> FailureSite | None:
    """Where ``exc`` was raised in the file ``path`` (an op's prototype): its deepest frame
    there, else the deepest frame of all (torch's or portkit's internals are not where the
    author's mistake is)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if path is not None and f.filename == str(path)] or frames
    return FailureSite(file=ours[-1].filename, line=ours[-1].lineno) if ours else None


def raised(exc: BaseException, prototype: object) -> tuple[str, FailureSite | None]:
    """``"KeyError: 'x' (at proto.py:12)"``: what an op's own code raised, its message's
    first line, and where in the ``prototype`` file (``deepest_site``); and that site."""
    site = deepest_site(exc, prototype)
    where = f" (at {site.file}:{site.line})" if site else ""
    first = (str(exc).strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text + where, site


def failure_site(exc: BaseException, prototype: object = None) -> FailureSite | None:
    """Where ``exc`` happened, as a check row keeps it: the site a ``Located`` error was
    raised with; for anything but a portkit error, the frame ``describe`` names."""
    if isinstance(exc, Located):
        return exc.site
    if isinstance(exc, PortkitError):
        return None
    return deepest_site(exc, prototype)
