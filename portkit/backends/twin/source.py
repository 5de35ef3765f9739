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
from pathlib import Path

from portkit.errors import TwinSignatureError

# The C types a parameter may have and the signature read here are the launch
# contract's: an exported package rebuilds the same TwinKernel from its manifest.
from portkit.runtime.launch_contract import POINTER_ONLY_TYPES, SCALAR_TYPES, TwinKernel, TwinParam

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(
    r"(?:template\s*<(?P<tparams>[^<>]*)>\s*)?"
    r"(?:extern\s+\"C\"\s+)?__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s+)?(?P<name>\w+)\s*\((?P<params>[^)]*)\)",
    re.S,
)
_QUALIFIERS = {"const", "__restrict__", "restrict", "volatile", "__restrict"}


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


def blank_comments_and_strings(text: str) -> str:
    """C or CUDA source with its comments and the insides of its string and character
    literals blanked to spaces (the quotes kept), newlines kept, so offsets, lines and
    columns still match the file: what text-level readers of a twin search."""
    blank = list(text)
    i, n = 0, len(text)
    while i < n:
        two = text[i : i + 2]
        if two == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            i += 1  # keep the quotes, blank what is between them
            j -= 1
        else:
            i += 1
            continue
        for k in range(i, j):
            if blank[k] != "\n":
                blank[k] = " "
        i = max(j, i + 1)
    return "".join(blank)


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


def display_name(path: Path) -> str:
    """The twin's file name as its compilers print it (NVRTC's log, the CPU build's
    ``#line``): relative to the working directory if possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
