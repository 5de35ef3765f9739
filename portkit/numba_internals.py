"""The one module that touches numba-cuda's and cuda.core's private or internal names.

portkit needs a few things neither package exports: the error cuda.core raises with
NVRTC's log, the hooks of numba-cuda's on-disk kernel cache, the typed IR of a kernel,
the source of numba-cuda's half-precision shims and a device array's strided memory
view. Each is wrapped here, once, with the private API it uses and the versions it was
tested with; nothing else under portkit/ imports an underscore name from ``numba``,
``numba.cuda``, ``numba_cuda`` or ``cuda.core`` (tests/test_numba_internals.py scans
for it). pyproject.toml pins numba-cuda and cuda-core to the tested minor versions;
``scripts/check_numba_release.py`` tries a newer release against this module's tests.

Tested with numba-cuda 0.30.4 (numba 0.68.1), cuda-core 1.2.0 (GPU) and 1.2.2 (CPU).
This module imports nothing from portkit, so every layer may use it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TESTED_VERSIONS = {"numba-cuda": "0.30.4", "cuda-core": "1.2.0, 1.2.2"}

# (module, dotted attribute) of every private or internal name used below that an import
# can check; scripts/check_numba_release.py reports the ones a release moved. Attributes
# of instances (a code library's ``_linking_files``) are checked by the tests only.
PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    ("cuda.core._utils.cuda_utils", "NVRTCError"),
    ("numba.cuda.cudadrv.devicearray", "_to_strided_memory_view"),
    ("numba.cuda._internal.cuda_fp16", "shim_stream"),
    ("numba.cuda._internal.cuda_bf16", "shim_stream"),
    ("numba.cuda.core.caching", "_CacheLocator"),
    ("numba.cuda.core.caching", "NullCache"),
    ("numba.cuda.dispatcher", "CUDACache._impl_class"),
    ("numba.cuda.dispatcher", "CUDACacheImpl._locator_classes"),
    ("numba.cuda.dispatcher", "get_current_device"),
    ("numba.cuda.memory_management.nrt", "NRT_LIBRARY"),
    ("numba.cuda.compiler", "compile_cuda"),
    ("numba.cuda.core.ir", "Assign"),
    ("numba.cuda.core.analysis", "compute_cfg_from_blocks"),
)

# The module numba-cuda defines its ``numba.cuda.bf16`` functions in (their __module__).
BF16_FUNCTION_MODULE = "numba.cuda._internal.cuda_bf16"


def missing_private_names() -> list[str]:
    """The entries of ``PRIVATE_NAMES`` the installed packages lack ("module:attr"), for
    scripts/check_numba_release.py. Tested: none missing on numba-cuda 0.30.4."""
    missing = []
    for module_name, dotted in PRIVATE_NAMES:
        try:
            value: Any = importlib.import_module(module_name)
        except ImportError:
            missing.append(f"{module_name}:{dotted}")
            continue
        for part in dotted.split("."):
            value = getattr(value, part, None)
        if value is None:
            missing.append(f"{module_name}:{dotted}")
    return missing


# ----------------------------------------------------------------------------- cuda.core


def nvrtc_error() -> type[Exception]:
    """The exception ``cuda.core.Program.compile`` raises with NVRTC's log:
    ``cuda.core._utils.cuda_utils.NVRTCError`` (cuda.core exports no name for it).
    Tested: cuda-core 1.2.0 and 1.2.2."""
    from cuda.core._utils.cuda_utils import NVRTCError

    return NVRTCError


# ------------------------------------------------------------------- numba.cuda arrays


def strided_memory_view(array: Any, stream: Any) -> Any:
    """The strided memory view numba's launch reads a device array's pointer, layout and
    strides from: ``numba.cuda.cudadrv.devicearray._to_strided_memory_view`` (its first
    result). Tested: numba-cuda 0.30.4."""
    from numba.cuda.cudadrv.devicearray import _to_strided_memory_view

    view, _ = _to_strided_memory_view(array, stream=stream)
    return view


def half_precision_shim_sources() -> tuple[str, ...]:
    """The CUDA C++ that numba-cuda writes for its float16 and bfloat16 functions and
    links at launch: ``numba.cuda._internal.cuda_fp16.shim_stream`` and
    ``numba.cuda._internal.cuda_bf16.shim_stream``. Tested: numba-cuda 0.30.4."""
    sources = []
    for module in ("cuda_fp16", "cuda_bf16"):
        internal = importlib.import_module(f"numba.cuda._internal.{module}")
        sources.append(internal.shim_stream.getvalue())
    return tuple(sources)


# ------------------------------------------------------------- compiling without a GPU


@contextmanager
def device_compute_capability(cc: tuple[int, int], ask_driver: bool = True) -> Iterator[None]:
    """numba-cuda asks the driver for the current device's compute capability when it
    compiles a ``device=True`` function, which fails on a machine with no GPU. There, and
    only there, ``numba.cuda.dispatcher.get_current_device`` answers ``cc`` for the
    duration of the compile; ``ask_driver=False``: everywhere, without asking whether a
    GPU is there (the simulator's type check starts no CUDA driver). Tested: numba-cuda
    0.30.4."""
    from numba import cuda
    from numba.cuda import dispatcher

    if ask_driver and cuda.is_available():
        yield
        return
    original = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = original


# ----------------------------------------------------------------------------- typed IR


def compile_typed(py_func: Any, return_type: Any, args: tuple, cc: tuple[int, int]) -> Any:
    """numba's compile result for ``py_func`` typed with ``args``, whose
    ``type_annotation`` holds the typed IR: ``numba.cuda.compiler.compile_cuda`` (internal;
    ``cuda.compile_ptx`` returns no IR). Tested: numba-cuda 0.30.4."""
    from numba.cuda.compiler import compile_cuda

    return compile_cuda(py_func, return_type, args, cc=cc)


@functools.cache
def ir_modules() -> tuple:
    """The modules holding numba's IR classes (``Assign``, ``Expr``, ...): numba-cuda 0.30
    keeps its own copy, ``numba.cuda.core.ir``; older releases use ``numba.core.ir``.
    Tested: numba-cuda 0.30.4."""
    modules = []
    for name in ("numba.cuda.core.ir", "numba.core.ir"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:  # pragma: no cover - depends on the numba-cuda version
            pass
    return tuple(modules)


def loop_body_labels(blocks: dict) -> set:
    """The labels of IR blocks inside a loop, from numba's control-flow graph:
    ``numba.cuda.core.analysis.compute_cfg_from_blocks`` (``numba.core.analysis`` in
    older releases). Tested: numba-cuda 0.30.4."""
    try:
        from numba.cuda.core.analysis import compute_cfg_from_blocks
    except ImportError:  # pragma: no cover - older numba-cuda
        from numba.core.analysis import compute_cfg_from_blocks
    in_loop: set = set()
    for loop in compute_cfg_from_blocks(blocks).loops().values():
        in_loop |= set(loop.body)
    return in_loop


# ------------------------------------------------------------------ the on-disk cache


def directory_cache_class(directory: Path) -> type:
    """numba-cuda's ``CUDACache`` (what ``cuda.jit(cache=True)`` uses) with one locator:
    ``directory``, whose name is its source stamp (no mtime). Subclasses
    ``numba.cuda.core.caching._CacheLocator`` and sets ``CUDACacheImpl._locator_classes``
    and ``CUDACache._impl_class``. Tested: numba-cuda 0.30.4."""
    from numba.cuda.core.caching import _CacheLocator
    from numba.cuda.dispatcher import CUDACache, CUDACacheImpl

    class Locator(_CacheLocator):
        def __init__(self, py_func: Any, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno

        def get_cache_path(self) -> str:
            return str(directory)

        def get_source_stamp(self) -> Any:
            # The folder's name is the content key; mtime adds nothing and would make a
            # `touch` or a fresh checkout look stale.
            return directory.name

        def get_disambiguator(self) -> str:
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Locator:
            return cls(py_func, py_file)

    class Impl(CUDACacheImpl):
        _locator_classes = [Locator]

    class DirectoryCache(CUDACache):
        _impl_class = Impl

    return DirectoryCache


def reset_cache_index(cache: Any) -> None:
    """Empty a cache's index (after a damaged entry): ``cache._cache_file.flush()``.
    Tested: numba-cuda 0.30.4."""
    cache._cache_file.flush()


@contextmanager
def linked_files_left_out(data: Any) -> Iterator[None]:
    """While a compiled kernel is saved, its code library links only numba's NRT library
    when the cubin for this GPU is built: numba refuses to pickle a library that links
    other files (the float16/bfloat16 ``.cu`` shims). Rewrites ``_codelibrary.
    _linking_files`` (checking ``_cubin_cache``) and restores it after. Tested: numba-cuda
    0.30.4."""
    from numba.cuda.memory_management.nrt import NRT_LIBRARY

    library: Any = getattr(data, "_codelibrary", None)
    linked = getattr(library, "_linking_files", None)
    if linked and getattr(library, "_cubin_cache", None):
        library._linking_files = {f for f in linked if f == NRT_LIBRARY}
    try:
        yield
    finally:
        if linked:
            library._linking_files = linked


def set_disk_cache(dispatcher: Any, cache: Any | None) -> None:
    """Give ``dispatcher`` the disk cache ``cache``, or none (``None``): numba's public
    switch, ``enable_caching()``, picks the folder itself, so this sets
    ``dispatcher._cache`` (to ``numba.cuda.core.caching.NullCache()`` for none).
    Tested: numba-cuda 0.30.4."""
    if cache is None:
        from numba.cuda.core.caching import NullCache

        cache = NullCache()
    dispatcher._cache = cache


# --------------------------------------------------------------- the simulator switch


def switch_modules() -> SimpleNamespace:
    """The numba-cuda modules whose names portkit's simulator switch
    (simt/numba_switch.py) replaces while it is on, and numba's simulator's modules it
    takes the replacements from: ``cuda`` (numba.cuda), ``api`` (numba.cuda.api),
    ``devices`` and ``driver`` (numba.cuda.cudadrv), ``simulated_api``,
    ``simulated_driver`` and ``simulated_devicearray`` (numba.cuda.simulator's),
    ``Reduce`` (the simulator's host reduction) and ``testing`` (numba.cuda.testing,
    None where it cannot be imported: it needs filecheck, a test dependency).
    Tested: numba-cuda 0.30.4."""
    from numba import cuda
    from numba.cuda import api
    from numba.cuda.cudadrv import devices, driver
    from numba.cuda.simulator import api as simulated_api
    from numba.cuda.simulator.cudadrv import devicearray as simulated_devicearray
    from numba.cuda.simulator.cudadrv import driver as simulated_driver
    from numba.cuda.simulator.reduction import Reduce

    try:
        from numba.cuda import testing
    except ImportError:
        testing = None
    return SimpleNamespace(
        cuda=cuda,
        api=api,
        devices=devices,
        driver=driver,
        simulated_api=simulated_api,
        simulated_driver=simulated_driver,
        simulated_devicearray=simulated_devicearray,
        Reduce=Reduce,
        testing=testing,
    )


def set_cudasim_flag(on: Any) -> Any:
    """Set numba-cuda's ``config.ENABLE_CUDASIM`` (numba.cuda.core.config: what its test
    helpers and ``skip_on_cudasim`` ask) and return the value it had.
    Tested: numba-cuda 0.30.4."""
    # numba.cuda.random reads the flag at import: under it, its @jit host functions fall
    # back to object mode for numba's simulator's arrays, and create_xoroshiro128p_states
    # took 37 ms a state. portkit's simulator draws with its own (simt/xoroshiro.py), so
    # the host initialisation may stay compiled (nopython), as on a GPU.
    import numba.cuda.random  # noqa: F401
    from numba.cuda.core import config

    previous = config.ENABLE_CUDASIM
    config.ENABLE_CUDASIM = on
    return previous
