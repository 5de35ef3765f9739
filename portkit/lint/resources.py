"""What one kernel will cost the GPU, read from the compilers on a machine with none.

For a numba prototype and for its C CUDA twin, compiled for sm_90, this module reports
registers, spills, shared and local memory (from ptxas's verbose log) and a static count
of the PTX instructions that usually explain a speed difference: float64 work, global
loads and stores by access width, and special-function / slow-path math. A table of two
``ResourceUsage`` rows says in advance why one side may be slower than the other.

Each side is measured along the path that really produces its GPU code:

* the twin as ``portkit.backends.twin.build`` builds it (``nvrtc_compile``): NVRTC
  straight to a cubin (whole-program ptxas), with ``-v`` added for ptxas; the PTX is the
  same NVRTC program's;
* the prototype as numba-cuda builds it at launch. With nvJitLink present numba
  compiles kernels with link-time optimisation (the dispatcher's ``lto`` option, on by
  default): LTO-IR from NVVM, linked by nvJitLink ``-lto`` (whole-program ptxas). Without
  ``lto`` it is ``cuda.compile_ptx``'s PTX, linked by nvJitLink as relocatable code; then
  the linker's final per-kernel line gives registers and stack (callees included), and
  shared arrays, which numba declares at module scope, are added from the PTX.

NVRTC, nvJitLink and NVVM need no GPU. ``twin_usages`` keeps its result beside the twin's
cubins when given the cache folder; the prototype's usage is kept by the lint cache
(lint/findings.py ``remembered_prototype_usages``). ``cuda.core``'s
``Linker`` and ``Program.compile("ptx")`` do ask the driver for a version, so nvJitLink is
called through ``cuda.bindings.nvjitlink`` and the twin's PTX is read from the NVRTC
program handle (``nvrtcGetPTX``) after ``Program.compile("cubin")``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from portkit import cache_files
from portkit.errors import PortkitError, TwinCompileError
from portkit.lint.ptx import (
    PtxModule,
    ResourceUsage,
    kernel_usage,
    parse_ptxas_log,
)


def prototype_usage(
    dispatcher: Any, signature: tuple[Any, ...], cc: tuple[int, int] = (9, 0)
) -> ResourceUsage:
    """The resources of numba kernel ``dispatcher`` compiled for ``signature`` (a tuple
    of numba types, as ``portkit.launch.trace.record_launches`` records them) and ``cc``.

    The kernel is compiled the way numba-cuda compiles it for a launch, with the
    dispatcher's own ``fastmath``, ``lineinfo``, ``debug``, ``opt``, ``launch_bounds`` and
    ``max_registers``: if its ``lto`` option is on (numba's default when nvJitLink is
    installed), ``numba.cuda.compile(..., output="ltoir")`` and nvJitLink ``-lto``, once
    with ``-ptx`` for the instruction counts and once with ``-verbose`` for the ptxas log;
    otherwise ``numba.cuda.compile_ptx`` and nvJitLink of that PTX with ``-verbose``.
    Raises ``PortkitError`` when numba or nvJitLink rejects the kernel.
    """
    from numba import cuda

    from portkit.numba_internals import device_compute_capability

    options = getattr(dispatcher, "targetoptions", {}) or {}
    py_func = getattr(dispatcher, "py_func", dispatcher)
    label = f"kernel {getattr(py_func, '__qualname__', py_func)}{_signature_text(signature)}"
    arch = f"sm_{cc[0]}{cc[1]}"
    lto = bool(options.get("lto", False))
    compile_options = {
        "debug": options.get("debug") or None,
        "lineinfo": bool(options.get("lineinfo", False)),
        "fastmath": bool(options.get("fastmath", False)),
        "opt": options.get("opt"),
        "launch_bounds": options.get("launch_bounds"),
    }
    try:
        with device_compute_capability(cc):
            if lto:
                code, _ = cuda.compile(
                    py_func,
                    signature,
                    device=False,
                    abi="numba",
                    output="ltoir",
                    cc=cc,
                    **compile_options,
                )
            else:
                code, _ = cuda.compile_ptx(py_func, signature, cc=cc, **compile_options)
    except Exception as exc:
        detail = "\n".join(str(exc).strip().splitlines()[:20])
        raise PortkitError(
            f"{label} does not compile for {arch}: {type(exc).__name__}: {detail}"
        ) from None

    link_options: dict[str, Any] = {
        "arch": arch,
        "max_register_count": options.get("max_registers") or None,
        "lineinfo": compile_options["lineinfo"] or None,
    }
    if lto:
        ltoir = bytes(code)
        shims = _half_precision_shims(signature, arch)
        _, linked = _nvjitlink(
            ltoir, "ltoir", label, shims, ptx=True, link_time_optimization=True, **link_options
        )
        assert linked is not None  # asked for with ptx=True
        ptx = linked
        log, _ = _nvjitlink(
            ltoir, "ltoir", label, shims, verbose=True, link_time_optimization=True, **link_options
        )
    else:
        ptx = code
        log, _ = _nvjitlink(ptx.encode(), "ptx", label, verbose=True, **link_options)

    module = PtxModule(ptx)
    entries = module.entries()
    if len(entries) != 1:
        raise PortkitError(f"{label}: expected one .entry in numba's PTX, found {entries}")
    entry = entries[0]
    props = parse_ptxas_log(log)
    if entry not in props:
        raise PortkitError(f"{label}: nvJitLink's log has no ptxas record for {entry}:\n{log}")
    # Relocatable PTX: ptxas cannot place module-scope .shared arrays, the linker does.
    extra_shared = 0 if lto else module.module_shared_bytes(entry)
    return kernel_usage(module, entry, props[entry], extra_shared)


def twin_usage(twin_path: str | Path, expression: str, arch: str = "sm_90") -> ResourceUsage:
    """The resources of the twin kernel ``expression`` of ``twin_path`` (an NVRTC name
    expression: ``"sigmoid_fwd<float>"``, or ``"plain_kernel"`` for an ``extern "C"`` or
    non-template kernel), compiled for ``arch``: ``twin_usages`` of that one."""
    return twin_usages(twin_path, (expression,), arch)[expression]


def twin_usages(
    twin_path: str | Path,
    expressions: Sequence[str],
    arch: str = "sm_90",
    cache_dir: Path | None = None,
) -> dict[str, ResourceUsage]:
    """The resources of each twin kernel of ``expressions``, from one NVRTC compile
    (``portkit.backends.twin.build.nvrtc_compile`` with ptxas's ``-v``) to a cubin, as the
    twin backend compiles it: ptxas's log gives registers, spills, shared and local memory
    of each kernel's lowered name; the program's PTX, sliced to that kernel's ``.entry``
    body and its callees, gives the instruction counts.
    Raises ``TwinCompileError`` with NVRTC's log when the twin does not compile.
    With ``cache_dir``, kept under ``twins/`` beside the cubins, keyed as a cubin is (the
    source, its headers, the options, NVRTC's version, the names) and by portkit's own
    source (the readers of the log and the PTX).
    """
    path, wanted = Path(twin_path), tuple(dict.fromkeys(expressions))
    entry = _twin_usage_entry(path, wanted, arch, cache_dir) if cache_dir else None
    stored = cache_files.load(entry) if entry is not None else None
    if stored is not None:
        try:
            rows = json.loads(stored[0])
            return {e: ResourceUsage.from_json(rows[e]) for e in wanted}
        except (ValueError, TypeError, KeyError, AttributeError):
            pass  # a damaged entry: computed and written again below
    usages = _compiled_twin_usages(path, wanted, arch)
    if entry is not None:
        try:
            cache_files.store(entry, json.dumps({e: u.to_json() for e, u in usages.items()}))
        except OSError:  # a cache that cannot be written costs the next lint only
            pass
    return usages


def _twin_usage_entry(path: Path, expressions: Sequence[str], arch: str, cache_dir: Path) -> Path:
    from portkit.backends.twin.build import cache_key

    key = hashlib.sha256(
        f"resources-1 {cache_key(path, arch, expressions)} {cache_files.package_digest()}".encode()
    ).hexdigest()
    return cache_dir / "twins" / f"{path.stem}-{arch}-{key[:24]}.resources.json"


def _compiled_twin_usages(
    path: Path, wanted: tuple[str, ...], arch: str
) -> dict[str, ResourceUsage]:
    from portkit.backends.twin.build import nvrtc_compile

    built = nvrtc_compile(path, wanted, arch, verbose=True, ptx=True)
    module = PtxModule(built.ptx.rstrip(b"\0").decode())
    props = parse_ptxas_log(built.ptxas_log)
    usages = {}
    for expression in wanted:
        entry = built.symbols[expression]
        if entry not in props:
            raise TwinCompileError(
                f"twin {path}: {expression} ({entry}) is not a kernel, or ptxas's log does "
                f"not describe it:\n{built.ptxas_log}"
            )
        usages[expression] = kernel_usage(module, entry, props[entry], 0)
    return usages


# ----------------------------------------------------------------------------- compilers


def _half_precision_shims(signature: tuple, arch: str) -> tuple[bytes, ...]:
    """LTO-IR of numba-cuda's float16/bfloat16 shims, for a kernel that uses those types.

    numba-cuda implements ``numba.cuda.bf16`` and ``fp16`` operations (a store of a float
    into a bfloat16 array included) as calls into CUDA C++ wrappers that it writes to a
    source stream and links at launch; ``cuda.compile(output="ltoir")`` returns the kernel
    alone, whose link then fails on an unresolved ``__nv_bfloat16`` function. Compiling
    the stream with NVRTC, as numba does, and linking it along gives the launched code."""
    text = " ".join(str(t) for t in signature)
    if "float16" not in text and "bfloat16" not in text:
        return ()
    from portkit.numba_internals import half_precision_shim_sources

    return tuple(_shim_ltoir(source, arch) for source in half_precision_shim_sources())


@functools.cache
def _shim_ltoir(source: str, arch: str) -> bytes:
    from cuda.core import Program, ProgramOptions

    from portkit.backends.twin.build import cuda_include_dirs

    options = ProgramOptions(
        arch=arch, link_time_optimization=True, include_path=list(cuda_include_dirs())
    )
    return bytes(Program(source, "c++", options).compile("ltoir").code)


def _nvjitlink(
    data: bytes, kind: str, label: str, extra_ltoir: tuple[bytes, ...] = (), **options: Any
) -> tuple[str, str | None]:
    """Link one PTX or LTO-IR input (and ``extra_ltoir``) with nvJitLink; (info log,
    linked PTX if ``ptx=True``)."""
    from cuda.bindings import nvjitlink
    from cuda.core import LinkerOptions

    flags = [o.decode() for o in LinkerOptions(**options).as_bytes("nvjitlink")]
    input_type = nvjitlink.InputType.LTOIR if kind == "ltoir" else nvjitlink.InputType.PTX
    handle = nvjitlink.create(len(flags), flags)
    try:
        try:
            nvjitlink.add_data(handle, input_type, data, len(data), f"{kind}-input")
            for index, blob in enumerate(extra_ltoir):
                ltoir = nvjitlink.InputType.LTOIR
                nvjitlink.add_data(handle, ltoir, blob, len(blob), f"shim-{index}")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            error_log = _nvjitlink_log(handle, error=True)
            raise PortkitError(
                f"{label}: nvJitLink failed ({' '.join(flags)}): {exc}\n{error_log}"
            ) from None
        linked_ptx = None
        if options.get("ptx"):
            size = nvjitlink.get_linked_ptx_size(handle)
            buffer = bytearray(size)
            nvjitlink.get_linked_ptx(handle, buffer)
            linked_ptx = bytes(buffer).rstrip(b"\0").decode()
        return _nvjitlink_log(handle, error=False), linked_ptx
    finally:
        nvjitlink.destroy(handle)


def _nvjitlink_log(handle: int, *, error: bool) -> str:
    from cuda.bindings import nvjitlink

    size_of, read = (
        (nvjitlink.get_error_log_size, nvjitlink.get_error_log)
        if error
        else (nvjitlink.get_info_log_size, nvjitlink.get_info_log)
    )
    size = size_of(handle)
    if not size:
        return ""
    buffer = bytearray(size)
    read(handle, buffer)
    return bytes(buffer).rstrip(b"\0").decode(errors="replace")


def _signature_text(signature: Any) -> str:
    try:
        return "(" + ", ".join(str(t) for t in signature) + ")"
    except TypeError:
        return f"({signature})"
