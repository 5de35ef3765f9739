"""A bank of deliberately wrong twins: porting mistakes that portkit must catch.

``tests/check/wrong_twins/<op>/<mistake>.patch`` is a unified diff that puts one mistake
into the real ``cuda_src/<op>.cu``, applied when the test runs (tests/check/wrong_twin_bank.py;
a patch that no longer applies fails naming itself); the wrong twin's first line says what
the mistake is and what a diff should show. Each
test builds a throwaway project holding the real prototype and the wrong twin (op
``wt_<op>_<mistake>``: discovery registers prototypes as ``portkit_ops.<name>``, so
the name must not clash with the repository's own ops) and runs portkit on it.

- CPU: every patch applies, every wrong twin still compiles (``portkit compile``), declares the same
  kernels as the real twin, and has its header, so the bank stays valid.
- GPU: each mistake is caught by the catchers recorded with it, deterministically (the
  one race between blocks, ``total/global_accumulator_race``, by its 16,384-block case):
  ``portkit check`` (guard zones or values: exits 1 and names the failing cases, with
  the blame on the twin, since the prototype is the real one) and/or the sanitizer tier
  (``portkit check --sanitize TOOL`` names the twin's file and line). It runs in a
  subprocess: a wrong kernel that faults would poison the CUDA context of the pytest
  process. Good twins and prototypes must be clean under all four tools.

``_ops/`` holds ops that exist only for the bank (``total``, a reduction with a global
accumulator), with their real prototype and twin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.check.wrong_twin_bank import OPS, WrongTwin, bank

REPO = Path(__file__).resolve().parents[2]
HEADER = "// WRONG TWIN "

F32_F64 = ("float32", "float64")
SOFTMAX_WIDE = ("3x127", "4x128", "2x129", "3x1000")  # rows of more than 32 columns
HALF_FLOATS = ("float32", "float16", "bfloat16", "float64")
NORM_DTYPES = ("float32", "bfloat16", "float16")  # add_rmsnorm, like rmsnorm: no float64
NORM_SHAPES = ("1x1", "3x127", "2x129", "4x1000", "37x64")
NORM_LARGE = ("bfloat16-16384x4096", "float32-16384x4096")


def cases(*names: str, dtypes: tuple[str, ...] = F32_F64) -> tuple[str, ...]:
    return tuple(f"{dt}-{n}" for dt in dtypes for n in names)


@dataclass(frozen=True)
class Mistake:
    """One wrong twin and what ``portkit check --backend numba --backend twin`` must say.

    ``fails``: (implementation, check, case) rows that must fail; ``passes``: cases in
    which no check may fail; ``caught``: False where check cannot see the mistake.
    """

    op: str
    name: str
    fails: tuple[tuple[str, str, str], ...] = ()
    passes: tuple[str, ...] = ()
    caught: bool = True  # by plain `portkit check` (guards or values)
    sanitizers: tuple[str, ...] = ()  # compute-sanitizer tools that must report it
    sanitize_cases: tuple[str, ...] = ()  # the cases the sanitizer runs (small: it is slow)

    @property
    def id(self) -> str:
        return f"{self.op}/{self.name}"

    @property
    def twin(self) -> WrongTwin:
        return WrongTwin(self.op, self.name)

    @property
    def text(self) -> str:
        """The wrong twin's source: the real twin with the bank's patch applied."""
        return self.twin.text()

    @property
    def op_name(self) -> str:
        return f"wt_{self.op}_{self.name}"

    @property
    def catchers(self) -> tuple[str, ...]:
        return (("check",) if self.caught else ()) + self.sanitizers

    @property
    def prototype(self) -> Path:
        return self.twin.prototype

    @property
    def real_twin(self) -> Path:
        return self.twin.real_twin

    @property
    def bug_line(self) -> int | None:
        """The line marked ``// BUG`` in the wrong twin, if any."""
        for number, text in enumerate(self.text.splitlines(), 1):
            if "// BUG" in text:
                return number
        return None


