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

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from portkit.backends.ptx import ptx_cache_folder, ptx_key, signature_ptx
from portkit.simt.numba_check import NumbaRejects, no_compiler, rejection

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op


# (content key, kernel, argument types) -> None (numba compiles it) or the one-line reason
_VERDICTS: dict[tuple[str, str, str], str | None] = {}


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
            self._key = ptx_key(self._op, self._config.root)
        key = (self._key, name, types)
        if key not in _VERDICTS:
            _VERDICTS[key] = self._compile(name, sig, types)
        return _VERDICTS[key]

    def _compile(self, name: str, sig: tuple, types: str) -> str | None:
        folder = ptx_cache_folder(self._op, self._config, self._key)
        kernel = self._op.kernels[name]
        try:
            signature_ptx(kernel, folder, name, sig, ask_driver=False)
        except Exception as exc:  # numba's rejection, or numba failing on the kernel
            if no_compiler(exc):  # no NVVM or CUDA toolkit here: no verdict, simulate
                return None
            return rejection(name, kernel.py_func, types, exc)
        return None


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


def forget() -> None:
    """Drop the verdicts kept in memory (tests)."""
    _VERDICTS.clear()
