"""Compile a twin with NVRTC (through ``cuda.core``) and keep the cubin on disk.

The cache key covers everything that changes the binary: the ``.cu`` source and
every header in its folder and below, the compile options, the GPU architecture, the NVRTC
version and the name expressions. An edited twin therefore never gets a stale
binary, and a warm cache skips NVRTC entirely. Entries are written whole with a digest
manifest (portkit/cache_files.py): a truncated or altered cubin is rebuilt, never served.

NVRTC needs no GPU, so CI on a CPU-only machine compiles every twin for sm_90.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from portkit import cache_files
from portkit.backends.compiler_log import first_error_site
from portkit.backends.twin.source import display_name
from portkit.errors import DtypeError, TwinCompileError

CACHE_FORMAT = 2  # 2: symbols and digest in <cubin>.manifest.json
HEADER_SUFFIXES = (".cuh", ".h", ".hpp")
DEFAULT_ARCH = "sm_90"


@dataclass(frozen=True)
class CompiledTwin:
    path: Path
    arch: str
    cubin: bytes
    symbols: dict[str, str]  # name expression -> lowered (mangled) symbol
    cache_file: Path
    from_cache: bool


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


@cache
def cuda_include_dirs() -> tuple[str, ...]:
    """The CUDA toolkit headers (cuda_fp16.h, cuda_bf16.h), which NVRTC does not find by
    itself: the pip wheel's folder that cuda.pathfinder locates, or $CUDA_HOME/include."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
    except Exception:  # an older cuda-pathfinder, or no toolkit headers anywhere
        found = None
    return (found,) if found else ()


def compile_options(path: Path, arch: str) -> dict[str, object]:
    return {
        "arch": arch,
        "std": "c++17",
        "include_path": [str(path.parent), *cuda_include_dirs()],
        # Line info costs nothing at run time and lets compute-sanitizer and ncu name lines.
        "lineinfo": True,
    }


def cache_key(path: Path, arch: str, expressions: Sequence[str]) -> str:
    digest = hashlib.sha256()
    digest.update(f"portkit-twin-cache-{CACHE_FORMAT}\n".encode())
    digest.update(path.read_bytes())
    # Every header under the twin's folder, subfolders included: a twin may include
    # "inc/x.cuh", and an edit there must not be served a stale cubin.
    headers = sorted(p for p in path.parent.rglob("*") if p.suffix in HEADER_SUFFIXES)
    for header in headers:
        name = header.relative_to(path.parent).as_posix()
        digest.update(name.encode() + b"\0" + header.read_bytes())
    options = compile_options(path, arch)
    digest.update(json.dumps(options, sort_keys=True).encode())
    digest.update(nvrtc_version().encode())
    digest.update("\0".join(expressions).encode())
    return digest.hexdigest()


def compile_twin(
    path: Path, expressions: Sequence[str], cache_dir: Path, arch: str = DEFAULT_ARCH
) -> CompiledTwin:
    """The cubin for ``path``, from the cache when the key matches, else from NVRTC."""
    key = cache_key(path, arch, expressions)
    cubin_file = cache_dir / "twins" / f"{path.stem}-{arch}-{key[:24]}.cubin"
    entry = cache_files.load(cubin_file)  # a damaged entry is said, and rebuilt below
    if entry is not None and isinstance(entry[1].get("symbols"), dict):
        return CompiledTwin(path, arch, entry[0], entry[1]["symbols"], cubin_file, True)
    built = nvrtc_compile(path, expressions, arch)
    try:
        cache_files.store(cubin_file, built.cubin, {"symbols": built.symbols})
    except OSError as exc:  # a cache that cannot be written costs the next compile only
        cache_files.notice(f"could not keep {cubin_file} ({exc}); compiling it again next time")
    return CompiledTwin(path, arch, built.cubin, built.symbols, cubin_file, False)


@dataclass(frozen=True)
class NvrtcOutput:
    cubin: bytes
    symbols: dict[str, str]  # name expression -> lowered (mangled) symbol
    ptxas_log: str = ""  # with ``verbose``: registers and shared memory per kernel
    ptx: bytes = b""  # with ``ptx``: NUL-terminated, as the driver wants a PTX image