def rows(checks: tuple[tuple[str, str], ...], names: tuple[str, ...]):
    return tuple((impl, check, case) for case in names for impl, check in checks)


TWIN_FORWARD = (("twin", "forward"), ("numba", "vs twin"))
TWIN_BOTH = (("twin", "forward"), ("twin", "backward"), ("numba", "vs twin"))

SMALL_F32 = ("float32-n129",)

NON_EMPTY = ("n1", "n127", "n128", "n129", "n1000", "special")
TAIL_SIZES = ("n1", "n127", "n129")  # n % W != 0 for W = 4 (float32) and W = 2 (float64)
NARROW_ROWS = ("1x1", "3x127", "2x129")  # odd cols % W in both dtypes

# Expectations for the elementwise and softmax twins follow from their layout
# (cuda_src/vector_add.cu, sigmoid.cu, softmax.cu): 16-byte packs of W = 4 float32 or
# 2 float64 elements in a grid-stride loop, then a scalar tail of n % W elements; a grid
# of min(cdiv(packs, 256), 8 x SM count) blocks (one block for every case but float64-n1000,
# 2 blocks, and the 2^24 case, 1,056 on an H100); softmax: one block of 128 threads per
# row, thread t owning packs t, t + 128, ... and tail columns packs * W + t, ...
MISTAKES = (
    Mistake(
        "vector_add",
        "bound_off_by_one",
        # The tail loop's `i <= n` stores out[n] (thread n % W of block 0) in every
        # non-empty case, a multiple of W included: the guard after `out` changes and the
        # twin's forward fails with a GuardViolation (no `vs twin` row then).
        fails=(
            *rows((("twin", "forward"),), (*cases(*NON_EMPTY), "float32-n16777216")),
            ("twin", "forward", "float64-gradcheck"),
        ),
        passes=cases("n0"),
        sanitizers=("memcheck",),
        sanitize_cases=SMALL_F32,
    ),
    Mistake(
        "vector_add",
        "drops_tail",
        # Only the last n % W elements are lost: sizes that are a multiple of W pass.
        fails=rows(TWIN_FORWARD, (*cases(*TAIL_SIZES), "float64-gradcheck")),
        passes=(*cases("n0", "n128", "n1000", "special"), "float32-n16777216"),
    ),
    Mistake(
        "vector_add",
        "writes_nothing",
        fails=rows(TWIN_FORWARD, (*cases(*NON_EMPTY), "float32-n16777216", "float64-gradcheck")),
        passes=cases("n0"),
    ),
    Mistake(
        "sigmoid",
        "bound_off_by_one",
        fails=(
            *rows((("twin", "forward"),), (*cases(*NON_EMPTY), "float32-n16777216")),
            ("twin", "forward", "float64-gradcheck"),
        ),
        passes=cases("n0"),
        sanitizers=("memcheck",),
        sanitize_cases=SMALL_F32,
    ),
    Mistake(
        "sigmoid",
        "unstable_exp",
        fails=rows(TWIN_BOTH, cases("special")),
        passes=(
            *cases("n0", "n1", "n127", "n128", "n129", "n1000"),
            "float32-n16777216",
            "float64-gradcheck",
        ),
    ),
    Mistake(
        "sigmoid",
        "accumulates_gradient",
        fails=(
            *rows(
                (("twin", "backward"), ("numba", "vs twin")),
                (*cases(*NON_EMPTY), "float32-n16777216", "float64-gradcheck"),
            ),
            ("twin", "gradcheck", "float64-gradcheck"),
        ),
        passes=cases("n0"),
        sanitizers=("initcheck",),
        sanitize_cases=SMALL_F32,
    ),
    Mistake(
        "softmax",
        "float_accumulation",
        # Only float64 shows it, and only against the float64 prototype (rtol 1e-12) and in
        # gradcheck: against the reference the error stays under its absolute floor of 1e-7.
        # float32 is bit-identical to the real twin (float is T there).
        fails=(
            *rows(
                (("numba", "vs twin"),),
                cases("1x1", *SOFTMAX_WIDE, "special", "gradcheck", dtypes=("float64",)),
            ),
            ("twin", "gradcheck", "float64-gradcheck"),
        ),
        passes=(*cases("1x1", *SOFTMAX_WIDE, "special", dtypes=("float32",)), "float32-4096x4096"),
    ),
    Mistake(
        "softmax",
        "missing_syncthreads",
        # A race between warps on the shared partials: on a GPU only where several warps
        # load columns and the rows are many is a lost race certain; the small cases may
        # pass or fail (float32 rows up to 128 columns belong to warp 0 alone, so there the
        # idle warps practically always write first). racecheck sees it in every launch.
        fails=rows(TWIN_BOTH, ("float32-4096x4096",)),
        sanitizers=("racecheck",),
        sanitize_cases=("float32-2x1029",),  # a long row (softmax_fwd, shared memory)
    ),
    Mistake(
        "softmax",
        "swapped_row_col",
        # Rows stepped by `rows` instead of `cols`: every case with 1 < rows != cols fails
        # (the last (rows - 1) * (cols - rows) outputs are never written); 1x1 and the
        # square 4096x4096 have the right stride by coincidence.
        fails=(
            *rows(TWIN_BOTH, (*cases(*SOFTMAX_WIDE, "special"), "float64-gradcheck")),
            ("twin", "gradcheck", "float64-gradcheck"),
        ),
        passes=(*cases("1x1"), "float32-4096x4096"),
    ),
    Mistake(
        "softmax",
        "barrier_skipped_past_width",
        caught=False,  # not claimed: the values may come out right; synccheck is the catcher
        sanitizers=("synccheck",),
        sanitize_cases=("float32-2x1029",),  # a long row with a tail column
    ),
    Mistake(
        "softmax",
        "unrolled_sum_no_tail",
        # Widths whose cols % W is odd read one column past the row: a wrong max and sum for
        # the row (the next row's first element) or NaN (the last row meets the input's
        # guard); the backward gets the wrong saved output. Multiples of W pass.
        fails=rows(TWIN_BOTH, (*cases(*NARROW_ROWS), "float64-gradcheck")),
        passes=(*cases("4x128", "3x1000", "special"), "float32-4096x4096"),
        sanitizers=("memcheck",),
        sanitize_cases=("float32-3x127",),
    ),
    Mistake(
        "total",
        "global_accumulator_race",
        # 16,384 blocks adding to one element without atomics; racecheck sees shared
        # memory only, so values are the catcher.
        fails=(("twin", "forward", "float32-n4194304"), ("numba", "vs twin", "float32-n4194304")),
        passes=("float32-n1",),
    ),
    Mistake(
        "layernorm",
        "wb_skips_last_row",
        fails=(
            *rows(
                (("twin", "backward"), ("numba", "vs twin")),
                (
                    *cases("1x1", "3x127", "2x129", "4x1000", dtypes=HALF_FLOATS),
                    "float64-gradcheck",
                ),
            ),
            ("twin", "gradcheck", "float64-gradcheck"),
        ),
    ),
    Mistake(
        "matmul",
        "drops_partial_tile",
        fails=(
            *rows(
                TWIN_BOTH,
                (
                    *cases("1x1x1", "3x5x7", "17x20x9", dtypes=HALF_FLOATS),
                    "float32-130x12x68",
                    "float64-gradcheck",
                ),
            ),
            # not ("twin", "gradcheck"): forward and backward share the mistaken kernel, so the
            # twin is consistent with itself (H100 run); the reference rows catch it.
        ),
        # K = 1000 is a whole number of k-tiles (BK = 8) in the forward and the backward.
        passes=("float32-2x0x3", "float32-1000x1000x1000"),
    ),
    Mistake(
        "cumsum",
        "inclusive_offsets",
        fails=(
            *rows(
                TWIN_BOTH,
                (
                    *cases("1x1", "3x127", "2x129", "2x300", "1x1000", dtypes=HALF_FLOATS),
                    "float32-4096x4096",
                    "float64-gradcheck",
                ),
            ),
            # not ("twin", "gradcheck"): forward and backward share the mistaken kernel, so the
            # twin is consistent with itself (H100 run); the reference rows catch it.
        ),
    ),
    Mistake(
        "rmsnorm",
        "drops_weight",
        fails=rows(
            TWIN_FORWARD,
            (
                *cases(
                    "1x1", "3x127", "2x129", "4x1000", dtypes=("bfloat16", "float16", "float32")
                ),
                "bfloat16-4096x4096",
            ),
        ),
    ),
    Mistake(
        "add_rmsnorm",
        "drops_tail",
        # Only rows with cols % W != 0 have a tail (W = 8 half, 4 float32).
        fails=rows(
            TWIN_FORWARD, (*cases("1x1", "3x127", "2x129", dtypes=NORM_DTYPES), "float32-2x16390")
        ),
        passes=(*cases("4x1000", "37x64", dtypes=NORM_DTYPES), "float32-0x8", *NORM_LARGE),
    ),
    Mistake(
        "add_rmsnorm",
        "dw_without_rstd",
        fails=rows(
            (("twin", "backward"), ("numba", "vs twin")),
            (*cases(*NORM_SHAPES, dtypes=NORM_DTYPES), "float32-2x16390", *NORM_LARGE),
        ),
        passes=("float32-0x8",),
    ),
    Mistake(
        "add_rmsnorm",
        "h_without_residual",
        # 1x1 is not claimed: with one column hhat is about +-1 whatever h is. float32
        # reads the saved h, so only the half dtypes recompute it.
        fails=rows(
            (("twin", "backward"), ("numba", "vs twin")),
            (
                *cases(*NORM_SHAPES[1:], dtypes=NORM_DTYPES[1:]),
                "float16-150x41",
                "bfloat16-2x8203",
                "bfloat16-16384x4096",
            ),
        ),
        passes=(*cases(*NORM_SHAPES, dtypes=("float32",)), "float32-2x16390", "float32-0x8"),
    ),
    Mistake(
        "histogram",
        "inclusive_hi",
        # bfloat16 is coarse: with seed 3 one of n1000's values rounds to hi (H100 run).
        fails=rows(
            TWIN_FORWARD, (*cases("edges", dtypes=("float32", "bfloat16")), "bfloat16-n1000")
        ),
        passes=(
            *cases("n0", "n1", "n129", "n1000", dtypes=("float32", "float16", "float64")),
            *cases("n0", "n1", "n129", dtypes=("bfloat16",)),
        ),
    ),
    Mistake(
        "histogram",
        "racy_increment",
        # Only blocks race (counts per thread are private): one-block cases cannot fail.
        fails=rows(TWIN_FORWARD, ("float32-n16777216",)),
        passes=(
            *cases("n0", "n1", "n129", "n1000", dtypes=("float32", "float16", "bfloat16")),
            *cases("n0", "n1", "n129", dtypes=("float64",)),
        ),
    ),
)

needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA GPU visible to PyTorch: wrong twins only show on the twin backend",
)


def _sanitizer_missing() -> str | None:
    from portkit.sanitize.tools import find_sanitizer

    return None if find_sanitizer() else "compute-sanitizer is not installed here"


needs_sanitizer = pytest.mark.skipif(
    _sanitizer_missing() is not None, reason=_sanitizer_missing() or ""
)


def by_id(mistakes=MISTAKES):
    return pytest.mark.parametrize("mistake", mistakes, ids=lambda m: m.id)


def wrong_twin_project(make_project, mistake: Mistake) -> tuple[Path, str]:
    """A project with the real prototype of ``mistake.op`` and the wrong twin, both
    under the op name ``mistake.op_name``; returns (root, op name)."""
    name = mistake.op_name
    return make_project({name: (mistake.prototype.read_text(), mistake.text)}), name


FAIL_LINE = re.compile(r"^FAIL (\S+) / (\S+) / (.+?) / (\S+)$", re.M)


def failures(output: str, op_name: str) -> set[tuple[str, str, str]]:
    """(implementation, check, case) of every ``FAIL op / impl / check / case`` line."""
    return {
        (impl, check, case) for op, impl, check, case in FAIL_LINE.findall(output) if op == op_name
    }


# -- the bank itself (CPU) -----------------------------------------------------------------


