"""What a twin's ``.cu`` declares: its ``__global__`` kernels and their parameters.

portkit reads the signatures so it can pick the template instantiation from the
tensors' dtype, pass each scalar with the C type the kernel expects (a Python int
handed to an ``int`` parameter must travel as 4 bytes, not 8), and name a wrong
argument before the GPU sees it. The parser covers what twins write: ``template
<typename T>``, ``extern "C"``, ``__launch_bounds__``, ``const``/``__restrict__``
pointers and plain scalar types, ``template <typename T, typename U>`` (each parameter
decided by the tensors bound to it), fixed element types (``__half*``,
``__nv_bfloat16*``, ``int*``, ``unsigned*``, ``long long*``, ``float4*``...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from portkit.errors import TwinSignatureError

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
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "int8_t": "int8",
    "int16_t": "int16",
}
# Element types a pointer parameter may have beyond the scalars: half precision and
# vector types (their tensor's dtype is the element's: float4* takes float32 tensors).
POINTER_ONLY_TYPES = {
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "float2": "float32",
    "float4": "float32",
    "double2": "float64",
    "int2": "int32",
    "int4": "int32",
}

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(
    r"(?:template\s*<(?P<tparams>[^<>]*)>\s*)?"
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
    template_params: tuple[str, ...]
    params: tuple[TwinParam, ...]
    line: int

    @property
    def template_param(self) -> str | None:
        """The first template parameter (most twins have one), or None."""
        return self.template_params[0] if self.template_params else None

    def expression(self, scalar: str | tuple[str, ...] | None) -> str:
        """The NVRTC name expression: ``k<float>`` or ``k<float, int>`` for a template."""
        if not self.template_params:
            return self.name
        if isinstance(scalar, str):  # one C type for every template parameter
            scalar = (scalar,) * len(self.template_params)
        scalars = tuple(scalar or ())
        return f"{self.name}<{', '.join(scalars)}>"


def _parse_param(text: str, kernel: str, path: Path) -> TwinParam:
    pointer = "*" in text
    words = [w for w in re.split(r"[\s*&]+", text) if w and w not in _QUALIFIERS]
    if len(words) < 2:
        raise TwinSignatureError(f"{path}: kernel {kernel}: cannot read parameter {text.strip()!r}")
    return TwinParam(name=words[-1], ctype=" ".join(words[:-1]), pointer=pointer)


def _template_params(text: str | None, kernel: str, path: Path, line: int) -> tuple[str, ...]:
    """``typename T, typename U`` -> ("T", "U"); non-type parameters are refused."""
    if text is None:
        return ()
    names = []
    for item in text.split(","):
        words = item.split()
        if len(words) != 2 or words[0] not in ("typename", "class"):
            raise TwinSignatureError(
                f"{path}:{line}: kernel {kernel}: template parameter {item.strip()!r}; portkit "
                f"instantiates type parameters only (typename T), from the tensors' dtypes"
            )
        names.append(words[1])
    return tuple(names)


def parse_twin(path: Path) -> dict[str, TwinKernel]:
    source = path.read_text()
    # Blank out comments but keep newlines so that line numbers still match.
    code = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    kernels: dict[str, TwinKernel] = {}
    for match in _KERNEL.finditer(code):
        name = match["name"]
        line = code.count("\n", 0, match.start("name")) + 1
        tparams = _template_params(match["tparams"], name, path, line)
        raw = [p for p in match["params"].split(",") if p.strip() and p.strip() != "void"]
        params = tuple(_parse_param(p, name, path) for p in raw)
        for p in params:
            known = p.ctype in tparams or p.ctype in SCALAR_TYPES
            if p.pointer and not known and p.ctype not in POINTER_ONLY_TYPES:
                raise TwinSignatureError(
                    f"{path}:{line}: kernel {name}: parameter {p.name} is a {p.ctype}* ; portkit "
                    f"passes tensors as pointers to template types, "
                    f"{', '.join(sorted(POINTER_ONLY_TYPES))} and the scalar types"
                )
            if not p.pointer and not known:
                raise TwinSignatureError(
                    f"{path}:{line}: kernel {name}: parameter {p.name} has type {p.ctype!r}; "
                    f"portkit passes pointers, the template types and "
                    f"{', '.join(sorted(SCALAR_TYPES))}"
                )
        kernels[name] = TwinKernel(name, tparams, params, line)
    return kernels
