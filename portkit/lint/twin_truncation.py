"""32-bit truncation in a twin: a 64-bit size or index squeezed into an ``int``.

The prototype computes indices in int64 (numba types Python ints so); a twin that keeps
one in an ``int`` agrees with it until the value passes 2^31 - 1, then wraps on the GPU,
and no CPU case reaches that size. The finder asks the compiler: the twin's translation
unit for the CPU (backends/twin_cpu/build.py, every instantiation the cases launch) is
compiled with ``-fsyntax-only -Wconversion -Wsign-conversion``, and two of its
diagnostics become ``truncation`` errors:

- an implicit conversion from a 64-bit integer (``long long``, ``long``, ``size_t``) to a
  32-bit or narrower one (``int idx = row * cols;`` with 64-bit operands): GCC's
  ``conversion from 'long long int' to 'int' may change value``, clang's
  ``-Wshorten-64-to-32``;
- a global thread index (``blockIdx`` times ``blockDim`` or ``gridDim``) converted to a
  signed ``int`` (GCC's and clang's sign-conversion warning on that line) in a kernel that
  compares the variable with a 64-bit value (``if (i < n)`` with ``long long n``): the
  twin is written for sizes past 2^31, and its index is not.

An explicit cast (``(int)cols``) says the value fits and is not reported. The ``int n``
parameter fed a tensor size is signature.py's finding, not this one.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from portkit.build.finding import Finding, Severity
from portkit.errors import PortkitError

if TYPE_CHECKING:
    from portkit.project.discovery import Op

TRUNCATION = "truncation"  # the finding kind
FLAGS = ("-fsyntax-only", "-Wconversion", "-Wsign-conversion", "-fno-diagnostics-show-caret")
_WIDE = (
    r"(?:long long int|long long unsigned int|long int|long unsigned int|long long|long|"
    r"unsigned long long|unsigned long|size_t|ptrdiff_t)"
)
_NARROW = (
    r"(?:int|unsigned int|short int|short unsigned int|short|unsigned short|char|"
    r"signed char|unsigned char)"
)
_Q = "[\u2018\u2019'`\"]"
_WHERE = r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): warning: "
_NARROWING = re.compile(
    _WHERE + rf"(?:(?:unsigned )?conversion from {_Q}(?P<src>[^\u2019'\"]+){_Q}"
    rf"(?: {{aka {_Q}[^\u2019'\"]+{_Q}}})? "
    rf"to {_Q}(?P<dst>[^\u2019'\"]+){_Q}"
    rf"|implicit conversion loses integer precision: {_Q}(?P<src2>[^\u2019'\"]+){_Q} to "
    rf"{_Q}(?P<dst2>[^\u2019'\"]+){_Q})",
    re.M,
)
_SIGN = re.compile(
    _WHERE + rf"(?:conversion to {_Q}int{_Q} from {_Q}unsigned int{_Q} may change the sign"
    rf"|implicit conversion changes signedness: {_Q}unsigned int{_Q} to {_Q}int{_Q})",
    re.M,
)
_GLOBAL_INDEX = re.compile(
    r"\bblockIdx\.[xyz]\b.*\b(?:blockDim|gridDim)\.[xyz]\b"
    r"|\b(?:blockDim|gridDim)\.[xyz]\b.*\bblockIdx\.[xyz]\b"
)
_INT_DECLARATION = re.compile(r"\b(?:const\s+)?(?:signed\s+)?int\s+(?P<name>\w+)\s*=")
_WIDE_DECLARATION = re.compile(
    r"\b(?:long\s+long(?:\s+int)?|long(?:\s+int)?|unsigned\s+long(?:\s+long)?|int64_t|"
    r"uint64_t|size_t|ptrdiff_t|ssize_t)\s+(?:const\s+)?(?:__restrict__\s+)?(?P<name>\w+)\b"
    r"(?!\s*\()"
)
# A value that fits whatever its operand: a remainder by a literal or CONSTANT, a mask, a
# shift by 32 or more, as the whole right-hand side of the line's assignment.
_BOUNDED = re.compile(
    r"=\s*[^;=]*?(?:%\s*(?:\d+|[A-Z][A-Z0-9_]*)|&\s*(?:0x[0-9a-fA-F]{1,8}|\d{1,9})|"
    r">>\s*(?:3[2-9]|[4-6]\d))\s*\)?\s*;"
)
FIX_NARROWING = (
    "keep the value in long long (int64_t) as the prototype does, or cast explicitly "
    "((int)...) where it is known to fit"
)
FIX_INDEX = (
    "compute the index in 64 bits: long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;"
)


def truncation_findings(op: Op) -> list[Finding]:
    """The op's twin lines that truncate a 64-bit size or index to 32 bits; [] for an op
    without a twin, one that cannot be read, or a machine without a C++ compiler."""
    from portkit.backends.twin.instances import readable_twin
    from portkit.backends.twin_cpu.build import cpu_syntax_check

    if not op.has_twin or op.twin_path is None:
        return []
    try:
        kernels, expressions = readable_twin(op, cpu_syntax_check)
    except PortkitError:
        return []  # the compile check says why
    log = _diagnostics(op.twin_path, expressions)
    if log is None:
        return []
    names = {n: k.line for n, k in kernels.items()}
    return diagnostics_findings(op.name, op.twin_path, log, names)


def _diagnostics(path: Path, expressions: list[str]) -> str | None:
    from portkit.backends.twin_cpu.build import find_compiler, flags, translation_unit

    compiler = find_compiler()
    if compiler is None:
        return None
    with tempfile.TemporaryDirectory(prefix="portkit-truncation-") as tmp:
        source = Path(tmp) / f"{path.stem}.cpp"
        source.write_text(translation_unit(path, expressions))
        chosen = [f for f in flags("plain", path) if f not in ("-w", "-shared", "-g")]
        proc = subprocess.run(
            [compiler.path, *chosen, *FLAGS, str(source)], capture_output=True, text=True
        )
    return proc.stderr if proc.returncode == 0 else None  # a compile error is compile's


def diagnostics_findings(op: str, path: Path, log: str, kernels: dict[str, int]) -> list[Finding]:
    """The ``truncation`` findings in a compiler log of the twin at ``path``
    (``kernels``: kernel name -> the line its definition starts on)."""
    lines = path.read_text().splitlines()
    wide_names = {m["name"] for m in _WIDE_DECLARATION.finditer(path.read_text())}
    found: dict[int, Finding] = {}

    def add(line: int, message: str, fix: str) -> None:
        where = f"{path}:{line}"
        kernel = _kernel_at(kernels, line)
        found.setdefault(line, Finding(Severity.ERROR, TRUNCATION, op, kernel, where, message, fix))

    for match in _NARROWING.finditer(log):
        src = match["src"] or match["src2"]
        dst = match["dst"] or match["dst2"]
        line = _own_line(match, path, lines)
        if line and re.fullmatch(_WIDE, src.strip()) and re.fullmatch(_NARROW, dst.strip()):
            code = lines[line - 1].strip()
            if _BOUNDED.search(code):
                continue  # `tile % 2`, `x & 0xff`, `x >> 32`: the value fits
            if _lane_argument(lines[line - 1], int(match["col"])):
                continue  # a shuffle's lane, offset or width: below 32 by the call's meaning
            add(
                line,
                f"`{code}` converts a 64-bit `{src}` to `{dst}`: past 2^31 it "
                f"wraps on the GPU, while the prototype keeps 64 bits",
                FIX_NARROWING,
            )
    for match in _SIGN.finditer(log):
        line = _own_line(match, path, lines)
        if not line:
            continue
        code = lines[line - 1]
        declared = _INT_DECLARATION.search(code)
        if declared is None or not _GLOBAL_INDEX.search(code[declared.end() :]):
            continue
        name = declared["name"]
        later = [start for start in kernels.values() if start > line]
        end = min(later) - 1 if later else len(lines)
        against = _compared_with(name, lines[line - 1 : end], wide_names)
        if against:
            add(
                line,
                f"`{code.strip()}` keeps a global thread index in a 32-bit int, "
                f"compared with the 64-bit `{against}`: past 2^31 threads it goes negative",
                FIX_INDEX,
            )
    return [found[line] for line in sorted(found)]


# Warp intrinsics whose int parameters are a lane, an offset or a width (< 32, or the
# call is wrong whatever the type): a 64-bit argument converted there truncates nothing.
_LANE_CALL = re.compile(r"\b__shfl(?:_up|_down|_xor)?(?:_sync)?\s*\(")


def _lane_argument(code: str, column: int) -> bool:
    """Whether ``column`` (1-based) falls inside the arguments of a warp shuffle call."""
    for call in _LANE_CALL.finditer(code):
        depth, end = 1, call.end()
        while end < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        if call.end() < column <= end:
            return True
    return False


def _own_line(match: re.Match[str], path: Path, lines: list[str]) -> int:
    """The warning's line when it is in the twin's own file, else 0."""
    file = Path(match["file"])
    same = file.name == path.name and (not file.is_absolute() or file.resolve() == path.resolve())
    line = int(match["line"])
    return line if same and 0 < line <= len(lines) else 0


def _compared_with(name: str, lines: list[str], wide: set[str]) -> str:
    """A 64-bit name that ``name`` is compared with in ``lines``, or ""."""
    word = re.escape(name)
    relation = r"\s*(?:<=|>=|<|>|==|!=)\s*"
    pattern = re.compile(rf"\b{word}{relation}(\w+)\b|\b(\w+){relation}{word}\b")
    for text in lines:
        for match in pattern.finditer(text):
            other = match.group(1) or match.group(2)
            if other in wide:
                return other
    return ""


def _kernel_at(kernels: dict[str, int], line: int) -> str:
    """The kernel whose definition starts last before ``line`` (helpers: the next one)."""
    before = [(start, name) for name, start in kernels.items() if start <= line]
    return max(before)[1] if before else ""