def nvrtc_compile(
    path: Path,
    expressions: Sequence[str],
    arch: str = DEFAULT_ARCH,
    *,
    verbose: bool = False,
    ptx: bool = False,
) -> NvrtcOutput:
    """The one NVRTC compile of a twin (the backend's cache, ``portkit export``'s
    cubins per arch, lint's resources): a cubin of every name expression, with
    ptxas's ``-v`` log and the program's PTX if asked. Its error: a template that fails
    for some of the op's types only is a DtypeError, anything else its log as a
    TwinCompileError, as is a twin that cannot be read or names no such kernel."""
    from cuda.core import Program, ProgramOptions

    from portkit.numba_internals import nvrtc_error

    try:
        source = path.read_text()
    except OSError as exc:
        raise TwinCompileError(f"twin {path} cannot be read: {exc}") from None
    extra = {"ptxas_options": ["-v"]} if verbose else {}
    options = ProgramOptions(name=display_name(path), **extra, **compile_options(path, arch))
    log = io.StringIO()
    program = Program(source, "c++", options)
    try:
        try:
            code = program.compile("cubin", name_expressions=tuple(expressions), logs=log)
        except nvrtc_error() as exc:
            text = str(exc).split("compilation log:", 1)[-1].strip("\x00 \n")
            instantiation = _instantiation_failure(text, expressions)
            if instantiation:
                raise DtypeError(f"twin {path}: {instantiation}") from None
            message = f"twin {path} does not compile for {arch}:\n{text}"
            raise TwinCompileError(message, first_error_site(text)) from None
        ptx_text = _program_ptx(program.handle) if ptx else b""
    finally:
        program.close()  # now: a program left to the collector warns from __dealloc__
    symbols = {expr: _text(sym) for expr, sym in code.symbol_mapping.items()}
    missing = sorted(set(expressions) - set(symbols))
    if missing:
        raise TwinCompileError(f"twin {path}: NVRTC found no kernel for {', '.join(missing)}")
    return NvrtcOutput(bytes(code.code), symbols, log.getvalue().replace("\0", ""), ptx_text)


def nvrtc_syntax_check(path: Path, arch: str = DEFAULT_ARCH) -> None:
    """Compile ``path`` instantiating nothing, for a twin whose kernel signatures portkit
    cannot read: NVRTC's error, if it has one, says what is wrong better than the reader."""
    nvrtc_compile(path, (), arch)


_INSTANTIATION = re.compile(
    r'detected during instantiation of "[^"]*?(?P<kernel>\w+)\([^"]*\) '
    r'\[with (?P<with>[^\]]*)\]"'
)
_FIRST_ERROR = re.compile(r"^(?P<where>\S+\(\d+\)): error: (?P<message>.*)$", re.M)


def _instantiation_failure(log: str, expressions: Sequence[str]) -> str | None:
    """One line for a template that compiles for some types and not for one: which
    kernel, with which types, where, and NVRTC's first complaint. None when a failing
    kernel fails for every type it is instantiated with: that is a bug to fix, not a
    dtype to drop, and NVRTC's log says it best."""
    failing: dict[str, set[str]] = {}
    for found in _INSTANTIATION.finditer(log):
        failing.setdefault(found["kernel"], set()).add(found["with"])
    instantiated = [e.split("<", 1)[0].strip() for e in expressions]
    if not failing or any(len(w) >= instantiated.count(k) for k, w in failing.items()):
        return None
    match = _INSTANTIATION.search(log)
    assert match is not None
    error = _FIRST_ERROR.search(log)
    detail = f" ({error['where']}: {error['message'].strip()})" if error else ""
    return (
        f"kernel {match['kernel']} cannot be instantiated with {match['with']}{detail}; "
        f"make the template work for that type or drop its dtype from the op's dtypes"
    )


def _text(symbol: str | bytes) -> str:
    return symbol.decode() if isinstance(symbol, bytes) else symbol


def _program_ptx(handle: Any) -> bytes:
    """The PTX an NVRTC program (``Program.handle``) kept after compiling to a cubin,
    NUL-terminated as the driver wants a PTX image. Read through cuda.bindings: cuda.core's
    ``compile("ptx")`` would ask for a driver, and this runs on machines without one."""
    from cuda.bindings import nvrtc

    result, size = nvrtc.nvrtcGetPTXSize(handle)
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise TwinCompileError(f"NVRTC kept no PTX: {result}")
    buffer = b" " * size
    (result,) = nvrtc.nvrtcGetPTX(handle, buffer)
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise TwinCompileError(f"NVRTC kept no PTX: {result}")
    return buffer
