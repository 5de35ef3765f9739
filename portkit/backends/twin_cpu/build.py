"""Compile a twin for the host CPU with the system C++ compiler, and cache the library.

The twin's ``.cu`` is compiled unmodified except for one rewrite: ``extern __shared__ T
name[];`` (dynamic shared memory, which no macro can express on a CPU) becomes a pointer
to the launch's dynamic shared buffer, on the same line. A ``#line`` directive keeps the
twin's own file and line numbers in compiler errors and sanitizer reports. After the
source come generated ``extern "C"`` launchers, one per template instantiation, named
``portkit_launch_<i>`` in the order of the name expressions (the same expressions the
GPU twin hands NVRTC, so the same instantiations exist on both).

The cache key is the one idea of the GPU cubin cache (``twin/build.py``): a SHA-256 of
everything that changes the binary, here the generated translation unit (source, display
path, expressions), every header beside the twin and in portkit's include folder, the
compiler's identity and the flags. Libraries are built in a temporary folder and moved
into place with a digest manifest (portkit/cache_files.py), written last: a truncated
library is rebuilt, never loaded.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from portkit import cache_files, host_compiler
from portkit.backends.compiler_log import first_error_site
from portkit.backends.twin.source import display_name
from portkit.backends.twin_cpu import uninit
from portkit.errors import TwinCompileError
from portkit.host_compiler import Compiler
from portkit.project.environment import tool_path
from portkit.simt.floatmath import SOURCE_DIR as MATH_DIR

# 3: symbols and digest in <library>.manifest.json; 4: shared math header; 5: the two
# check builds (pattern/zero locals, uninit.py) and their warnings in the manifest
CACHE_FORMAT = 5
INCLUDE_DIR = Path(__file__).resolve().parent / "include"
HEADER_SUFFIXES = (".cuh", ".h", ".hpp")
# -ffp-contract=off: no fused multiply-add, as the simulated prototype computes (a GPU
# build contracts a*b+c; that difference is within the twin tolerance, see docs/twin-cpu.md).
COMMON_FLAGS = (
    "-std=c++17",
    "-fPIC",
    "-shared",
    "-g",
    "-fvisibility=hidden",
    "-ffp-contract=off",
    "-w",
)
MODE_FLAGS = {
    "plain": ("-O2",),
    # check: AddressSanitizer and UndefinedBehaviorSanitizer, stopping at the first report.
    "check": (
        "-O1",
        "-fno-omit-frame-pointer",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=undefined",
    ),
}
MODE_FLAGS[uninit.ZERO] = MODE_FLAGS["check"]  # the same build but for its locals (uninit.py)
# Without an ASan runtime to preload (a compiler shipped without it), checks keep UBSan.
CHECK_WITHOUT_ASAN = (
    "-O1",
    "-fno-omit-frame-pointer",
    "-fsanitize=undefined",
    "-fno-sanitize-recover=undefined",
)
_EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?P<attrs>(?:(?:__align__|alignas)\s*\(\s*\w+\s*\)\s*)*)"
    r"(?P<type>[\w:<>\s]+?)\s+(?P<name>\w+)\s*\[\s*\]\s*;"
)


def find_compiler() -> Compiler | None:
    """The system C++ compiler: $CXX (through the environment table), else g++, clang++
    or c++ on the PATH."""
    return host_compiler.find_compiler(tool_path("CXX"))


@dataclass(frozen=True)
class CpuLibrary:
    path: Path
    symbols: dict[str, str]  # name expression -> exported launcher
    from_cache: bool
    # The compiler's uninitialised-use warnings on the twin's lines (check modes only).
    warnings: tuple[str, ...] = ()


def compiler_unavailable_reason() -> str | None:
    if sys.platform != "linux":
        return f"twin-cpu needs Linux (ELF sections, LD_PRELOAD); this is {sys.platform}"
    return (
        None
        if find_compiler()
        else (
            "no C++ compiler found (set $CXX, or install g++: `apt-get install g++`, "
            "`dnf install gcc-c++`, `apk add g++`)"
        )
    )


@cache
def asan_runtime() -> str | None:
    """The AddressSanitizer runtime to preload into the check worker, or None."""
    compiler = find_compiler()
    if compiler is None:
        return None
    for name in ("libasan.so", "libclang_rt.asan-x86_64.so", "libclang_rt.asan.so"):
        try:
            found = subprocess.run(
                [compiler.path, f"-print-file-name={name}"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if found and os.path.isabs(found) and os.path.exists(found):
            return os.path.realpath(found)
    # clang keeps its runtimes in its own folder, which -print-file-name does not search.
    try:
        folder = subprocess.run(
            [compiler.path, "-print-runtime-dir"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    for name in ("libclang_rt.asan.so", "libclang_rt.asan-x86_64.so"):
        if folder and os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


def rewrite_dynamic_shared(source: str) -> str:
    """``extern __shared__ T s[];`` -> ``T* const s = (T*)dynamic_shared();`` and
    ``static __shared__`` -> ``__shared__``, keeping lines."""

    def replace(match: re.Match[str]) -> str:
        ctype, name = " ".join(match["type"].split()), match["name"]
        text = (
            f"{ctype}* const {name} = reinterpret_cast<{ctype}*>(::portkit_cpu::dynamic_shared());"
        )
        return text + "\n" * match.group(0).count("\n")

    # `static __shared__` would read `static static` once __shared__ expands.
    return _EXTERN_SHARED.sub(
        replace, re.sub(r"\bstatic(\s+)__shared__\b", r"\1__shared__", source)
    )


_STATIC_SHARED = re.compile(r"\b__shared__\b(?P<declarators>[^;{}]*);")


def register_static_shared(source: str) -> str:
    """Append ``PORTKIT_SHARED_REGISTER(name)`` after each ``__shared__`` declaration, on
    its line, for every declarator (``__shared__ double a[4], b[4];``): GCC drops the
    section attribute of a static local in a template, and the runtime must find every
    shared variable to poison it (portkit_cuda_cpu.h)."""

    def register(match: re.Match[str]) -> str:
        text = re.sub(r"\[[^\]]*\]|\([^)]*\)", "", match["declarators"])
        names = [re.findall(r"\w+", part)[-1] for part in text.split(",") if re.search(r"\w", part)]
        return match.group(0) + "".join(f" PORTKIT_SHARED_REGISTER({n})" for n in names)

    return _STATIC_SHARED.sub(register, source)


def translation_unit(path: Path, expressions: Sequence[str]) -> str:
    display = display_name(path).replace("\\", "\\\\").replace('"', '\\"')
    parts = [
        '#include "portkit_cuda_cpu.h"',
        f'#line 1 "{display}"',
        register_static_shared(rewrite_dynamic_shared(path.read_text())),
        '#line 1 "portkit-cpu-launchers"',
    ]
    parts.append(
        'extern "C" __attribute__((visibility("default"))) void portkit_float_atomic_span('
        "unsigned long long* low, unsigned long long* high) "
        "{ *low = ::portkit_cpu::g_float_atomic_low; *high = ::portkit_cpu::g_float_atomic_high; }"
    )
    for i, expression in enumerate(expressions):
        thunk = f"portkit_thunk_{i}"
        parts.append(
            f"static void {thunk}(void** a) {{ ::portkit_cpu::call(&{expression}, a); }}\n"
            f'extern "C" __attribute__((visibility("default"))) int portkit_launch_{i}('
            f"const unsigned* g, const unsigned* b, size_t s, void** a, int f, char* e, size_t n) "
            f'{{ return ::portkit_cpu::launch({thunk}, "{expression}", a, g, b, s, f, e, n); }}'
        )
    return "\n".join(parts) + "\n"


def _headers(folder: Path) -> list[tuple[str, bytes]]:
    found = sorted(p for p in folder.rglob("*") if p.suffix in HEADER_SUFFIXES)
    return [(p.relative_to(folder).as_posix(), p.read_bytes()) for p in found]


def flags(mode: str, path: Path) -> list[str]:
    """The compiler flags of ``mode``: "plain", or "check"/"check-zero" (sanitizers, and
    locals initialised to a pattern or to zero where the compiler can: uninit.py)."""
    if mode == "plain":
        return [*COMMON_FLAGS, *MODE_FLAGS[mode], *_includes(path)]
    compiler = find_compiler()
    checked = MODE_FLAGS[mode] if asan_runtime() else CHECK_WITHOUT_ASAN
    extra = uninit.mode_flags(mode, compiler) if compiler is not None else ()
    common = [f for f in COMMON_FLAGS if f != "-w"]  # the uninitialised warnings are read
    return [*common, *checked, *extra, *_includes(path)]


def _includes(path: Path) -> list[str]:
    return [f"-I{INCLUDE_DIR}", f"-I{MATH_DIR}", f"-I{path.parent}"]


def cache_key(unit: str, path: Path, mode: str, compiler: Compiler) -> str:
    digest = hashlib.sha256(f"portkit-twin-cpu-{CACHE_FORMAT}\n".encode())
    digest.update(unit.encode())
    for folder in (path.parent, INCLUDE_DIR, MATH_DIR):
        for name, data in _headers(folder):
            digest.update(name.encode() + b"\0" + data)
    digest.update(compiler.identity.encode())
    digest.update("\0".join(flags(mode, path)).encode())
    return digest.hexdigest()


def compile_twin_cpu(
    path: Path, expressions: Sequence[str], cache_dir: Path, mode: str
) -> CpuLibrary:
    """The host library of the twin at ``path`` in ``mode`` ("plain", "check" or
    "check-zero")."""
    compiler = find_compiler()
    if compiler is None:
        raise TwinCompileError(compiler_unavailable_reason() or "no C++ compiler")
    unit = translation_unit(path, expressions)
    key = cache_key(unit, path, mode, compiler)
    folder = cache_files.usable_subfolder(cache_dir / "twins-cpu")  # else one line, no cache
    library = folder / f"{path.stem}-{mode}-{key[:24]}.so"
    symbols = {expr: f"portkit_launch_{i}" for i, expr in enumerate(expressions)}
    entry = cache_files.load(library)  # a truncated library is said and rebuilt
    if entry is not None and entry[1].get("symbols") == symbols:
        return CpuLibrary(library, symbols, True, tuple(entry[1].get("warnings", ())))
    library.parent.mkdir(parents=True, exist_ok=True)
    cache_files.sweep_stale(library.parent)  # build folders of killed runs
    with tempfile.TemporaryDirectory(dir=library.parent, prefix=cache_files.BUILD_PREFIX) as tmp:
        source = Path(tmp) / f"{path.stem}.cpp"
        source.write_text(unit)
        output = Path(tmp) / library.name
        log = _compile(compiler, [*flags(mode, path), str(source), "-o", str(output)], path)
        warnings = uninit.warnings_in(log) if mode != "plain" else []
        cache_files.store(library, output, {"symbols": symbols, "warnings": warnings})
    return CpuLibrary(library, symbols, False, tuple(warnings))


def _compile(compiler: Compiler, arguments: Sequence[str], path: Path) -> str:
    """Compile; the compiler's log (its warnings), or TwinCompileError with its errors."""
    proc = subprocess.run([compiler.path, *arguments], capture_output=True, text=True)
    if proc.returncode != 0:
        errors = uninit.without_warnings(proc.stderr.strip())
        log = "\n".join(errors.splitlines()[:40])
        undeclared = not_in_nvrtc(proc.stderr)
        if undeclared:
            raise TwinCompileError(f"twin {undeclared}")
        message = f"twin {path} does not compile for the CPU:\n{log}"
        raise TwinCompileError(message, first_error_site(log))
    return proc.stderr


