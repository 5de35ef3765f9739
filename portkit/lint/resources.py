"""What one kernel will cost the GPU, read from the compilers on a machine with none.

For a numba prototype and for its C CUDA twin, compiled for sm_90, this module reports
registers, spills, shared and local memory (from ptxas's verbose log) and a static count
of the PTX instructions that usually explain a speed difference: float64 work, global
loads and stores by access width, and special-function / slow-path math. A table of two
``ResourceUsage`` rows says in advance why one side may be slower than the other.

Each side is measured along the path that really produces its GPU code:

* the twin as ``portkit.backends.twin.build`` builds it: NVRTC, the options of
  ``twin_build.compile_options``, straight to a cubin (whole-program ptxas), with
  ``-v`` added for ptxas; the PTX is the same NVRTC program's;
* the prototype as numba-cuda builds it at launch. With nvJitLink present numba
  compiles kernels with link-time optimisation (the dispatcher's ``lto`` option, on by
  default): LTO-IR from NVVM, linked by nvJitLink ``-lto`` (whole-program ptxas). Without
  ``lto`` it is ``cuda.compile_ptx``'s PTX, linked by nvJitLink as relocatable code; then
  the linker's final per-kernel line gives registers and stack (callees included), and
  shared arrays, which numba declares at module scope, are added from the PTX.

NVRTC, nvJitLink and NVVM need no GPU, and nothing is cached on disk. ``cuda.core``'s
``Linker`` and ``Program.compile("ptx")`` do ask the driver for a version, so nvJitLink is
called through ``cuda.bindings.nvjitlink`` and the twin's PTX is read from the NVRTC
program handle (``nvrtcGetPTX``) after ``Program.compile("cubin")``.
"""

from __future__ import annotations

import functools
import io
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portkit.errors import PortkitError, TwinCompileError


@dataclass(frozen=True)
class ResourceUsage:
    """Resources of one kernel, compiled for one GPU architecture.

    ``registers``, ``spill_store_bytes``, ``spill_load_bytes``, ``shared_bytes`` and
    ``local_bytes`` come from ptxas's verbose log. ``registers`` is per thread and counts
    the registers of functions the kernel calls (ptxas's ``Used N registers`` in
    whole-program mode, the linker's ``used N registers`` otherwise). ``shared_bytes`` is
    the static ``__shared__`` / ``cuda.shared.array`` memory per block, without the 1 KiB
    per block that the driver reserves on sm_80 and later, and without dynamic shared
    memory. ``local_bytes`` is the per-thread stack frame (local arrays, spills, call
    frames), callees included where the log says so.

    The other fields are static counts over the kernel's PTX: the ``.entry`` body plus the
    body of every ``.func`` it calls, directly or not (each counted once, whatever the
    number of call sites; a loop body counts once too).

    ``f64_instructions`` counts instructions that make the float64 units work: arithmetic
    (add, sub, mul, fma, mad, div, rcp, sqrt, rsqrt, neg, abs, min, max, ...),
    comparisons (setp, set, testp) and conversions with ``.f64`` as source or destination
    type (``cvt.f64.f32``, ``cvt.rn.f32.f64``, ...). Moves, selects, loads, stores and
    atomics of float64 values (``mov.f64``, ``selp.f64``, ``ld.shared.f64``) are not counted.

    ``global_loads`` / ``global_stores`` map the access width in bytes (vector length times
    element size: ``ld.global.v4.f32`` is 16) to the number of ``ld.global*`` (including
    ``ld.global.nc`` and ``ldu.global``) / ``st.global*`` instructions. Generic-address
    accesses (``ld.f32`` without a state space) and atomics are not counted.

    ``special_functions`` counts, by opcode without ``.ftz``/``.sat``: the approximate
    transcendental ops that run on the special function unit (``ex2.approx.f32``,
    ``lg2.approx.f32``, ``sin.approx.f32``, ``cos.approx.f32``, ``tanh.approx.f32``) and
    floating-point ``rcp``, ``sqrt``, ``rsqrt`` and ``div`` in any rounding mode
    (``rcp.approx.f32``, ``div.rn.f32``, ``div.rn.f64``, ``rcp.rn.f64``, ``sqrt.rn.f32``,
    ...; the IEEE-rounded ones are an SFU seed plus Newton steps, in float64 a called
    slow path); and, under their own names (``__nv_expf``), calls to libdevice functions
    that were not inlined. Ops the kernel lacks are absent, not 0. Integer div/rem are
    not counted.
    """

    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int
    local_bytes: int
    f64_instructions: int
    global_loads: dict[int, int] = field(default_factory=dict)
    global_stores: dict[int, int] = field(default_factory=dict)
    special_functions: dict[str, int] = field(default_factory=dict)


