"""What a twin's ``.cu`` declares: its ``__global__`` kernels and their parameters.

portkit reads the signatures so it can pick the template instantiation from the
tensors' dtype, pass each scalar with the C type the kernel expects (a Python int
handed to an ``int`` parameter must travel as 4 bytes, not 8), and name a wrong
argument before the GPU sees it. The parser covers what twins write: ``template
<typename T>``, ``extern "C"``, ``__launch_bounds__``, ``const``/``__restrict__``
pointers and plain scalar types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from portkit.errors import OpDefinitionError

# C scalar types a kernel parameter may have -> NumPy type name used to pass it.
SCALAR_TYPES = {
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long long": "int64",
    "int64_t": "int64",
    "long": "int64",
    "unsigned long long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "bool": "bool_",
}

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(
    r"(?:template\s*<\s*(?:typename|class)\s+(?P<tparam>\w+)\s*>\s*)?"
    r"(?:extern\s+\"C\"\s+)?__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s+)?(?P<name>\w+)\s*\((?P<params>[^)]*)\)",
    re.S,
)
_QUALIFIERS = {"const", "__restrict__", "restrict", "volatile", "__restrict"}


@dataclass(frozen=True)
class TwinParam:
    name: str
    ctype: str  # base type: "T", "float", "int", ...
    pointer: bool


@dataclass(frozen=True)
class TwinKernel:
    name: str
    template_param: str | None
    params: tuple[TwinParam, ...]
    line: int

    def expression(self, scalar: str | None) -> str:
        """The NVRTC name expression: ``k<float>`` for a template, ``k`` otherwise."""
        return f"{self.name}<{scalar}>" if self.template_param else self.name


def _parse_param(text: str, kernel: str, path: Path) -> TwinParam:
    pointer = "*" in text
    words = [w for w in re.split(r"[\s*&]+", text) if w and w not in _QUALIFIERS]
    if len(words) < 2:
        raise OpDefinitionError(f"{path}: kernel {kernel}: cannot read parameter {text.strip()!r}")
    return TwinParam(name=words[-1], ctype=" ".join(words[:-1]), pointer=pointer)


def parse_twin(path: Path) -> dict[str, TwinKernel]:
    source = path.read_text()
    # Blank out comments but keep newlines so that line numbers still match.
    code = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    kernels: dict[str, TwinKernel] = {}
    for match in _KERNEL.finditer(code):
        name, tparam = match["name"], match["tparam"]
        raw = [p for p in match["params"].split(",") if p.strip() and p.strip() != "void"]
        params = tuple(_parse_param(p, name, path) for p in raw)
        for p in params:
            if not p.pointer and p.ctype != tparam and p.ctype not in SCALAR_TYPES:
                raise OpDefinitionError(
                    f"{path}: kernel {name}: parameter {p.name} has type {p.ctype!r}; portkit "
                    f"passes pointers, the template type and {', '.join(sorted(SCALAR_TYPES))}"
                )
        line = code.count("\n", 0, match.start("name")) + 1
        kernels[name] = TwinKernel(name, tparam, params, line)
    return kernels
