"""``numba``: the prototype compiled by numba-cuda and launched on a GPU.

Launches go on PyTorch's current stream (numba would otherwise use its own default
stream and race with torch's work) and tensors are wrapped without the
``__cuda_array_interface__`` stream sync, which is redundant on the same stream.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import portkit.backends.prototype_cache as prototype_cache
from portkit.backends.base import Backend, cuda_unavailable_reason
from portkit.launch.kernel_set import LaunchConfig, LaunchTarget
from portkit.project.dtypes import BITS_VIEW, dtype_name, prototype_view
from portkit.simt.numba_check import NumbaRejects, rejection

if TYPE_CHECKING:
    from portkit.project.discovery import Op


def device_array(tensor: Any) -> Any:
    """A CUDA tensor as a numba kernel argument. torch describes a bfloat16 tensor as raw
    bytes ("<V2"), which numba cannot type; it goes as its uint16 bits, typed as an array
    of numba-cuda's bfloat16, so the kernel sees ``x[i]`` as a bfloat16 scalar."""
    from numba import cuda

    array = cuda.as_cuda_array(prototype_view(tensor), sync=False)
    if dtype_name(tensor.dtype) in BITS_VIEW:
        return _bfloat16_argument_class()(array)
    return array


@cache
def _bfloat16_argument_class() -> type:
    from numba import types
    from numba.cuda import bf16
    from numba.cuda.args import ArgHint

    class BFloat16Argument(ArgHint):
        """numba's hook for an argument with its own type and device memory."""

        def to_device(self, retr: list[Any], stream: Any = 0) -> Any:
            # Already on the device: no copy. numba's launch reads the pointer, layout
            # and strides from a strided memory view (a DeviceNDArray has no .ptr).
            from portkit.numba_internals import strided_memory_view

            view = strided_memory_view(self.value, stream)
            retr.append(lambda: view)  # keep it alive until the launch is done
            return view

        @property
        def _numba_type_(self) -> Any:
            return types.Array(bf16.bfloat16, self.value.ndim, "C")

    return BFloat16Argument


def lineinfo_links(dtypes: Sequence[str]) -> bool:
    """Whether an op's kernels can be compiled with line info. nvJitLink refuses to link a
    kernel with line info against numba-cuda's bfloat16 library ("linking module flags
    'Debug Info Version': IDs have conflicting behaviors"; H100, numba-cuda 0.30.4,
    2026-11-24), and recompiling that kernel alone without it did not help in the same
    process. Such an op runs without line info: sanitizer findings in it name no .py line."""
    return "bfloat16" not in dtypes


def _cuda_module(dispatcher: Any) -> Any:
    """The ``cuda`` module that built the kernel: numba-cuda's, or numba-cuda-mlir's (the
    same launch API: ``external_stream``, ``as_cuda_array``)."""
    from portkit.simt.mlir_names import is_mlir_kernel

    if is_mlir_kernel(dispatcher):
        from numba_cuda_mlir import cuda as mlir_cuda

        return mlir_cuda
    from numba import cuda

    return cuda


class NumbaKernel(LaunchTarget):
    def __init__(self, dispatcher: Any) -> None:
        self._dispatcher = dispatcher
        self._cuda = _cuda_module(dispatcher)

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        import torch

        cuda = self._cuda
        stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
        if cuda.__name__ == "numba.cuda":
            device_args = [device_array(a) if isinstance(a, torch.Tensor) else a for a in args]
        else:  # numba-cuda-mlir (no bfloat16 here: unsupported_reason)
            device_args = [
                cuda.as_cuda_array(prototype_view(a), sync=False)
                if isinstance(a, torch.Tensor)
                else a
                for a in args
            ]
        with warnings.catch_warnings():
            # Small grids are deliberate in edge-size cases; numba warns about each.
            # (numba-cuda raises its own copy of the class, so match the message.)
            warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU")
            try:
                self._dispatcher[config.grid, config.block, stream, config.shared_bytes](
                    *device_args
                )
            except Exception as exc:
                if not _numba_refused(exc):
                    raise
                # What numba cannot compile is one line, as in the simulator's type check.
                func = self._dispatcher.py_func
                types = ", ".join(str(numba_typeof(a)) for a in device_args)
                raise NumbaRejects(rejection(func.__name__, func, types, exc)) from None


