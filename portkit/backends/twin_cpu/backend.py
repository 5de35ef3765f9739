"""``twin-cpu``: the C CUDA twin of ``cuda_src/<op>.cu`` compiled for the CPU and run with
each block's threads as fibers (``include/portkit_cuda_cpu.h``).

Two ways to run, chosen by what asks:

- ``launch_targets(op)`` (``portkit.load``, benchmarks): the plain build, launched in
  this process through ``ctypes`` on the tensors' own memory.
- ``checked_launch_targets(op)`` (the harness: ``portkit check``, ``portkit diff``,
  pytest): the check build, with AddressSanitizer and UndefinedBehaviorSanitizer, in a
  child process (``check_worker``); each launch runs twice, threads in forward and in
  reverse order, and a result that depends on the order fails the launch, naming the
  tensor and index.

Signatures, template instantiations and argument checks are the GPU twin's
(``portkit.backends.twin``), so the same launch means the same instantiation on both.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portkit.backends.base import Backend
from portkit.backends.twin.backend import bind_arguments, missing_twin_reason
from portkit.backends.twin.instances import readable_twin
from portkit.backends.twin.source import TwinKernel, display_name
from portkit.backends.twin_cpu import uninit
from portkit.backends.twin_cpu.build import (
    CpuLibrary,
    compile_twin_cpu,
    compiler_unavailable_reason,
    cpu_syntax_check,
    find_compiler,
)
from portkit.backends.twin_cpu.check_worker import CheckWorker
from portkit.backends.twin_cpu.loaded import current_library
from portkit.errors import KernelError
from portkit.launch.kernel_set import LaunchConfig, LaunchTarget

if TYPE_CHECKING:
    import torch

    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

ERROR_BYTES = 8192
STRICT = 2
# One launch at a time per process: the fiber runtime keeps its state in globals.
_LAUNCH_LOCK = threading.Lock()


class PlainLaunch(LaunchTarget):
    """A kernel of the plain build, run in this process on the tensors' memory; it keeps
    the build open (``loaded.py``: an edited twin's old build closes with its last one)."""

    def __init__(self, kernel: TwinKernel, library: CpuLibrary, twin: Path) -> None:
        self._kernel = kernel
        self._symbols = library.symbols
        self._library = current_library(twin, library.path)

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        scalar, values = bind_arguments(self._kernel, args, self._symbols)
        expression = self._kernel.expression(scalar)
        function = self._library.function(self._symbols[expression])
        holders: list[Any] = []
        for param, value in zip(self._kernel.params, values):
            if param.pointer:
                holders.append(ctypes.c_void_p(value))
            else:
                data = value.tobytes()
                holders.append(ctypes.create_string_buffer(data, len(data)))
        argv = (ctypes.c_void_p * max(len(holders), 1))(*(ctypes.addressof(h) for h in holders))
        error = ctypes.create_string_buffer(ERROR_BYTES)
        with _LAUNCH_LOCK:
            rc = function(
                (ctypes.c_uint * 3)(*config.grid),
                (ctypes.c_uint * 3)(*config.block),
                ctypes.c_size_t(config.shared_bytes),
                argv,
                0,
                error,
                ctypes.c_size_t(ERROR_BYTES),
            )
        if rc:
            raise KernelError(error.value.decode(errors="replace"))


class CheckedLaunch(LaunchTarget):
    """A kernel of the sanitized build, run twice (thread order forward, then reversed)
    in the check worker on exact-size copies of the tensors, which are copied back."""

    def __init__(
        self,
        kernel: TwinKernel,
        library: CpuLibrary,
        worker: CheckWorker,
        zero: CpuLibrary | None,
        twin: Path,
    ) -> None:
        self._kernel, self._library, self._worker = kernel, library, worker
        self._zero = zero  # the build with zeroed locals (uninit.py)
        self._twin, self._source = display_name(twin), str(twin.resolve())

    def launch(self, config: LaunchConfig, args: Sequence[Any]) -> None:
        scalar, values = bind_arguments(self._kernel, args, self._library.symbols)
        expression = self._kernel.expression(scalar)
        tensors: list[torch.Tensor] = []
        names: list[str] = []
        slots: list[tuple[str, Any]] = []
        where: dict[
            tuple[int, int], int
        ] = {}  # data pointer -> buffer: one buffer for an argument passed twice
        for position, (param, arg, value) in enumerate(zip(self._kernel.params, args, values)):
            if not param.pointer:
                slots.append(("value", value.tobytes()))
                continue
            key = (arg.data_ptr(), arg.numel() * arg.element_size())
            if key not in where:
                where[key] = len(tensors)
                tensors.append(arg)
                names.append(f"{param.name} (argument {position}, {_shape(arg)})")
            slots.append(("buffer", where[key]))
        buffers = [_bytes(t) for t in tensors]
        request = {
            "source": self._source,  # the twin: a new build of it closes the old (worker.py)
            "build": "pattern",
            "library": str(self._library.path),
            "symbol": self._library.symbols[expression],
            "kernel": expression,
            "grid": config.grid,
            "block": config.block,
            "shared": config.shared_bytes,
            "args": slots,
            "buffers": buffers,
            "itemsizes": [t.element_size() for t in tensors],
            "schedule": True,
            "zero": (str(self._zero.path), self._zero.symbols[expression]) if self._zero else None,
        }
        reply = self._worker.run(request, names)
        if "error" in reply:
            raise KernelError(reply["error"])
        for tensor, before, after in zip(tensors, buffers, reply["buffers"]):
            if after != before:  # writing an unchanged input would bump autograd's version
                _fill(tensor, after)
        if reply["order"] or reply["uninit"]:
            import numpy as np

            buffer, first, count = (reply["order"] or reply["uninit"])[0]
            tensor = tensors[buffer]
            index = [int(i) for i in np.unravel_index(first, tuple(tensor.shape))]
            if not reply["order"]:
                raise KernelError(
                    uninit.message(
                        expression,
                        self._twin,
                        names[buffer],
                        index,
                        count,
                        tensor.numel(),
                        list(self._library.warnings),
                    )
                )
            raise KernelError(
                f"{expression} is order-dependent: {names[buffer]} differs at "
                f"{index} ({count} of {tensor.numel()} elements) between threads run in "
                f"forward and in reverse order between barriers; likely a missing "
                f"__syncthreads or __syncwarp, or a race on shared or global memory"
            )


def _shape(tensor: Any) -> str:
    return (
        f"{'x'.join(map(str, tensor.shape)) or 'scalar'} {str(tensor.dtype).removeprefix('torch.')}"
    )


def _bytes(tensor: Any) -> bytes:
    import torch

    return tensor.reshape(-1).view(torch.uint8).numpy().tobytes()


def _fill(tensor: Any, data: bytes) -> None:
    import torch

    if data:
        tensor.reshape(-1).view(torch.uint8).copy_(
            torch.frombuffer(bytearray(data), dtype=torch.uint8)
        )


class TwinCPU(Backend):
    name = "twin-cpu"
    role = "twin"
    device = "cpu"
    # Runs many threads per second, but far fewer than a GPU: skip the GPU-sized cases,
    # and gradcheck in fast mode, as for the simulator.
    simulated = True
    description = (
        "C CUDA twin compiled for the CPU (threads as fibers); checks run it with "
        "AddressSanitizer, UBSan and a reversed thread order"
    )

    def __init__(self, config: ProjectConfig) -> None:
        super().__init__(config)
        self._worker: CheckWorker | None = None

    def _probe(self) -> str | None:
        try:
            import torch  # noqa: F401
        except ImportError:
            return "torch is not installed"
        return compiler_unavailable_reason()

    def unsupported_reason(self, op: Op) -> str | None:
        return missing_twin_reason(op, self.config)

    def launch_targets(self, op: Op) -> dict[str, LaunchTarget]:
        """The plain build, run in this process."""
        kernels, expressions = readable_twin(op, cpu_syntax_check)
        assert op.twin_path is not None  # readable_twin checked it
        library = compile_twin_cpu(op.twin_path, expressions, self.config.cache_dir, "plain")
        return {n: PlainLaunch(k, library, op.twin_path) for n, k in kernels.items()}

    def checked_launch_targets(self, op: Op) -> dict[str, LaunchTarget]:
        """The check builds, run in the sanitized worker: the pattern build (locals filled
        with a pattern, AddressSanitizer, UBSan) and, where the compiler can, the zeroed
        one beside it; a value that differs between them was read uninitialised
        (``uninit.py``)."""
        kernels, expressions = readable_twin(op, cpu_syntax_check)
        assert op.twin_path is not None  # readable_twin checked it
        path, cache_dir = op.twin_path, self.config.cache_dir
        compiler = find_compiler()
        modes = [uninit.PATTERN]
        if compiler is not None and uninit.supported(compiler):
            modes.append(uninit.ZERO)  # the two check builds compile side by side
        with ThreadPoolExecutor(len(modes)) as pool:
            built = list(
                pool.map(lambda m: compile_twin_cpu(path, expressions, cache_dir, m), modes)
            )
        library, zero = built[0], (built[1] if len(built) > 1 else None)
        if self._worker is None:
            self._worker = CheckWorker()
        worker, twin = self._worker, op.twin_path
        return {n: CheckedLaunch(k, library, worker, zero, twin) for n, k in kernels.items()}

    def __del__(self) -> None:
        worker = getattr(self, "_worker", None)  # absent if __init__ raised
        if worker is not None:
            worker.close()