def test_bank_holds_exactly_the_listed_mistakes():
    assert sorted(t.id for t in bank()) == sorted(m.id for m in MISTAKES)


@by_id()
def test_every_mistake_has_a_catcher(mistake):
    """No xfail: each wrong twin names what catches it, and check-caught ones say where."""
    from portkit.sanitize.tools import TOOLS

    assert mistake.catchers, f"{mistake.id}: nothing catches it"
    assert set(mistake.sanitizers) <= set(TOOLS)
    if mistake.caught:
        assert mistake.fails, "a mistake check catches lists the rows that fail"
    if mistake.sanitizers:
        assert mistake.sanitize_cases, "the sanitizer runs small cases; name them"
        assert mistake.bug_line is not None, "mark the wrong line with // BUG"


def test_the_bank_covers_the_four_new_kinds():
    tools = {tool for m in MISTAKES for tool in m.sanitizers}
    assert tools == {"memcheck", "racecheck", "initcheck", "synccheck"}
    assert any(m.op == "total" and m.caught for m in MISTAKES)  # a global race, by values


@by_id()
def test_wrong_twin_has_header_and_real_signatures(mistake, tmp_path):
    from portkit.backends.twin.source import parse_twin

    text = mistake.text  # the patch applies (or the test fails naming it)
    first = text.splitlines()[0]
    assert first.startswith(f"{HEADER}{mistake.id}: "), first
    assert "diff" in first, "the first line says what a diff should show"
    real_path = mistake.real_twin
    assert text != real_path.read_text()

    def signatures(path):
        return {name: (k.template_param, k.params) for name, k in parse_twin(path).items()}

    wrong_path = tmp_path / f"{mistake.op}.cu"
    wrong_path.write_text(text)
    assert signatures(wrong_path) == signatures(real_path)


