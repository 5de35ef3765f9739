"""numba's verdict on a simulated launch, before the simulator runs it.

The simulator runs any Python, so a prototype numba cannot compile (``cuda.atomic.add``
on a float16 array, a list in a kernel, a NumPy call numba lacks) would pass ``portkit
sim``, ``watch`` and the notebook API and fail only on the GPU. So the first launch of
each (kernel, argument types) compiles the kernel with numba's CUDA compiler for the
configured architecture (``compile_ptx``, no GPU needed; backends/ptx.py, the path
``portkit compile`` takes), with the types numba gives the launch's own arguments. What
numba rejects raises ``NumbaRejects``: one line with the kernel, the prototype's file
and line and numba's reason.

Verdicts are kept by content (the kernels' code and the files they read, numba's
version, the architecture, the argument types): in memory for the life of the process
(a watch loop or a notebook pays once per edit), and a signature that compiled on disk
in the project's cache folder, beside ``portkit compile``'s.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import portkit.backends.prototype_cache as prototype_cache
from portkit.backends.ptx import ARCH, COMPUTE_CAPABILITY, signature_ptx
from portkit.errors import KernelError

if TYPE_CHECKING:
    from pathlib import Path

    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


class NumbaRejects(KernelError):
    """numba's CUDA compiler refuses a kernel for the argument types it is launched with."""


# (content key, kernel, argument types) -> None (numba compiles it) or the one-line reason
_VERDICTS: dict[tuple[str, str, str], str | None] = {}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class TypeCheck:
    """The type check of one op's kernels over one run of the simulator backend."""

    def __init__(self, op: Op, config: ProjectConfig) -> None:
        from portkit.simt.mlir_names import mlir_kernel_names

        self._op, self._config = op, config
        self._skip = bool(mlir_kernel_names(op))  # not numba kernels: nothing to compile
        self._key: str | None = None  # the op's content key, at its first launch
        self._seen: dict[tuple[str, str], str | None] = {}

    def check(self, name: str, args: Sequence[Any]) -> None:
        """Raise ``NumbaRejects`` if numba cannot compile kernel ``name`` for ``args``."""
        if self._skip:
            return
        sig = _signature(args)
        if sig is None:
            return
        types = ", ".join(map(str, sig))
        verdict = self._seen.get((name, types), "")
        if verdict == "":
            verdict = self._verdict(name, sig, types)
            self._seen[(name, types)] = verdict
        if verdict is not None:
            raise NumbaRejects(verdict)

    def _verdict(self, name: str, sig: tuple, types: str) -> str | None:
        if self._key is None:
            options = {"check": "compile_ptx", "cc": COMPUTE_CAPABILITY}
            self._key = prototype_cache.cache_key(
                self._op.kernels.values(), self._config.root, options
            )
        key = (self._key, name, types)
        if key not in _VERDICTS:
            _VERDICTS[key] = self._compile(name, sig, types)
        return _VERDICTS[key]

    def _compile(self, name: str, sig: tuple, types: str) -> str | None:
        from numba.core.errors import NumbaError

        folder = self._folder()
        kernel = self._op.kernels[name]
        try:
            signature_ptx(kernel, folder, name, sig)
        except NumbaError as exc:
            return rejection(name, kernel.py_func, types, str(exc))
        except Exception:  # no NVVM here, or numba failed itself: no verdict, simulate
            return None
        return None

    def _folder(self) -> Path | None:
        if not self._config.settings.prototype_cache:
            return None
        assert self._key is not None
        entry = prototype_cache.entry_directory(self._config.cache_dir, self._op.name, self._key)
        return entry / f"ptx-{ARCH}"


def _signature(args: Sequence[Any]) -> tuple | None:
    """The numba types of a launch's arguments, as ``portkit compile`` traces them
    (bfloat16 tensors: numba-cuda's bfloat16 arrays); None where numba types none."""
    import numba
    import torch

    from portkit.launch.trace import numba_type

    try:
        return tuple(
            numba_type(a) if isinstance(a, torch.Tensor) else numba.typeof(a) for a in args
        )
    except (ValueError, TypeError):
        return None


def rejection(name: str, py_func: Any, types: str, message: str) -> str:
    """numba's error as one line: the kernel, the prototype's file and line, the reason."""
    text = _ANSI.sub("", message)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Failed in cuda mode pipeline")]
    reason = lines[0] if lines else type(message).__name__
    called = None
    if "found for signature" in reason:
        wanted = next((line[4:] for line in lines if line.startswith(">>> ")), "")
        function = re.search(r"Function\(<[\w ]*?'?([\w.]+)'?(?: at 0x\w+)?>\)", reason)
        label = function.group(1).removeprefix("numba.cuda.stubs.") if function else "a function"
        called = label.rsplit(".", 1)[-1]
        reason = f"no implementation of {label} for {wanted or 'these argument types'}"
        if any(line == "No match." for line in lines):
            reason += " (no match)"
    file, line = _where(text, py_func, called)
    return (
        f"kernel {name} ({file}:{line}): numba cannot compile it for {ARCH} with "
        f"arguments ({types}): {reason.rstrip(':. ')}"
    )


def _where(text: str, py_func: Any, called: str | None) -> tuple[str, int]:
    """The file and line numba names, else the first line of the kernel that calls
    ``called``, else the kernel's ``def``."""
    file = py_func.__code__.co_filename
    found = re.search(r"During: .* at (.+?) \((\d+)\)", text) or re.search(
        r'File "(.+?)", line (\d+)', text
    )
    if found:
        named = found.group(1)
        if os.path.isfile(named):
            return os.path.abspath(named), int(found.group(2))
        return file, int(found.group(2))
    try:
        source, first = inspect.getsourcelines(py_func)
    except (OSError, TypeError):
        return file, py_func.__code__.co_firstlineno
    if called:
        for offset, text_line in enumerate(source):
            if re.search(rf"\b{re.escape(called)}\s*\(", text_line):
                return file, first + offset
    return file, first


def forget() -> None:
    """Drop the verdicts kept in memory (tests)."""
    _VERDICTS.clear()
