"""C spellings: identifiers that are not C keywords, and literals."""

from __future__ import annotations

from portkit.port.context import CExpr, FunctionContext

NO_SUFFIX = ("isnan", "isinf", "isfinite")
_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto "
    "if inline int long register restrict return short signed sizeof static struct switch "
    "typedef union unsigned void volatile while bool true false class new delete this "
    "template typename namespace using operator private public protected virtual friend "
    "threadIdx blockIdx blockDim gridDim warpSize min max widen".split()
)


def c_identifier(name: str) -> str:
    """A Python name as a C identifier: C keywords and CUDA built-ins get a ``_``."""
    return f"{name}_" if name in _C_KEYWORDS else name


def int_text(value: int) -> str:
    """A 64-bit C literal; a mask (0xFFFFFFFF) stays in hex."""
    mask = value > 0xFFFF and (value & (value + 1) == 0 or value & (value - 1) == 0)
    return (hex(value).upper().replace("0X", "0x") if mask else str(value)) + "LL"


def float_text(value: float, ctx: FunctionContext) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        ctx.needs.helpers.add("math_constants")
        return {"nan": "CUDART_NAN", "inf": "CUDART_INF", "-inf": "-CUDART_INF"}[repr(value)]
    return repr(value)


def literal_number(e: CExpr) -> float | None:
    """The value of a numeric literal's text (``0``, ``1.5``, ``-2``), else None."""
    if not e.literal:
        return None
    try:
        value = float(e.text.rstrip("LlFf") if not e.text.lower().startswith("0x") else "x")
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None
