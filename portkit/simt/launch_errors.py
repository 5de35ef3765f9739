"""Launch mistakes in the types numba raises for them, so code written against numba
(``assertRaises(TypeError)``, ``except ValueError``) catches portkit's: each is a
``LaunchError`` (one line, no traceback in the CLI) and also numba's built-in type."""

from __future__ import annotations

from typing import Any

from portkit.errors import LaunchError


class LaunchTypeError(LaunchError, TypeError):
    """A launch numba refuses with ``TypeError``: arguments matching none of the kernel's
    declared signatures, the wrong number of arguments, non-integer dimensions."""


class LaunchValueError(LaunchError, ValueError):
    """A launch numba refuses with ``ValueError``: no launch configuration, more than
    three dimensions."""


def check_dimensions(kernel: str, grid: Any, block: Any) -> None:
    """numba's own checks of ``[grid, block]`` (before portkit's GPU limits), raising
    numba's type with numba's words and the kernel's name."""
    from numba.cuda.errors import normalize_kernel_dimensions

    try:
        normalize_kernel_dimensions(grid, block)
    except ValueError as exc:
        raise LaunchValueError(f"kernel {kernel}: {exc}".strip()) from None
    except TypeError as exc:
        raise LaunchTypeError(f"kernel {kernel}: {exc}") from None


def unconfigured(kernel: str) -> LaunchValueError:
    """A kernel called without ``[grid, block]``: numba's ``ValueError``."""
    return LaunchValueError(
        f"kernel {kernel}: launch configuration was not specified; launch it as "
        f"{kernel}[grid, block](...)"
    )
