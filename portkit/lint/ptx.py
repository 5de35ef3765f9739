"""Reading what the compilers say about one kernel: ptxas's verbose log (registers,
spills, stack, shared and local memory) and a static count of its PTX instructions
(float64 work, global loads and stores by width, special-function math), combined
into one ``ResourceUsage`` row."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from portkit.errors import PortkitError


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

    def to_json(self) -> dict[str, Any]:
        """A JSON object (the widths' keys as text), for the lint cache."""
        data = asdict(self)
        for width_map in ("global_loads", "global_stores"):
            data[width_map] = {str(k): v for k, v in data[width_map].items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResourceUsage:
        """``to_json``'s object back; TypeError/ValueError/KeyError where it is not one."""
        widths = {
            name: {int(k): int(v) for k, v in data[name].items()}
            for name in ("global_loads", "global_stores")
        }
        return cls(**{**data, **widths})


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
class KernelProperties:
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


def parse_ptxas_log(log: str) -> dict[str, KernelProperties]:
    """Per function name, what ptxas (and nvJitLink's final summary) say about it."""
    props: dict[str, KernelProperties] = {}
    current: KernelProperties | None = None
    from_linker = False
    for line in log.splitlines():
        if "Compiling entry function" in line:
            current = None
            continue
        match = _PROPERTIES.search(line)
        if match:
            current = props.setdefault(match[1], KernelProperties())
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


class PtxModule:
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


def uses_f64_units(tokens: Sequence[str]) -> bool:
    """Whether an instruction (its opcode split at dots) makes the float64 units work."""
    return "f64" in tokens[1:] and tokens[0] not in _F64_DATA_MOVEMENT


_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)


def f64_lines(ptx: str) -> set[tuple[str, int]]:
    """(source file, line) of every float64 instruction of a PTX module compiled with
    line info (``.loc``); a line inlined from a device function is that function's."""
    files = {number: path for number, path in _FILE.findall(ptx)}
    found: set[tuple[str, int]] = set()
    where: tuple[str, int] | None = None
    for text in _COMMENT.sub("", ptx).splitlines():
        loc = _LOC.match(text)
        if loc:
            where = (files.get(loc[1], ""), int(loc[2]))
            continue
        for statement in text.split(";"):
            statement = _GUARD.sub("", _LABELS.sub("", statement).strip())
            if where and statement and uses_f64_units(statement.split(None, 1)[0].split(".")):
                found.add(where)
    return found


def kernel_usage(
    module: PtxModule, entry: str, props: KernelProperties, extra_shared: int
) -> ResourceUsage:
    f64 = 0
    loads: Counter[int] = Counter()
    stores: Counter[int] = Counter()
    special: Counter[str] = Counter()
    for opcode, operands in module.instructions(entry):
        tokens = opcode.split(".")
        op = tokens[0]
        if uses_f64_units(tokens):
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
