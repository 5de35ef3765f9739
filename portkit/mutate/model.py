"""What ``portkit mutate`` works with: the mutation kinds, one mutant, and its fate.

A mutant is a whole mutated copy of one source file (the twin or the prototype), made by
the operators (c_operators.py for the twin's text, py_operators.py for the prototype's
kernels), and run by the runner (runner.py) in a temporary copy of the project.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# kind -> what the mutation does (the --kinds choices, in the order reports list them)
KINDS: dict[str, str] = {
    "barrier": "drop a barrier (__syncthreads / cuda.syncthreads)",
    "bound": "a bound `<` made `<=` (a comparison, a loop's range stop + 1)",
    "index": "an index off by one (`i` -> `i + 1` in a subscript)",
    "int32": "a 64-bit size or index local (long long, int64_t, size_t) declared `int`",
    "atomic": "an atomic made a plain update (atomicAdd(&a[i], v) -> a[i] += v)",
    "accum": "accumulation in the storage dtype (a float/double accumulator declared T)",
    "tail": "a tail loop dropped (the loop after the vectorised part)",
    "shuffle": "a shuffle's direction or width changed (down <-> up, xor -> down, offset / 2)",
    "guard": "a guard removed (`if (i < n)` -> `if (true)`, an early return never taken)",
}

# What would kill a survivor of each kind: a heuristic, said with the survivor.
HINTS: dict[str, str] = {
    "barrier": "no case where a thread reads shared memory another warp wrote before the "
    "barrier (a block of more than one warp doing a block-wide step, values that differ "
    "per thread)",
    "bound": "no case whose size makes the extra iteration or element matter (sizes that "
    "are not a multiple of the block or pack, a size just past a loop's bound)"
    "; or the mutated branch runs in no case (e.g. a path for unaligned pointers: "
    "case inputs are always 16-byte aligned)",
    "index": "no case where the neighbouring element differs in what it contributes (an "
    "equivalent mutant if the index is not used for data); try sizes that are not a "
    "multiple of the block, and inputs without repeated values"
    "; or the mutated branch runs in no case (e.g. a path for unaligned pointers: "
    "case inputs are always 16-byte aligned)",
    "int32": "no case large enough to reach 2^31 elements (or a product of sizes past "
    "2^31): a 64-bit size truncated to int shows only there (a GPU case, `large=True`)",
    "atomic": "no case with duplicate indices / several threads updating one element at "
    "once; on a CPU the twin's threads do not interleave a read-modify-write, so only a "
    "GPU run (or the simulator's race check) sees a lost update",
    "accum": "no float16/bfloat16 case, or none long enough for rounding in the storage "
    "dtype to pass the tolerance (rows of thousands of elements in half precision)",
    "tail": "no case with a size that leaves a tail (n % pack width != 0, n % 256 != 0, "
    "cols not a multiple of the vector width)"
    "; or the mutated branch runs in no case (e.g. a path for unaligned pointers: "
    "case inputs are always 16-byte aligned)",
    "shuffle": "no case where the lanes of a warp hold different values at that shuffle "
    "(a row or block with fewer than 32 active lanes, values that differ per lane)",
    "guard": "no case with a size that is not a multiple of the launch (n % 256 != 0, rows "
    "that do not fill the last block): the guard only matters for the threads past the end",
}

SIDES = ("twin", "prototype")


@dataclass(frozen=True)
class Mutant:
    kind: str  # one of KINDS
    side: str  # "twin" (cuda_src/<op>.cu) or "prototype" (prototypes/<op>.py)
    file: str  # the file's name relative to the project, as the user knows it
    line: int  # 1-based, in the original file
    description: str  # e.g. "__syncthreads() dropped"
    source: str = field(repr=False)  # the whole mutated file

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


# How a mutant ended.
KILLED, SURVIVED, STILLBORN = "killed", "survived", "stillborn"


@dataclass
class MutantResult:
    mutant: Mutant
    status: str  # KILLED, SURVIVED or STILLBORN
    # killed: which check (backend / check / case) and its first line; stillborn: the
    # compiler's or importer's first line; survived: the heuristic hint.
    by: str = ""
    detail: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        m = self.mutant
        return {
            "kind": m.kind,
            "side": m.side,
            "file": m.file,
            "line": m.line,
            "description": m.description,
            "status": self.status,
            "by": self.by,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }
