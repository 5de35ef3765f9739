"""compute-sanitizer's log, parsed into rows portkit can show.

The four tools print each error as a header line and indented detail lines, every line
prefixed with ``=========`` (on stdout, or bare in a ``--log-file``)::

    ========= Invalid __global__ write of size 4 bytes
    =========     at void vector_add<float>(const T1 *, ...)+0x1d0 in cuda_src/vector_add.cu:6
    =========     by thread (1,0,0) in block (0,0,0)

    ========= Error: Race reported between Write access at softmax.cu:24:void f(...)
    =========     and Read access at softmax.cu:26:void f(...) [248 hazards]

    ========= ERROR: Potential RAW hazard detected at __shared__ 0x8 in block (0,0,0) :
    =========     Write Thread (1,0,0) at 0x... in cuda_src/softmax.cu:24:void f(...)
    =========     Read Thread (0,0,0) at 0x... in cuda_src/softmax.cu:26:void f(...)

    ========= Uninitialized __global__ memory read of size 4 bytes
    ========= Barrier error detected. Divergent thread(s) in block

Older releases write the location as ``at 0x70 in file.cu:14:kernel(...)``, newer ones as
``at kernel(...)+0x70 in file.cu:14``; both are read. The parser keeps what it cannot
place (a header with no location) rather than dropping an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

PREFIX = re.compile(r"^=+ ?")
# Headers of one error; the group names the access kind.
HEADERS = (
    (
        "memcheck",
        re.compile(
            r"^Invalid (?P<space>__\w+__) (?P<access>read|write|atomic)"
            r"(?: of size (?P<size>\d+)(?: bytes?)?)?"
        ),
    ),
    (
        "memcheck",
        re.compile(
            r"^(?P<access>Misaligned) (?:address|(?P<space>__\w+__) "
            r"\w+) ?(?:of size (?P<size>\d+))?"
        ),
    ),
    (
        "memcheck",
        re.compile(
            r"^(?P<access>Out-of-range Shared or Local Address|"
            r"Hardware Exception|Malloc/Free Error|Program hit [^\n]*)"
        ),
    ),
    (
        "initcheck",
        re.compile(
            r"^Uninitialized (?P<space>__\w+__) memory (?P<access>read|write)"
            r"(?: of size (?P<size>\d+)(?: bytes?)?)?"
        ),
    ),
    (
        "synccheck",
        re.compile(
            r"^(?P<access>Barrier error detected\.?.*|"
            r"Invalid arguments detected.*|Illegal \w+ detected.*)"
        ),
    ),
    (
        "racecheck",
        re.compile(
            r"^(?i:error|warning|info): Potential (?P<access>\w+ hazard) "
            r"detected at (?P<space>__\w+__) \S+ in block "
            r"(?P<block>\([\d,\s]+\))"
        ),
    ),
    (
        "racecheck",
        re.compile(
            r"^(?i:error|warning|info): (?P<access>Race reported) between "
            r"(?P<rest>.*)"
        ),
    ),
)
# "at <kernel>+0x70 in <file>:<line>" (new) or "at 0x70 in <file>:<line>:<kernel>" (old).
AT_NEW = re.compile(r"at (?P<kernel>.+?)\+0x[0-9a-fA-F]+ in (?P<file>[^\s:]+):(?P<line>\d+)\s*$")
AT_OLD = re.compile(r"at 0x[0-9a-fA-F]+ in (?P<file>[^\s:]+):(?P<line>\d+):(?P<kernel>.+)$")
AT_NO_LINE = re.compile(r"at (?P<kernel>.+?)\+0x[0-9a-fA-F]+\s*$")
BY_THREAD = re.compile(r"by thread (?P<thread>\([\d,\s]+\)) in block (?P<block>\([\d,\s]+\))")
HAZARD_SIDE = re.compile(
    r"^(?P<access>Read|Write|Atomic)\w* Thread (?P<thread>\([\d,\s]+\)) at 0x[0-9a-fA-F]+ in "
    r"(?P<file>[^\s:]+):(?P<line>\d+):(?P<kernel>.+)$"
)
# The same side in the newer location style: "Write Thread (1,0,0) at f(...)+0x3b0 in a.cu:24".
HAZARD_SIDE_NEW = re.compile(
    r"^(?P<access>Read|Write|Atomic)\w* Thread (?P<thread>\([\d,\s]+\)) at (?P<kernel>.+?)"
    r"\+0x[0-9a-fA-F]+ in (?P<file>[^\s:]+):(?P<line>\d+)\s*$"
)
# Last resort for a format not seen yet: any "file.cu:LINE" in a detail line.
ANY_SOURCE = re.compile(r"(?P<file>[^\s:]+\.(?:cu|cuh|py|h|hpp)):(?P<line>\d+)")
RACE_SIDE = re.compile(
    r"(?P<access>Read|Write|Atomic) access at (?:0x[0-9a-fA-F]+ in )?(?P<file>[^\s:]+):"
    r"(?P<line>\d+):(?P<kernel>.+?)(?=\s+and (?:Read|Write|Atomic) access|\s*\[\d+ hazards?\]|$)"
)
SUMMARY = re.compile(r"^ERROR SUMMARY: (\d+) errors?")


@dataclass
class Finding:
    """One error compute-sanitizer reported, as a row of portkit's table."""

    tool: str
    kind: str  # "Invalid __global__ write", "RAW hazard", "Barrier error detected..."
    kernel: str = ""  # the kernel's base name (vector_add), "" when the log has none
    signature: str = ""  # the name as the log printed it
    file: str = ""
    line: int = 0
    block: str = ""
    thread: str = ""
    size: int = 0  # bytes of the access, 0 when not given
    other: str = ""  # racecheck: the other access, "Read thread (0,0,0) at file:line"
    op: str = ""
    implementation: str = ""  # twin, numba, or "" for a kernel that is not the project's

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else ""

    def as_dict(self) -> dict:
        return asdict(self)


