"""The compiled replayer: ``native.cpp`` built with torch's C++ extension builder.

Built once per source, torch version and flags into torch's extension folder and shared
by portkit and every exported package (which ships this module and ``native.cpp``);
where a CUDA build of torch, a C++ compiler or ninja is missing, ``compiled_replayer``
says why in one line on stderr and returns None, and the caller replays with the prepared
functions (``prepared.py``). A CPU build of torch builds it too, for the CPU tests
(docs/fast-path.md, "The per-call half exists twice").
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .steps import MAX_SIGNATURES, Recording

SOURCE = Path(__file__).with_name("native.cpp")
_built: dict[str, Any] = {}
_said: set[str] = set()


class NativeReplayer:
    """The ``Replayer`` over the compiled one: ``run`` and ``key`` are the C++ methods
    themselves, so a replayed call adds no Python frame of ours."""

    carries_backward = True  # saved references and set_backward (replayer_protocol.py)

    def __init__(self, module: Any, launch: int, error_name: int, capacity: int) -> None:
        from .torch_private import functorch_level

        self._module = module
        self._native = module.Replayer(launch, error_name, capacity, functorch_level)
        self.run = self._native.run
        self.run_eager = self._native.run_eager
        self.key = self._native.key
        # The recordings' kernels (``DriverKernel``s), whose handles the C++ side keeps
        # raw: held here, their libraries stay loaded while this replayer can launch them.
        self._drivers: set[Any] = set()

    def add(
        self, leaves: Sequence[Any], recording: Recording, saved: tuple[int, ...] | None = None
    ) -> bool:
        """The C++ side keeps the kernels as raw handles; this object keeps their
        ``DriverKernel``s, and through them their libraries loaded (a twin's library is
        unloaded once nothing launches it: ``driver_launch.LoadedLibrary``). ``saved``:
        the references of the tensors a forward saves for backward, where
        ``set_backward`` may give its replays an autograd node (``replaying.saved_refs``)."""
        self._drivers.update(launch.step.driver for launch in recording.launches)
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
        ``(structure, *saved, *grads)``, as ``prepared.flatten`` makes them) and calls
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


def compiled_replayer(who: str, capacity: int = MAX_SIGNATURES) -> NativeReplayer | None:
    """The compiled replayer, or None after one line on stderr per process saying why
    (``who``: "portkit", or an exported package's name, leads the line)."""
    native = native_replayer(who, capacity)
    line = f"{who}: launches replay in Python: {_built.get('reason')}"
    if native is None and line not in _said:
        _said.add(line)
        print(line, file=sys.stderr)
    return native


def native_replayer(who: str = "portkit", capacity: int = MAX_SIGNATURES) -> NativeReplayer | None:
    """The compiled replayer launching through the CUDA driver, or None (why: the
    ``compiled_replayer`` line)."""
    entry_points = launch_entry_points()
    if entry_points is None:
        return None
    module = compiled_module(who)
    if module is None:
        return None
    return NativeReplayer(module, *entry_points, capacity)


def launch_entry_points() -> tuple[int, int] | None:
    """``cuLaunchKernel`` and ``cuGetErrorName`` by address in libcuda, or None on a CPU
    build of torch (the CPU tests give a launch function of theirs here)."""
    import ctypes

    import torch

    if torch.version.cuda is None:
        _built.setdefault("reason", "this torch is a CPU build: the twin does not run here")
        return None
    driver = ctypes.CDLL("libcuda.so.1")
    address = ctypes.c_void_p
    return (
        ctypes.cast(driver.cuLaunchKernel, address).value or 0,
        ctypes.cast(driver.cuGetErrorName, address).value or 0,
    )


def compiled_module(who: str = "portkit") -> Any:
    """``native.cpp`` built for this torch (with CUDA streams where torch has CUDA), or
    None where it does not build."""
    if "module" not in _built and "build error" not in _built:
        try:
            _built["module"] = _build(who)
        except NoCompiler as exc:  # said before any build was tried
            _built["build error"] = _built["reason"] = str(exc)
        except Exception as exc:  # a failed build (headers, flags): fall back, say why
            last = (str(exc).strip().splitlines() or [""])[-1]
            _built["build error"] = _built["reason"] = f"{type(exc).__name__}: {last}"
    return _built.get("module")


def extension_name() -> str:
    """The extension's name for this torch: a digest of the source, torch's version and
    the flags, so a build is never loaded for another source, torch or configuration."""
    import torch

    identity = SOURCE.read_bytes() + torch.__version__.encode() + " ".join(_flags()).encode()
    return f"portkit_replay_{hashlib.sha256(identity).hexdigest()[:16]}"


def _flags() -> list[str]:
    import torch

    return ["-O2", "-DPORTKIT_WITH_CUDA"] if torch.version.cuda is not None else ["-O2"]


def _build(who: str) -> Any:
    import torch

    from .torch_private import cpp_extension_folder

    cuda, flags, name = torch.version.cuda is not None, _flags(), extension_name()
    if name in sys.modules:  # loaded in this process already (portkit's, or a package's)
        return sys.modules[name]
    folder = cpp_extension_folder(name)
    built = folder / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[-1]}"
    # A finished build (no build holds torch's lock file) is loaded as it is: the name
    # is the source's digest, and running ninja again would rebuild it for another copy
    # of the same source (portkit's and a package's differ only in their path).
    if built.is_file() and not (folder / "lock").exists():
        module = _load(name, built)
    else:
        from torch.utils import cpp_extension

        _check_tools(cpp_extension)
        print(
            f"{who}: compiling the launch replayer once for this torch (about a minute), "
            f"into {folder}",
            file=sys.stderr,
        )
        module = cpp_extension.load(name, [str(SOURCE)], extra_cflags=flags, with_cuda=cuda)
    sys.modules[name] = module
    return module


class NoCompiler(Exception):
    """No C++ compiler or no ninja here: nothing was built, nothing tried."""


def _check_tools(cpp_extension: Any) -> None:
    """Refuse at once where the build cannot run (each process would otherwise spend
    seconds on a build that fails): torch's C++ compiler (``CXX``, else ``c++``) and ninja."""
    compiler = cpp_extension.get_cxx_compiler()  # CXX, else c++ (every torch portkit takes)
    if shutil.which(compiler) is None:
        raise NoCompiler(f"no C++ compiler ({compiler} not found) to build the replayer")
    if not cpp_extension.is_ninja_available():
        raise NoCompiler("no ninja (pip install ninja) to build the replayer")


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
