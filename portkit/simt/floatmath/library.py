"""The simulator's math functions: portkit_math.h compiled once into a small library.

The CPU twin compiles the same header, so a function gives the same bits in both
(portkit_math.h states the rule). The library is built with the system C++ compiler and
cached under portkit's cache folder by a SHA-256 of the sources, the compiler and the
flags, as a digest-checked entry (portkit/cache_files.py). Without a compiler (or with
``PORTKIT_SIM_MATH=numpy``) NumPy computes each function in float64 and rounds once,
which can differ from the twin by an ULP.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from portkit import cache_files
from portkit.host_compiler import Compiler, find_compiler
from portkit.project.config import default_cache_dir
from portkit.project.environment import sim_math, tool_path

SOURCE_DIR = Path(__file__).resolve().parent
HEADER = SOURCE_DIR / "portkit_math.h"
VECTOR_SOURCE = SOURCE_DIR / "portkit_math_vector.cpp"
FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-ffp-contract=off")
_FORMAT = 1


def _listed(macro: str) -> tuple[str, ...]:
    """The function names of one X-macro list in portkit_math.h (the one list of them)."""
    text = HEADER.read_text()
    match = re.search(rf"#define {macro}\(X\)(.*?)(?<!\\)\n", text, re.S)
    assert match is not None, macro
    return tuple(re.findall(r"X\((\w+)\)", match.group(1)))


UNARY = _listed("PORTKIT_MATH_UNARY")
BINARY = _listed("PORTKIT_MATH_BINARY")
ARITY = {**dict.fromkeys(UNARY, 1), **dict.fromkeys(BINARY, 2), "fma": 3}


def _build(compiler: Compiler) -> Path:
    digest = hashlib.sha256(f"portkit-simt-math-{_FORMAT}\n".encode())
    for part in (HEADER.read_bytes(), VECTOR_SOURCE.read_bytes(), compiler.identity.encode()):
        digest.update(part + b"\0")
    digest.update("\0".join(FLAGS).encode())
    library = default_cache_dir() / "simt-math" / f"portkit-math-{digest.hexdigest()[:24]}.so"
    if cache_files.load(library) is not None:  # digest-checked: a damaged one is rebuilt
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent, prefix=cache_files.BUILD_PREFIX) as tmp:
        output = Path(tmp) / library.name
        command = [compiler.path, *FLAGS, f"-I{SOURCE_DIR}", str(VECTOR_SOURCE), "-o", str(output)]
        subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
        cache_files.store(library, output)
    return library


@cache
def loaded() -> ctypes.CDLL | None:
    """The compiled library, or None (and one line on stderr) where NumPy stands in.
    Loaded once per process, so ``PORTKIT_SIM_MATH`` is read here, once, through the
    environment table: a process cannot hold two math libraries for one simulator."""
    if sim_math() == "numpy":
        return None
    compiler = find_compiler(tool_path("CXX"))
    why = "no C++ compiler found"
    if compiler is not None:
        try:
            return ctypes.CDLL(str(_build(compiler)))
        except (OSError, subprocess.SubprocessError) as exc:
            why = f"portkit_math.h did not build ({type(exc).__name__})"
    print(
        f"portkit: {why}; the simulator's math functions run in NumPy (float64, rounded "
        "once) and may differ from twin-cpu by an ULP",
        file=sys.stderr,
    )
    return None


_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def compute(name: str, dtype: np.dtype, *args: npt.ArrayLike) -> np.ndarray:
    """``name`` (a C name: tanh, pow, tgamma...) of arrays, as ``dtype`` computes it.

    float16 is the float32 function rounded to float16, as portkit_half.h computes it."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        with np.errstate(over="ignore"):  # beyond float16's range: inf, as on the GPU
            return compute(name, np.dtype(np.float32), *args).astype(np.float16)
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    columns = [np.ascontiguousarray(np.broadcast_to(a, shape), dtype).ravel() for a in args]
    out = np.empty(columns[0].size, dtype)
    library = loaded()
    if library is None:
        with np.errstate(all="ignore"):
            wide = _numpy_function(name)(*(c.astype(np.float64) for c in columns))
        out[...] = np.asarray(wide).astype(dtype)
    else:
        function = getattr(library, f"portkit_v_{name}_{_SUFFIX[dtype]}")
        pointers = [c.ctypes.data_as(ctypes.c_void_p) for c in (*columns, out)]
        function(*pointers, ctypes.c_long(out.size))
    return out.reshape(shape)


# The NumPy stand-in: a ufunc where NumPy has one, else Python's math per element.
_UFUNCS = {
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
}  # fmt: skip
_PYTHON = {"erf": math.erf, "erfc": math.erfc, "lgamma": math.lgamma, "tgamma": math.gamma}


def _numpy_function(name: str) -> Callable[..., np.ndarray]:
    if name == "exp10":
        return lambda x: np.power(10.0, x)
    if name == "fdim":
        return lambda x, y: np.where(x > y, x - y, np.where(np.isnan(x - y), x - y, 0.0))
    if name == "fma":
        return lambda a, b, c: (np.longdouble(a) * np.longdouble(b) + np.longdouble(c)).astype(
            np.float64
        )
    if name == "remainder":
        return np.vectorize(math.remainder, otypes=[np.float64])
    if name in _PYTHON:
        return np.vectorize(_total(_PYTHON[name]), otypes=[np.float64])
    ufunc = getattr(np, _UFUNCS.get(name, name), None)
    if ufunc is None:
        raise NotImplementedError(f"{name} needs portkit's compiled math library")
    return ufunc


def _total(function: Callable[[float], float]) -> Callable[[float], float]:
    """Python's function with C's inf/NaN where Python raises."""

    def total(x: float) -> float:
        try:
            return function(x)
        except OverflowError:
            return math.inf
        except ValueError:
            return math.inf if function in (math.lgamma, math.gamma) and x == int(x) else math.nan

    return total
