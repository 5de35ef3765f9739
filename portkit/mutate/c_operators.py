"""Mutation operators for a twin (C CUDA), at the level of its text.

The twin is read line by line with its comments and strings blanked (so nothing in a
comment is mutated and columns stay put); each operator finds its pattern in the code
and yields a mutant whose source is the original with one span replaced. Text-level on
purpose: portkit has no C parser, and the twins follow a plain style (spaces around
binary operators, one statement a line) that these patterns rely on. A pattern that
misfires makes a mutant that does not compile: it is reported as stillborn, not killed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from portkit.backends.twin.source import blank_comments_and_strings
from portkit.mutate.model import Mutant

_BARRIER = re.compile(r"\b(__syncthreads|__syncwarp)\s*\(\s*[^;]*\)\s*;")
# `a < b` with spaces (templates and casts have none before `<`); not `<<`, `<=`.
_LESS = re.compile(r"(?<=[\w)\]] )<(?=[ ])")
_SUBSCRIPT = re.compile(r"\b(\w+)\s*\[\s*([A-Za-z_]\w*)\s*\]")
_DECLARATION = re.compile(
    r"^\s*(?:const\s+|static\s+|__shared__\s+|constexpr\s+)*[\w:]+(?:<[^>]*>)?[\s*&]+\w+\s*\["
)
_WIDE_LOCAL = re.compile(r"\b(unsigned\s+long\s+long|long\s+long|int64_t|size_t)(\s+)(\w+\s*=)")
_ACCUMULATOR = re.compile(r"\b(float|double|acc_t|[AH])(\s+)(\w+\s*=)")
_SHUFFLE = re.compile(r"\b__shfl_(down|up|xor)_sync\s*\(")
_TEMPLATE_T = re.compile(r"^\s*template\s*<\s*typename\s+T\b")
_FOR = re.compile(r"\bfor\s*\(")
_IF = re.compile(r"\bif\s*\(")


@dataclass(frozen=True)
class CodeLine:
    number: int  # 1-based
    start: int  # offset of the line in the file
    code: str  # the line with comments and strings blanked to spaces
    templated: bool  # inside a function templated on T (its accumulators may be T)


def scan(text: str) -> list[CodeLine]:
    """Every line's code (comments and string literals blanked) and whether it is in the
    body of a ``template <typename T ...>`` function."""
    code = blank_comments_and_strings(text)
    lines: list[CodeLine] = []
    depth, pending, templated, start = 0, False, False, 0
    for number, line in enumerate(code.split("\n"), 1):
        if depth == 0 and _TEMPLATE_T.match(line):
            pending = True
        lines.append(CodeLine(number, start, line, templated and depth > 0))
        for ch in line:
            if ch == "{":
                if depth == 0:
                    templated, pending = pending, False
                depth += 1
            elif ch == "}":
                depth = max(depth - 1, 0)
        if depth == 0 and line.rstrip().endswith(";"):
            pending = False  # a declaration, not the templated function
        start += len(line) + 1
    return lines


def _matching(code: str, open_at: int) -> int:
    """The index of the bracket closing the one at ``open_at`` (same line), or -1."""
    pairs = {"(": ")", "[": "]"}
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] in pairs:
            depth += 1
        elif code[i] in ")]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _top_level_split(text: str, sep: str) -> list[str]:
    parts, depth, last = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == sep and depth == 0:
            parts.append(text[last:i])
            last = i + 1
    return [*parts, text[last:]]


Edit = tuple[int, int, str, str]  # (start, end, replacement, description) within a line


def _barriers(line: CodeLine) -> Iterator[Edit]:
    for m in _BARRIER.finditer(line.code):
        yield m.start(), m.end(), f"/* {m.group(1)} dropped */", f"{m.group(1)}() dropped"


def _bounds(line: CodeLine) -> Iterator[Edit]:
    if line.code.lstrip().startswith(("#", "template")):
        return
    for m in _LESS.finditer(line.code):
        left = _operand(line.code[: m.start()][::-1], opening=")]")[::-1]
        what = f"{left} < {_operand(line.code[m.end() :], opening='([')}"
        yield m.start(), m.end(), "<=", f"`{what.strip()}` made `<=`"


def _operand(text: str, opening: str) -> str:
    """The operand at the start of ``text`` (given reversed for a left operand): up to a
    bracket that closes at depth 0, `&&`, `||`, `;`, `,`, `?` or an assignment's `=`."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "()[]":
            depth += 1 if ch in opening else -1
        assignment = ch == "=" and "=" not in text[i - 1 : i] + text[i + 1 : i + 2]
        assignment = assignment and text[i - 1 : i] not in ("<", ">", "!")
        logical = text[i : i + 2] in ("&&", "||")
        if depth < 0 or (depth == 0 and (ch in ";,?" or assignment or logical)):
            return text[:i].strip()
    return text.strip()