def kernel_name(signature: str) -> str:
    """``void ns::vector_add<float>(const float *, ...)`` -> ``vector_add``; numba's
    ``cudapy::portkit_ops::sigmoid::sigmoid_fwd[abi:v1,...](Array<...>)`` -> ``sigmoid_fwd``."""
    text = re.sub(r"\[abi:[^\]]*\]", "", signature.strip())
    depth, cut = 0, len(text)
    for position, char in enumerate(text):  # drop the parameter list (the first '(' at depth 0)
        if char in "<":
            depth += 1
        elif char in ">":
            depth -= 1
        elif char == "(" and depth == 0:
            cut = position
            break
    head = re.sub(r"<.*>$", "", text[:cut].strip())  # template arguments
    head = head.split()[-1] if head.split() else head  # return type
    return head.split("::")[-1]


def _lines(log: str) -> list[str]:
    return [PREFIX.sub("", line.rstrip()) for line in log.splitlines()]


def parse_log(log: str, tool: str) -> list[Finding]:
    """Every error in ``log`` (the output of ``compute-sanitizer --tool tool``)."""
    findings: list[Finding] = []
    current: Finding | None = None
    for raw in _lines(log):
        text = raw.strip()
        header = _header(text)
        if header is not None:
            current = header
            findings.append(current)
            continue
        if current is None or not text:
            if not text:
                current = None
            continue
        _detail(current, text)
    return [f for f in findings if f.tool == tool or tool == "any"]


def _header(text: str) -> Finding | None:
    for tool, pattern in HEADERS:
        match = pattern.match(text)
        if not match:
            continue
        groups = match.groupdict()
        access = groups.get("access") or ""
        space = groups.get("space") or ""
        if tool == "memcheck" and access in ("read", "write", "atomic"):
            kind = f"Invalid {space} {access}"
        elif tool == "initcheck":
            kind = f"Uninitialized {space} {access}"
        else:
            kind = access.rstrip(".") if tool != "racecheck" else access
        finding = Finding(tool, kind, size=int(groups.get("size") or 0))
        if groups.get("block"):
            finding.block = _coords(groups["block"])
        if groups.get("rest"):
            _race_sides(finding, groups["rest"])
        return finding
    return None