def _numba_refused(exc: BaseException) -> bool:
    """numba's compile-time refusal (``NumbaError``: typing, lowering, unsupported),
    matched by name: numba-cuda raises its own copy of numba's error classes."""
    return any(cls.__name__ == "NumbaError" for cls in type(exc).__mro__)


def numba_typeof(value: Any) -> Any:
    import numba

    try:
        return numba.typeof(value)
    except (ValueError, TypeError):
        return type(value).__name__


class NumbaGPU(Backend):
    name = "numba"
    role = "prototype"
    device = "cuda"
    description = "prototype compiled by numba-cuda, on the GPU"
    has_line_info = True
    reports_cache = True

    def _probe(self) -> str | None:
        reason = cuda_unavailable_reason()
        if reason:
            return reason
        from numba import cuda

        if not cuda.is_available():
            return "numba-cuda sees no GPU (driver or NVVM missing)"
        return None

    # ``lineinfo`` (set under compute-sanitizer): compile with line info, so the
    # sanitizer names the prototype's .py lines (no cost at run time).
    # Compiled kernels on disk (backends/prototype_cache.py); off here, or in the
    # session's settings (`portkit check --no-cache`, PORTKIT_PROTOTYPE_CACHE=0).
    use_cache: bool = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._told_no_lineinfo: set[str] = set()  # ops already said to run without it

    def unsupported_reason(self, op: Op) -> str | None:
        """numba-cuda-mlir kernels need that package to see the GPU too, and run without
        bfloat16 (portkit passes bfloat16 as numba-cuda's own type)."""
        from portkit.simt.mlir_names import mlir_kernel_names

        if not mlir_kernel_names(op):
            return None
        if "bfloat16" in op.definition.dtypes:
            return "bfloat16 reaches numba-cuda-mlir kernels only through the sim backend"
        try:
            from numba_cuda_mlir import cuda as mlir_cuda
        except Exception as exc:  # pragma: no cover - the op imported it already
            return f"numba_cuda_mlir cannot be imported: {exc}"
        return None if mlir_cuda.is_available() else "numba-cuda-mlir sees no GPU"

    def launch_targets(self, op: Op) -> Mapping[str, LaunchTarget]:
        use_cache = self.use_cache and self.config.settings.prototype_cache
        lineinfo = self.lineinfo and lineinfo_links(op.definition.dtypes)
        if self.lineinfo and not lineinfo and op.name not in self._told_no_lineinfo:
            self._told_no_lineinfo.add(op.name)
            print(
                f"portkit: {op.name}: numba kernels compiled without line info (numba-cuda "
                "cannot link it with its bfloat16 library); sanitizer findings name no .py line",
                file=sys.stderr,
            )
        for dispatcher in op.kernels.values():
            if lineinfo:
                dispatcher.targetoptions["lineinfo"] = True  # before the first compile
            if _cuda_module(dispatcher).__name__ != "numba.cuda":
                continue  # the disk cache hooks numba-cuda's internals only
            if use_cache:
                prototype_cache.attach(dispatcher, op.name, self.config.root, self.config.cache_dir)
            else:
                prototype_cache.detach(dispatcher)
        return {name: NumbaKernel(d) for name, d in op.kernels.items()}

    def cache_report(self, ops: Sequence[Op]) -> list[str]:
        """One line per kernel: loaded from the disk cache, compiled, or not run."""
        lines = []
        for op in ops:
            for name, dispatcher in sorted(op.kernels.items()):
                folder = getattr(dispatcher, "_portkit_cache_dir", None)
                where = f"cache folder {folder}" if folder else "no disk cache"
                lines.append(
                    f"numba {op.name}.{name}: {prototype_cache.origin(dispatcher)} ({where})"
                )
        return lines
