"""Generic lambdas in a twin: a green here that some GPU machines' NVRTC refuses.

NVRTC treats a function without an execution-space annotation as host code, and older
releases apply that to a generic lambda's call operator (a template) in device code:
"A function without execution space annotations (__host__/__device__/__global__) is
considered a host function, and host functions are not allowed in JIT mode". On
2026-11-28 twins whose kernels chose a template argument through `[&](auto v) {...}`
compiled on the CPU machine (NVRTC 13.5, so `portkit check` passed its compile rows
there) and were refused on the H200 machine (the torch 2.11+cu130 image; its NVRTC
release not recorded); CCCL met the same with older NVRTC and replaced such lambdas
with structs (NVIDIA/cccl#10586). A lambda with typed parameters compiles there:
matmul's twin has two in a kernel and passes on that machine, so it is not reported.

The CPU machine cannot run the older compiler, so the finder reads the source: a lambda
introducer (``[...]``, not a subscript or an array declarator), a parameter list with an
``auto`` parameter (or a template parameter list, ``[]<typename T>``), then specifiers
and a body. Comments and string literals are blanked first.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from portkit.backends.twin.source import blank_comments_and_strings
from portkit.build.finding import Finding, Severity

if TYPE_CHECKING:
    from portkit.project.discovery import Op

LAMBDA = "generic-lambda"  # the finding kind
_SPECIFIERS = re.compile(r"\s*(?:mutable|constexpr|noexcept|__device__|__host__|static)\b")
_RETURN_TYPE = re.compile(r"\s*->\s*[\w:<>,\s*&]+?(?=\s*\{)")


def twin_lambda_findings(op: Op) -> list[Finding]:
    """One error a line of the op's twin where a generic lambda begins; [] without a twin."""
    if not op.has_twin or op.twin_path is None:
        return []
    try:
        text = op.twin_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []  # the compile check says why
    return [
        Finding(
            Severity.ERROR,
            LAMBDA,
            op.name,
            "",
            f"{op.twin_path}:{line}",
            "a generic lambda (an auto parameter) in the twin: older NVRTC releases refuse "
            "one in device code (\"host functions are not allowed in JIT mode\"; an H200 "
            "machine's did on 2026-11-28 where NVRTC 13.5 compiled it), so a GPU machine's "
            "compile can fail where this one passed",
            "a function template, or a struct with a __device__ operator(); a "
            "compile-time choice as a template parameter and an if",
        )
        for line in generic_lambda_lines(text)
    ]


def generic_lambda_lines(source: str) -> list[int]:
    """The 1-based lines of ``source`` (C++) where a generic lambda expression begins."""
    code = blank_comments_and_strings(source)
    lines: list[int] = []
    for match in re.finditer(r"\[", code):
        start = match.start()
        before = code[:start].rstrip()
        if before and (before[-1].isalnum() or before[-1] in "_])"):
            continue  # a subscript, an array declarator, or [[attributes]]'s second [
        if code.startswith("[[", start):
            continue  # an attribute
        end = _matching(code, start, "[", "]")
        if end is None or not _generic_lambda_follows(code, end + 1):
            continue
        line = code.count("\n", 0, start) + 1
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def _generic_lambda_follows(code: str, at: int) -> bool:
    """After a ``[...]``: ``<template params>`` or a ``(params)`` with an ``auto`` one,
    specifiers (before or after the parameters: ``[=] __device__ (auto x)``), an optional
    ``-> type``, then ``{``."""
    rest = _skip_specifiers(code[at:])
    generic = False
    if rest.lstrip().startswith("<"):
        offset = len(rest) - len(rest.lstrip())
        end = _matching(rest, offset, "<", ">")
        if end is None:
            return False
        generic, rest = True, _skip_specifiers(rest[end + 1 :])
    if rest.lstrip().startswith("("):
        offset = len(rest) - len(rest.lstrip())
        end = _matching(rest, offset, "(", ")")
        if end is None:
            return False
        generic = generic or re.search(r"\bauto\b", rest[offset : end + 1]) is not None
        rest = _skip_specifiers(rest[end + 1 :])
    match = _RETURN_TYPE.match(rest)
    if match:
        rest = rest[match.end() :]
    return generic and rest.lstrip().startswith("{")


def _skip_specifiers(rest: str) -> str:
    while True:
        match = _SPECIFIERS.match(rest)
        if not match:
            return rest
        rest = rest[match.end() :]


def _matching(text: str, start: int, open_: str, close: str) -> int | None:
    """The index of the bracket closing the one at ``start``, or None."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return None