def _detail(finding: Finding, text: str) -> None:
    match = HAZARD_SIDE.match(text) or HAZARD_SIDE_NEW.match(text)
    if match:
        thread = _coords(match["thread"])
        side = f"{match['access']} thread {thread} at {match['file']}:{match['line']}"
        if not finding.file:
            finding.thread = _coords(match["thread"])
            _place(finding, match["kernel"], match["file"], int(match["line"]))
            finding.kind = f"{finding.kind} ({match['access'].lower()})"
        elif not finding.other:
            finding.other = side
        return
    for pattern in (AT_NEW, AT_OLD):
        match = pattern.search(text)
        if match and not finding.file:
            _place(finding, match.group("kernel"), match.group("file"), int(match.group("line")))
            return
    match = AT_NO_LINE.search(text)
    if match and text.startswith("at ") and not finding.signature:
        finding.signature = match.group("kernel").strip()
        finding.kernel = kernel_name(finding.signature)
        return
    match = BY_THREAD.search(text)
    if match:
        finding.thread, finding.block = _coords(match["thread"]), _coords(match["block"])
        return
    if text.startswith("and ") and "access at" in text:  # racecheck analysis, wrapped
        _race_sides(finding, text[4:])
        return
    match = ANY_SOURCE.search(text)
    if match and not finding.file and "Host Frame" not in text:
        finding.file, finding.line = match["file"], int(match["line"])


def _race_sides(finding: Finding, text: str) -> None:
    sides = list(RACE_SIDE.finditer(text))
    if sides and not finding.file:
        first = sides[0]
        _place(finding, first["kernel"], first["file"], int(first["line"]))
        finding.kind = f"{finding.kind}: {first['access']}"
        sides = sides[1:]
    if sides and not finding.other:
        side = sides[0]
        finding.other = f"{side['access']} at {side['file']}:{side['line']}"
        finding.kind = f"{finding.kind}-{side['access']}"


def _place(finding: Finding, signature: str, file: str, line: int) -> None:
    finding.signature = signature.strip()
    finding.kernel = kernel_name(finding.signature)
    finding.file, finding.line = file, line


def _coords(text: str) -> str:
    return "(" + ",".join(v.strip() for v in text.strip("() ").split(",")) + ")"


def error_summary(log: str) -> int | None:
    """The count of compute-sanitizer's ``ERROR SUMMARY`` line, if it printed one."""
    counts = [int(m.group(1)) for line in _lines(log) if (m := SUMMARY.match(line.strip()))]
    return sum(counts) if counts else None


def attribute(
    findings: Iterable[Finding], kernels_of: Mapping[str, Iterable[str]]
) -> list[Finding]:
    """Name the op and implementation of each finding: a ``.cu`` file is a twin, a
    ``.py`` file (or numba's ``cudapy::`` names) a prototype; the op is the file's stem
    when it is one of ``kernels_of`` (op -> kernel names), else the op owning the kernel.
    Findings in kernels of no op (torch's own) keep an empty op."""
    owners: dict[str, str] = {}
    for op, kernels in kernels_of.items():
        for kernel in kernels:
            owners.setdefault(kernel, op)
    result = []
    for finding in findings:
        stem = finding.file.rsplit("/", 1)[-1].rsplit(".", 1)[0] if finding.file else ""
        if finding.file.endswith(".cu"):
            finding.implementation = "twin"
        elif finding.file.endswith(".py") or "cudapy::" in finding.signature:
            finding.implementation = "numba"
        elif finding.kernel in owners:
            finding.implementation = "twin"
        if stem in kernels_of:
            finding.op = stem
            finding.implementation = finding.implementation or "twin"
        elif finding.kernel in owners:
            finding.op = owners[finding.kernel]
        if not finding.op:
            finding.implementation = ""
        result.append(finding)
    return result