def cpu_syntax_check(path: Path) -> None:
    """Compile ``path`` instantiating nothing (``-fsyntax-only``), for a twin whose kernel
    signatures portkit cannot read: the compiler's error, if any, says what is wrong."""
    compiler = find_compiler()
    if compiler is None:
        return
    with tempfile.TemporaryDirectory(prefix="portkit-syntax-") as tmp:
        source = Path(tmp) / f"{path.stem}.cpp"
        source.write_text(translation_unit(path, ()))
        _compile(compiler, [*flags("plain", path), "-fsyntax-only", str(source)], path)


_POISONED = re.compile(
    r'^(?P<where>[^\s:]+:\d+):\d+: error: attempt to use poisoned "(?P<name>\w+)"', re.M
)
# What to write instead of a name NVRTC does not declare (portkit_cuda_cpu.h poisons them).
_INSTEAD = {
    "INFINITY": "CUDART_INF_F from <math_constants.h>, or __int_as_float(0x7f800000)",
    "HUGE_VALF": "CUDART_INF_F from <math_constants.h>",
    "HUGE_VAL": "CUDART_INF from <math_constants.h>",
    "NAN": "CUDART_NAN_F from <math_constants.h>",
    "FLT_MAX": "CUDART_MAX_NORMAL_F from <math_constants.h>, or 3.402823466e+38f",
    "std": "CUDA's own names without std:: (tanhf, isnan, min, max...)",
}


def not_in_nvrtc(log: str) -> str | None:
    """``file:line: NAME is ...`` for the first name NVRTC would not know, or None."""
    match = _POISONED.search(log)
    if match is None:
        return None
    name = match["name"]
    if name in _INSTEAD:
        instead = _INSTEAD[name]
    elif name.startswith("M_"):
        instead = "the CUDART_ constant from <math_constants.h> (CUDART_PI_F...) or a literal"
    elif name.endswith("_t"):
        instead = "int, unsigned, long long or unsigned long long"
    else:
        instead = "a function CUDA declares for device code (printf, malloc, memcpy...)"
    where = name + "::" if name == "std" else name
    return (
        f"{match['where']}: {where} is not declared by NVRTC, which compiles the twin for "
        f"the GPU; write {instead}"
    )