@pytest.mark.compile
@by_id()
def test_wrong_twin_compiles(mistake, make_project, load_op):
    """The wrong twin builds as `portkit compile` builds a twin (NVRTC, every
    instantiation), so what `check` reports of it is its behaviour. The prototype is the
    real op's, which that op's own tests compile."""
    from portkit.build.compile_checks import check_twin
    from portkit.results import Outcome

    root, name = wrong_twin_project(make_project, mistake)
    config, op = load_op(root, name)
    row = check_twin(op, config)
    assert row is not None and row.status is Outcome.PASS, row and row.detail


# -- portkit check on a GPU ----------------------------------------------------------------


@pytest.mark.parametrize("mistake", [m for m in MISTAKES if m.caught], ids=lambda m: m.id)
@pytest.mark.gpu
@needs_gpu
def test_check_catches_wrong_twin(mistake, make_project, portkit_process):
    root, name = wrong_twin_project(make_project, mistake)
    args = ("check", name, "--backend", "numba", "--backend", "twin", "--no-compile")
    proc = portkit_process(root, *args, timeout=600)
    output = proc.stdout + proc.stderr
    failed = failures(output, name)
    assert proc.returncode == 1 and failed, output

    # The prototype is the real one: every failure is the twin's, or numba vs twin.
    assert all(impl == "twin" or check == "vs twin" for impl, check, _ in failed), failed
    missing = set(mistake.fails) - failed
    assert not missing, f"expected failures not reported: {sorted(missing)}\n{output}"
    unexpected = sorted(f for f in failed if f[2] in mistake.passes)
    assert not unexpected, f"cases this mistake cannot affect failed: {unexpected}\n{output}"
    # Each failing case is named with the command that reproduces it (rich wraps lines).
    flat = " ".join(output.split())
    for case in {case for _, _, case in failed}:
        assert f"portkit check {name} --case {case}" in flat, case


