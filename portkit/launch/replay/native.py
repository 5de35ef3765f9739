"""The compiled replayer: ``native.cpp`` built with torch's C++ extension builder.

Built once per source and torch version into torch's extension folder
(``TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``) and loaded from
there afterwards. It needs a CUDA build of torch, a C++ compiler, ninja and the CUDA
headers; where any is missing ``native_replayer()`` returns None, ``unavailable_reason()``
says why, and the Python replayer takes over. With a CPU build of torch the same file
builds without streams and replays CPU tensors through a launch function the caller
gives: the CPU tests run it so.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from portkit.runtime.executor import MAX_SIGNATURES
from portkit.runtime.steps import Recording

SOURCE = Path(__file__).with_name("native.cpp")
_built: dict[str, Any] = {}


class NativeReplayer:
    """``PythonReplayer``'s interface over the compiled one: ``run`` and ``key`` are the
    C++ methods themselves, so a replayed call adds no Python frame of ours."""

    def __init__(self, module: Any, launch: int, error_name: int, capacity: int) -> None:
        from portkit.runtime.torch_private import functorch_level

        self._module = module
        self._native = module.Replayer(launch, error_name, capacity, functorch_level)
        self.run = self._native.run
        self.run_eager = self._native.run_eager
        self.key = self._native.key

    def add(
        self, leaves: Sequence[Any], recording: Recording, saved: tuple[int, ...] | None = None
    ) -> bool:
        """The C++ side keeps the kernels as raw handles: their libraries stay loaded for
        the process (nothing in portkit unloads one). ``saved``: the references of the
        tensors a forward saves for backward, where ``set_backward`` may give its
        replays an autograd node (``launcher.saved_refs``)."""
        launches = [
            (
                launch.step.function,
                launch.step.grid,
                launch.step.block,
                launch.step.shared_bytes,
                launch.step.packed(),
                launch.refs,
            )
            for launch in recording.launches
        ]
        return self._native.add(
            tuple(leaves),
            str(recording.device),
            list(recording.allocations),
            launches,
            recording.result,
            recording.eager,
            saved,
        )

    def set_backward(
        self,
        backward: NativeReplayer,
        name: str,
        grads: Sequence[bool],
        structure: str,
        fallback: Callable[..., Any],
    ) -> None:
        """Plain-eager calls that want a gradient replay too: their outputs get a C++
        autograd node whose backward replays with ``backward`` (whose leaves are
        ``(structure, *saved, *grads)``, as ``executor.flatten`` makes them) and calls
        ``fallback(saved, *grads)`` (the op's Python backward, per input a gradient or
        None) where that is a miss or a graph of the backward is wanted."""
        self._native.set_backward(backward._native, name, list(grads), structure, fallback)

    def op_kernels(self, qualname: str, device: str, has_backward: bool) -> Any:
        """C++ kernels for the registered op ``qualname`` replaying this (its forward's)
        recordings, registered while the returned object lives (native.cpp ``OpKernels``):
        at ``device``'s backend key, the replay from the dispatcher's stack; at its
        autograd key, the redispatch below autograd, or with a gradient wanted the
        replay with its autograd node; the op's Python kernels for every other call."""
        import torch

        namespace, name = qualname.split("::", 1)
        return self._module.OpKernels(
            namespace, name, device, self._native, has_backward, torch.compiler.is_compiling
        )

    def __len__(self) -> int:
        return self._native.size()


def native_replayer(capacity: int = MAX_SIGNATURES) -> NativeReplayer | None:
    """The compiled replayer launching through the CUDA driver, or None (see
    ``unavailable_reason``)."""
    import torch

    if torch.version.cuda is None:
        _built.setdefault("reason", "this torch is a CPU build: the twin does not run here")
        return None
    module = compiled_module()
    if module is None:
        return None
    launch, error_name = _driver_entry_points()
    return NativeReplayer(module, launch, error_name, capacity)


def unavailable_reason() -> str | None:
    native_replayer()
    return _built.get("reason")


def compiled_module() -> Any:
    """``native.cpp`` built for this torch (with CUDA streams where torch has CUDA), or
    None where it does not build."""
    if "module" not in _built and "build error" not in _built:
        try:
            _built["module"] = _build()
        except Exception as exc:  # a missing compiler, ninja, headers: fall back, say why
            last = (str(exc).strip().splitlines() or [""])[-1]
            _built["build error"] = _built["reason"] = f"{type(exc).__name__}: {last}"
    return _built.get("module")


def _build() -> Any:
    import torch
    from torch.utils import cpp_extension

    cuda = torch.version.cuda is not None
    digest = hashlib.sha256(SOURCE.read_bytes() + torch.__version__.encode()).hexdigest()
    name = f"portkit_replay_{digest[:16]}"
    folder = Path(cpp_extension._get_build_directory(name, verbose=False))
    if not any(folder.glob(f"{name}*.so")):
        print(
            f"portkit: compiling the launch replayer once for this torch (about a minute), "
            f"into {folder}",
            file=sys.stderr,
        )
    flags = ["-O2", "-DPORTKIT_WITH_CUDA"] if cuda else ["-O2"]
    return cpp_extension.load(name, [str(SOURCE)], extra_cflags=flags, with_cuda=cuda)


def _driver_entry_points() -> tuple[int, int]:
    import ctypes

    driver = ctypes.CDLL("libcuda.so.1")
    address = ctypes.c_void_p
    return (
        ctypes.cast(driver.cuLaunchKernel, address).value or 0,
        ctypes.cast(driver.cuGetErrorName, address).value or 0,
    )