def _indices(line: CodeLine) -> Iterator[Edit]:
    if "__shared__" in line.code or _DECLARATION.match(line.code):
        return
    for m in _SUBSCRIPT.finditer(line.code):
        name, index = m.group(1), m.group(2)
        if index.isupper():  # a constant (WARPS, THREADS): a declaration's size
            continue
        at = m.start(2)
        yield at, m.end(2), f"{index} + 1", f"{name}[{index}] -> {name}[{index} + 1]"


def _int32(line: CodeLine) -> Iterator[Edit]:
    for m in _WIDE_LOCAL.finditer(line.code):
        name = m.group(3).rstrip("= ").strip()
        yield m.start(1), m.end(1), "int", f"{m.group(1)} {name} declared int"


def _atomics(line: CodeLine) -> Iterator[Edit]:
    for m in re.finditer(r"\batomicAdd\s*\(", line.code):
        close = _matching(line.code, m.end() - 1)
        if close < 0:
            continue
        args = _top_level_split(line.code[m.end() : close], ",")
        if len(args) != 2:
            continue
        target, value = (a.strip() for a in args)
        place = target[1:].strip() if target.startswith("&") else f"*({target})"
        yield m.start(), close + 1, f"({place} += {value})", f"atomicAdd -> {place} += {value}"


def _accumulators(line: CodeLine) -> Iterator[Edit]:
    if not line.templated:
        return
    for m in _ACCUMULATOR.finditer(line.code):
        if re.search(r"\bconst\s+$", line.code[: m.start()]):
            continue  # a constant is not an accumulator
        name = m.group(3).rstrip("= ").strip()
        yield m.start(1), m.end(1), "T", f"accumulator {m.group(1)} {name} declared T"


def _tails(line: CodeLine) -> Iterator[Edit]:
    for m in _FOR.finditer(line.code):
        close = _matching(line.code, m.end() - 1)
        if close < 0:
            continue
        init = _top_level_split(line.code[m.end() : close], ";")[0]
        value = init.split("=", 1)[1] if "=" in init else init
        if init.strip() and not re.search(r"[+*]", value):
            continue  # starts at a thread's own index: the main loop, not a tail
        yield m.start(), m.start(), "if (false) ", "tail loop dropped"


def _shuffles(line: CodeLine) -> Iterator[Edit]:
    for m in _SHUFFLE.finditer(line.code):
        kind = m.group(1)
        other = {"down": "up", "up": "down", "xor": "down"}[kind]
        name = f"__shfl_{kind}_sync"
        yield m.start(), m.end() - 1, f"__shfl_{other}_sync", f"{name} -> __shfl_{other}_sync"
        close = _matching(line.code, m.end() - 1)
        args = _top_level_split(line.code[m.end() : close], ",") if close > 0 else []
        if len(args) >= 3:
            offset = args[2]
            at = m.end() + len(",".join(args[:2])) + 1
            yield at, at + len(offset), f" ({offset.strip()}) / 2", f"{name} offset halved"


def _guards(line: CodeLine) -> Iterator[Edit]:
    for m in _IF.finditer(line.code):
        close = _matching(line.code, m.end() - 1)
        if close < 0:
            continue
        condition = line.code[m.end() : close]
        after = line.code[close + 1 :].strip()
        if _LESS.search(condition) or " <= " in condition:
            yield m.end(), close, "true", f"guard `if ({condition.strip()})` removed"
        elif (" >= " in condition or " > " in condition) and after.startswith("return"):
            yield m.end(), close, "false", f"early return `if ({condition.strip()})` removed"


OPERATORS: dict[str, Callable[[CodeLine], Iterator[Edit]]] = {
    "barrier": _barriers,
    "bound": _bounds,
    "index": _indices,
    "int32": _int32,
    "atomic": _atomics,
    "accum": _accumulators,
    "tail": _tails,
    "shuffle": _shuffles,
    "guard": _guards,
}


def twin_mutants(text: str, file: str, kinds: set[str] | None = None) -> list[Mutant]:
    """Every mutant of the twin ``text`` of the chosen ``kinds`` (default all), in kind
    order then line order."""
    lines = scan(text)
    mutants: list[Mutant] = []
    for kind, operator in OPERATORS.items():
        if kinds is not None and kind not in kinds:
            continue
        for line in lines:
            for start, end, replacement, description in operator(line):
                at, to = line.start + start, line.start + end
                source = text[:at] + replacement + text[to:]
                mutants.append(Mutant(kind, "twin", file, line.number, description, source))
    return mutants