def prototype_usage(dispatcher, signature: tuple, cc: tuple[int, int] = (9, 0)) -> ResourceUsage:
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

    from portkit.lint.compile import device_compute_capability

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

    link_options = {
        "arch": arch,
        "max_register_count": options.get("max_registers") or None,
        "lineinfo": compile_options["lineinfo"] or None,
    }
    if lto:
        ltoir = bytes(code)
        shims = _half_precision_shims(signature, arch)
        _, ptx = _nvjitlink(
            ltoir, "ltoir", label, shims, ptx=True, link_time_optimization=True, **link_options
        )
        log, _ = _nvjitlink(
            ltoir, "ltoir", label, shims, verbose=True, link_time_optimization=True, **link_options
        )
    else:
        ptx = code
        log, _ = _nvjitlink(ptx.encode(), "ptx", label, verbose=True, **link_options)

    module = _PtxModule(ptx)
    entries = module.entries()
    if len(entries) != 1:
        raise PortkitError(f"{label}: expected one .entry in numba's PTX, found {entries}")
    entry = entries[0]
    props = _parse_ptxas_log(log)
    if entry not in props:
        raise PortkitError(f"{label}: nvJitLink's log has no ptxas record for {entry}:\n{log}")
    # Relocatable PTX: ptxas cannot place module-scope .shared arrays, the linker does.
    extra_shared = 0 if lto else module.module_shared_bytes(entry)
    return _usage(module, entry, props[entry], extra_shared)


def twin_usage(twin_path, expression: str, arch: str = "sm_90") -> ResourceUsage:
    """The resources of the twin kernel ``expression`` of ``twin_path`` (an NVRTC name
    expression: ``"sigmoid_fwd<float>"``, or ``"plain_kernel"`` for an ``extern "C"`` or
    non-template kernel), compiled for ``arch``.

    One NVRTC compile (``cuda.core.Program`` with ``name_expressions``, the options of
    ``portkit.backends.twin.build.compile_options`` plus ``ptxas_options=["-v"]``) to a cubin, as
    ``twin_build`` compiles it: ptxas's log gives registers, spills, shared and local
    memory of the kernel's lowered name; the program's PTX, sliced to that kernel's
    ``.entry`` body and its callees, gives the instruction counts.
    Raises ``TwinCompileError`` with NVRTC's log when the twin does not compile.
    """
    from cuda.core import Program, ProgramOptions
    from cuda.core._utils.cuda_utils import NVRTCError

    from portkit.backends.twin.build import _display_name, compile_options

    path = Path(twin_path)
    try:
        source = path.read_text()
    except OSError as exc:
        raise TwinCompileError(f"twin {path} cannot be read: {exc}") from None
    options = ProgramOptions(
        name=_display_name(path), ptxas_options=["-v"], **compile_options(path, arch)
    )
    log = io.StringIO()
    program = Program(source, "c++", options)
    try:
        try:
            code = program.compile("cubin", name_expressions=(expression,), logs=log)
        except NVRTCError as exc:
            text = str(exc).split("compilation log:", 1)[-1].strip()
            raise TwinCompileError(
                f"twin {path}: {expression} does not compile for {arch}:\n{text}"
            ) from None
        symbol = code.symbol_mapping.get(expression)
        if symbol is None:
            raise TwinCompileError(f"twin {path}: NVRTC found no kernel for {expression}")
        ptx = _nvrtc_ptx(program.handle)
    finally:
        program.close()
    entry = symbol.decode() if isinstance(symbol, bytes) else str(symbol)
    ptxas_log = log.getvalue().replace("\0", "")
    props = _parse_ptxas_log(ptxas_log)
    if entry not in props:
        raise TwinCompileError(
            f"twin {path}: {expression} ({entry}) is not a kernel, or ptxas's log does not "
            f"describe it:\n{ptxas_log}"
        )
    return _usage(_PtxModule(ptx), entry, props[entry], 0)


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
    import importlib

    shims = []
    for module in ("cuda_fp16", "cuda_bf16"):
        internal = importlib.import_module(f"numba.cuda._internal.{module}")
        shims.append(_shim_ltoir(internal.shim_stream.getvalue(), arch))
    return tuple(shims)


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