@pytest.mark.parametrize(
    "mistake, tool",
    [(m, t) for m in MISTAKES for t in m.sanitizers],
    ids=lambda v: v.id if isinstance(v, Mistake) else v,
)
@pytest.mark.gpu
@needs_gpu
@needs_sanitizer
def test_sanitizer_catches_wrong_twin(mistake, tool, make_project, portkit_process):
    """`portkit check --sanitize TOOL` reports the mistake in the twin, at the marked line
    (racecheck: one of the two accesses is in the twin), with block and thread."""
    import json

    root, name = wrong_twin_project(make_project, mistake)
    cases = [arg for case in mistake.sanitize_cases for arg in ("--case", case)]
    proc = portkit_process(root, "check", name, "--sanitize", tool, "--json", *cases, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (run,) = json.loads(proc.stdout)["sanitizer"]
    assert run["tool"] == tool and run["status"] == "errors", run
    ours = [f for f in run["findings"] if f["op"] == name and f["implementation"] == "twin"]
    assert ours, run["findings"]
    assert all(f["file"].endswith(f"{name}.cu") for f in ours)
    assert all(f["block"] for f in ours)
    if tool != "racecheck":  # racecheck's hazards sit in block_reduce, either side
        assert mistake.bug_line in {f["line"] for f in ours}, ours
        assert all(f["thread"] for f in ours)


SANITIZED_CASES = ("float32-n129", "float64-n129", "float32-3x127", "float32-n1000")


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "initcheck", "synccheck"])
@pytest.mark.gpu
@needs_gpu
@needs_sanitizer
def test_good_twins_and_prototypes_are_clean(tool, make_project, portkit_process):
    """No false positives: every real op (and the bank's own) under each tool."""
    import json

    ops = {
        path.stem: (path.read_text(), (REPO / "cuda_src" / f"{path.stem}.cu").read_text())
        for path in sorted((REPO / "prototypes").glob("*.py"))
        if not path.name.startswith("_")
    }
    ops["total"] = (
        (OPS / "total.py").read_text(),
        (OPS / "total.cu").read_text(),
    )
    root = make_project(ops)
    cases = [arg for case in SANITIZED_CASES for arg in ("--case", case)]
    proc = portkit_process(
        root, "check", "--all", "--sanitize", tool, "--json", *cases, timeout=600
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    (run,) = json.loads(proc.stdout)["sanitizer"]
    assert run["status"] == "clean" and not [f for f in run["findings"] if f["op"]], run


# op -> (kernel with the wrong bound, its number of input tensors); it takes (inputs, out, n).
GUARDED = {"vector_add": ("vector_add", 2), "sigmoid": ("sigmoid_fwd", 1)}


@pytest.mark.parametrize(
    "mistake", [pytest.param(m, id=m.id) for m in MISTAKES if m.name == "bound_off_by_one"]
)
@pytest.mark.gpu
@needs_gpu
def test_bound_off_by_one_writes_past_the_end(mistake, make_project, load_op):
    """What the guard zones see, shown without them: the kernel with the wrong bound,
    launched on views into longer buffers, writes the element after the output; the real
    twin's leaves it alone. (One block of 256 threads, n = 129: thread 1's tail index
    reaches n in float32 and float64 alike.)"""
    from portkit.backends import create

    kernel, inputs = GUARDED[mistake.op]
    n, guard = 129, 12345.0
    wrong_root, name = wrong_twin_project(make_project, mistake)
    prototype = (REPO / "prototypes" / f"{mistake.op}.py").read_text()
    real_twin = (REPO / "cuda_src" / f"{mistake.op}.cu").read_text()
    real_root = make_project({f"{name}_real": (prototype, real_twin)})
    written = {}
    for label, root, op_name in (("wrong", wrong_root, name), ("real", real_root, name + "_real")):
        config, op = load_op(root, op_name)
        k = create("twin", config).kernels(op)
        buffers = [torch.zeros(n + 1, device="cuda") for _ in range(inputs)]
        out = torch.full((n + 1,), guard, device="cuda")
        getattr(k, kernel)[1, 256](*(b[:n] for b in buffers), out[:n], n)
        torch.cuda.synchronize()
        written[label] = float(out[n])
    assert written["real"] == guard
    assert written["wrong"] != guard, "the wrong twin did not write past the end"


# -- portkit diff on a GPU -----------------------------------------------------------------


@dataclass(frozen=True)
class DiffExpectation:
    """What ``portkit diff`` must say about one wrong twin on one case: the first
    mismatching element, the (block, thread) that wrote it in the prototype, and a
    phrase of the pattern that points at the mistake."""

    mistake: str
    args: tuple[str, ...]
    index: tuple[int, ...] | None  # None: any, but its writer must follow the layout
    block_thread: tuple[tuple[int, int, int], tuple[int, int, int]] | None
    pattern: str


DIFFS = (
    DiffExpectation(
        "vector_add/drops_tail",
        ("--case", "float32-n127"),
        (124,),
        ((0, 0, 0), (0, 0, 0)),  # the prototype's tail: element packs * 4 + 0, thread 0
        "only the last 3 elements",
    ),
    DiffExpectation(
        "vector_add/writes_nothing",
        ("--case", "float32-n1000"),
        (0,),
        ((0, 0, 0), (0, 0, 0)),
        "the twin wrote nothing",
    ),
    DiffExpectation(
        "sigmoid/unstable_exp",
        ("--case", "float32-special"),
        None,
        None,
        "gives NaN where the other side is finite",
    ),
    DiffExpectation(
        "softmax/float_accumulation",
        ("--case", "float64-3x1000"),
        None,
        None,
        "precision difference",
    ),
    # No pattern is claimed for softmax/missing_syncthreads (a race between warps: which
    # rows lose it, if any in a 3-row case, changes between runs) nor for
    # softmax/swapped_row_col (its blocks write overlapping output, so the mix of wrong
    # values depends on block order; on the CPU twin `portkit diff` says "scattered").
)
THREADS_OF = {"vector_add": 256, "sigmoid": 256, "softmax": 128}


def layout_writer(op: str, index: list[int], shape: list[int], itemsize: int) -> tuple[int, int]:
    """(block, thread) that writes ``index`` in the real layout: packs of 16 bytes, thread
    t owning packs t, t + stride, ... then tail elements packs * W + t (the bank's diff
    cases are small enough that the grid-stride loop makes one pass)."""
    width, threads = 16 // itemsize, THREADS_OF[op]
    position, length = index[-1], shape[-1]
    packs = length // width
    start = position // width if position < packs * width else position - packs * width
    if len(index) == 1:
        return start // threads, start % threads
    return index[0], start % threads


@pytest.mark.parametrize("expected", DIFFS, ids=lambda d: d.mistake)
@pytest.mark.gpu
@needs_gpu
def test_diff_names_element_thread_and_pattern(expected, make_project, portkit_process):
    import json

    (mistake,) = [m for m in MISTAKES if m.id == expected.mistake]
    root, name = wrong_twin_project(make_project, mistake)
    proc = portkit_process(root, "diff", name, *expected.args, "--json", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    (case,) = report["cases"]
    assert (case["prototype"], case["other"]) == ("numba", "twin")
    output = case["tensors"][0]
    assert output["name"] == "output 0" and output["mismatches"] > 0
    first = output["first"][0]
    writer = first["writer"]
    assert writer is not None, first
    if expected.index is not None:
        assert tuple(first["index"]) == expected.index
    if expected.block_thread is not None:
        assert (tuple(writer["block"]), tuple(writer["thread"])) == expected.block_thread
    # The writer was recorded by the simulator; it must fit the op's launch layout.
    itemsize = 8 if expected.args[-1].startswith("float64") else 4
    assert (writer["block"][0], writer["thread"][0]) == layout_writer(
        mistake.op, first["index"], output["shape"], itemsize
    )
    assert any(expected.pattern in p for p in output["patterns"]), output["patterns"]