def _nvrtc_ptx(handle) -> str:
    from cuda.bindings import nvrtc

    result, size = nvrtc.nvrtcGetPTXSize(handle)
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise TwinCompileError(f"NVRTC kept no PTX: {result}")
    buffer = b" " * size
    (result,) = nvrtc.nvrtcGetPTX(handle, buffer)
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise TwinCompileError(f"NVRTC kept no PTX: {result}")
    return buffer.rstrip(b"\0").decode()


def _signature_text(signature: Any) -> str:
    try:
        return "(" + ", ".join(str(t) for t in signature) + ")"
    except TypeError:
        return f"({signature})"


# ----------------------------------------------------------------------- ptxas's log

# ptxas, one block per function (whole-program and relocatable mode alike):
#   ptxas info    : Function properties for _Z11softmax_fwdIfEvPKT_PS0_x
#   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
#   ptxas info    : Used 47 registers, used 1 barriers, 1024 bytes smem
# nvJitLink's own summary after a relocatable link, callees included:
#   info    : Function properties for '_ZN...softmax_fwd...':
#   info    : used 54 registers, used 1 barriers, 0 stack, 2048 bytes smem, ..., 0 bytes lmem
_PROPERTIES = re.compile(r"Function properties for '?([^\s']+?)'?:?\s*$")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"\bUsed (\d+) registers")
_LINK_USED = re.compile(r"\bused (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CUMULATIVE = re.compile(r"(\d+) bytes cumulative stack size")
_LINK_STACK = re.compile(r"(\d+) stack\b")
_LMEM = re.compile(r"(\d+) bytes lmem")


@dataclass
class _Properties:
    registers: int | None = None
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared: int = 0
    cumulative_stack: int = 0
    # From the linker's summary of a relocatable link, when there is one.
    linked_registers: int | None = None
    linked_stack: int | None = None
    linked_lmem: int = 0

    @property
    def final_registers(self) -> int:
        registers = self.linked_registers if self.linked_registers is not None else self.registers
        return registers or 0

    @property
    def local_bytes(self) -> int:
        if self.linked_stack is not None:
            return self.linked_stack + self.linked_lmem
        return max(self.stack_frame, self.cumulative_stack)


def _parse_ptxas_log(log: str) -> dict[str, _Properties]:
    """Per function name, what ptxas (and nvJitLink's final summary) say about it."""
    props: dict[str, _Properties] = {}
    current: _Properties | None = None
    from_linker = False
    for line in log.splitlines():
        if "Compiling entry function" in line:
            current = None
            continue
        match = _PROPERTIES.search(line)
        if match:
            current = props.setdefault(match[1], _Properties())
            from_linker = not line.lstrip().startswith("ptxas")
            continue
        if current is None:
            continue
        if from_linker:
            used = _LINK_USED.search(line)
            if used:
                current.linked_registers = int(used[1])
                current.linked_stack = _first_int(_LINK_STACK, line)
                current.linked_lmem = _first_int(_LMEM, line)
                current = None
            continue
        frame = _FRAME.search(line)
        if frame:
            current.stack_frame, current.spill_stores, current.spill_loads = map(
                int, frame.groups()
            )
            continue
        used = _PTXAS_USED.search(line)
        if used:
            current.registers = int(used[1])
            current.shared = _first_int(_SMEM, line)
            current.cumulative_stack = _first_int(_CUMULATIVE, line)
            current = None
    return props


def _first_int(pattern: re.Pattern[str], text: str) -> int:
    """The pattern's first group as an int; 0 where the log line leaves it out."""
    match = pattern.search(text)
    return int(match[1]) if match else 0


# ------------------------------------------------------------------------------ PTX

_TYPE_BYTES = {
    "b8": 1, "s8": 1, "u8": 1,
    "b16": 2, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "b32": 4, "s32": 4, "u32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "tf32": 4,
    "b64": 8, "s64": 8, "u64": 8, "f64": 8,
    "b128": 16,
}  # fmt: skip
_FLOAT_TYPES = {"f16", "bf16", "f16x2", "bf16x2", "f32", "f64"}
# Opcodes that only move float64 values: they do not use the float64 units.
_F64_DATA_MOVEMENT = {
    "mov", "ld", "ldu", "st", "selp", "slct", "atom", "red", "shfl", "prmt", "cvta", "cp",
    "tex", "tld4", "suld", "sust", "multimem",
}  # fmt: skip
_SFU_TRANSCENDENTAL = {"ex2", "lg2", "sin", "cos", "tanh"}
_SFU_FLOAT_OPS = {"rcp", "sqrt", "rsqrt", "div"}
_DROPPED_MODIFIERS = {"ftz", "sat"}

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# Directives that end at the line, not at a semicolon (line info, source files).
_LINE_DIRECTIVE = re.compile(r"^[ \t]*\.(?:loc|file)\b[^\n]*$", re.M)
_FUNCTION_HEADER = re.compile(
    r"^[ \t]*(?:\.(?:visible|weak|extern)\b[ \t]*)*"
    r"\.(?P<kind>entry|func)\b[ \t]*(?:\([^)]*\)[ \t]*)?(?P<name>[\w$.]+)",
    re.M,
)
_SHARED_DECL = re.compile(
    r"^[ \t]*(?P<extern>\.extern[ \t]+)?(?:\.(?:visible|weak|common)[ \t]+)*\.shared\b"
    r"(?P<spec>[^;\[]*?)[ \t]+(?P<name>[\w$]+)(?P<dims>(?:\[\d*\])*)[ \t]*(?:=[^;]*)?;",
    re.M,
)
_LABELS = re.compile(r"^\s*(?:[\w$]+:\s*)+")
_GUARD = re.compile(r"^@!?%?[\w$]+\s+")
_CALLEE = re.compile(r"^\s*(?:\([^)]*\)\s*,\s*)?([\w$.]+)")


class _PtxModule:
    """The functions of one PTX module: their bodies, and what they call."""

    def __init__(self, ptx: str) -> None:
        self.text = _LINE_DIRECTIVE.sub("", _COMMENT.sub("", ptx))
        self.kinds: dict[str, str] = {}
        self.bodies: dict[str, str] = {}
        self.outer: list[str] = []  # module-scope text, between function definitions
        position = 0
        for header in _FUNCTION_HEADER.finditer(self.text):
            if header.start() < position:
                continue  # a match inside a body already consumed
            start = self._definition_start(header.end())
            self.outer.append(self.text[position : header.start()])
            if start is None:  # a declaration: ".extern .func f(...);"
                position = header.end()
                continue
            end = self._matching_brace(start)
            name = header["name"]
            self.kinds[name] = header["kind"]
            self.bodies[name] = self.text[start + 1 : end]
            position = end + 1
        self.outer.append(self.text[position:])

    def _definition_start(self, offset: int) -> int | None:
        """Offset of the ``{`` that opens the body, or None for a declaration."""
        depth = 0
        for index in range(offset, len(self.text)):
            char = self.text[index]
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            elif depth == 0 and char == "{":
                return index
            elif depth == 0 and char == ";":
                return None
        return None

    def _matching_brace(self, start: int) -> int:
        depth = 0
        for index in range(start, len(self.text)):
            if self.text[index] == "{":
                depth += 1
            elif self.text[index] == "}":
                depth -= 1
                if depth == 0:
                    return index
        raise PortkitError("unbalanced braces in PTX")

    def entries(self) -> list[str]:
        return [name for name, kind in self.kinds.items() if kind == "entry"]

    def reachable(self, entry: str) -> list[str]:
        """``entry`` and every function defined here that it calls, directly or not."""
        if entry not in self.bodies:
            raise PortkitError(f"the PTX defines no function {entry}")
        order, todo = [entry], [entry]
        while todo:
            for opcode, operands in _instructions(self.bodies[todo.pop()]):
                if opcode.split(".")[0] != "call":
                    continue
                callee = _CALLEE.match(operands)
                if callee and callee[1] in self.bodies and callee[1] not in order:
                    order.append(callee[1])
                    todo.append(callee[1])
        return order

    def instructions(self, entry: str) -> Iterable[tuple[str, str]]:
        for name in self.reachable(entry):
            yield from _instructions(self.bodies[name])

    def module_shared_bytes(self, entry: str) -> int:
        """Static size of the module-scope ``.shared`` variables the kernel refers to."""
        code = "\n".join(self.bodies[name] for name in self.reachable(entry))
        total = 0
        for decl in _SHARED_DECL.finditer("\n".join(self.outer)):
            if decl["extern"] or not re.search(rf"(?<![\w$]){re.escape(decl['name'])}\b", code):
                continue
            total += _declared_bytes(decl["spec"], decl["dims"])
        return total


def _declared_bytes(spec: str, dims: str) -> int:
    words = [w for w in spec.replace("\t", " ").split(" ") if w]
    element, vector = 0, 1
    for word in words:
        token = word.lstrip(".")
        if token in _TYPE_BYTES:
            element = _TYPE_BYTES[token]
        elif re.fullmatch(r"v\d+", token):
            vector = int(token[1:])
    count = 1
    for dim in re.findall(r"\[(\d*)\]", dims):
        if not dim:
            return 0  # unsized: dynamic shared memory
        count *= int(dim)
    return element * vector * count


def _instructions(body: str) -> Iterable[tuple[str, str]]:
    """(opcode, operands) of each instruction of a function body; directives skipped."""
    for statement in body.split(";"):
        text = _LABELS.sub("", statement.replace("{", " ").replace("}", " ")).strip()
        text = _GUARD.sub("", text)
        if not text or text.startswith("."):
            continue
        opcode, *operands = text.split(None, 1)
        yield opcode, operands[0] if operands else ""


def _width(tokens: Sequence[str]) -> int:
    vector, element = 1, 0
    for token in tokens[1:]:
        if re.fullmatch(r"v\d+", token):
            vector = int(token[1:])
        elif token in _TYPE_BYTES:
            element = _TYPE_BYTES[token]
    return vector * element


def _usage(module: _PtxModule, entry: str, props: _Properties, extra_shared: int) -> ResourceUsage:
    f64 = 0
    loads: Counter[int] = Counter()
    stores: Counter[int] = Counter()
    special: Counter[str] = Counter()
    for opcode, operands in module.instructions(entry):
        tokens = opcode.split(".")
        op = tokens[0]
        if "f64" in tokens[1:] and op not in _F64_DATA_MOVEMENT:
            f64 += 1
        if op in ("ld", "ldu") and "global" in tokens:
            loads[_width(tokens)] += 1
        elif op == "st" and "global" in tokens:
            stores[_width(tokens)] += 1
        if op in _SFU_TRANSCENDENTAL or (
            op in _SFU_FLOAT_OPS and _FLOAT_TYPES.intersection(tokens[1:])
        ):
            special[".".join(t for t in tokens if t not in _DROPPED_MODIFIERS)] += 1
        elif op == "call":
            callee = _CALLEE.match(operands)
            if callee and callee[1].startswith("__nv_"):
                special[callee[1]] += 1
    return ResourceUsage(
        registers=props.final_registers,
        spill_store_bytes=props.spill_stores,
        spill_load_bytes=props.spill_loads,
        shared_bytes=props.shared + extra_shared,
        local_bytes=props.local_bytes,
        f64_instructions=f64,
        global_loads=dict(sorted(loads.items())),
        global_stores=dict(sorted(stores.items())),
        special_functions=dict(sorted(special.items())),
    )
