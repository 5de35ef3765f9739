"""Every wrong twin of the bank (tests/check/wrong_twins) is caught on a CPU by the
``twin-cpu`` backend: by its values (against the reference or the simulated prototype),
by AddressSanitizer (the ``i <= n`` bounds, with file:line), or by the schedule check
(the missing ``__syncthreads``, naming the tensor and index). One case per mistake keeps
this under a minute; ``portkit check`` runs them all (docs/twin-cpu.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from portkit.backends.twin_cpu.build import find_compiler
from tests.check.wrong_twin_bank import WrongTwin, bank, wrong_twin_text

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler on this machine")

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CpuCatch:
    mistake: str  # op/name in the bank
    case: str
    fails: tuple[tuple[str, str], ...]  # (implementation, check) rows that must fail
    says: tuple[str, ...] = ()  # phrases the failing twin-cpu check must contain
    caught: bool = True  # False: a CPU cannot see it (docs/twin-cpu.md says why)

    @property
    def op(self) -> str:
        return self.mistake.split("/")[0]

    @property
    def prototype(self) -> Path:
        """The op's prototype: the repository's, or a bank-only op's in ``_ops/``."""
        return WrongTwin(self.op, self.mistake.split("/")[1]).prototype


def _bound_line(mistake: str) -> int:
    """The line of the `i <= n` test in a wrong twin (the store is on it or just after)."""
    lines = wrong_twin_text(mistake).splitlines()
    return next(
        n
        for n, text in enumerate(lines, 1)
        if "i <= n" in text and not text.lstrip().startswith("//")
    )


TWIN_FORWARD = (("twin-cpu", "forward"), ("sim", "vs twin-cpu"))
CATCHES = (
    CpuCatch(
        "vector_add/bound_off_by_one",
        "float32-n129",  # the tail starts at 128: thread 1 reaches i = n and reads a[n]
        (("twin-cpu", "forward"),),
        ("heap-buffer-overflow", "past the end of a", "thread (1,0,0)"),
    ),
    CpuCatch(
        "sigmoid/bound_off_by_one",
        "float64-n129",  # one block; packs of 2 end at 128, thread 1's tail index is n
        (("twin-cpu", "forward"),),
        ("heap-buffer-overflow", "past the end of x", "thread (1,0,0)"),
    ),
    CpuCatch("vector_add/drops_tail", "float32-n129", TWIN_FORWARD),
    CpuCatch("vector_add/writes_nothing", "float32-n129", TWIN_FORWARD),
    CpuCatch(
        "sigmoid/unstable_exp",
        "float32-special",
        (*TWIN_FORWARD, ("twin-cpu", "backward")),
    ),
    # Only the float64 prototype (twin tolerance) sees the float accumulation.
    CpuCatch("softmax/float_accumulation", "float64-3x127", (("sim", "vs twin-cpu"),)),
    CpuCatch(
        "softmax/missing_syncthreads",
        "float32-2x1029",  # a long row: rows up to 1024 float32 columns share no memory
        (("twin-cpu", "forward"),),
        ("order-dependent", "out (argument 1, 2x1029 float32) differs at [0, 0]"),
    ),
    CpuCatch(
        "softmax/swapped_row_col",
        "float32-3x127",
        # the rows of one block (short rows: several a block) write overlapping output
        (("twin-cpu", "forward"),),
        ("order-dependent",),
    ),
    CpuCatch("sigmoid/accumulates_gradient", "float32-n129", (("twin-cpu", "backward"),)),
    CpuCatch(
        "softmax/barrier_skipped_past_width",
        "float32-2x1029",  # thread 0 alone has a tail column
        (("twin-cpu", "forward"),),
        ("divergent __syncthreads",),
    ),
    CpuCatch(
        "softmax/unrolled_sum_no_tail",
        "float32-3x127",
        (("twin-cpu", "forward"),),
        ("heap-buffer-overflow", "past the end of x"),
    ),
    # Blocks run one after another on a CPU, so a read-modify-write of global memory
    # racing between blocks always sees the previous block's result: not catchable here.
    CpuCatch("total/global_accumulator_race", "float64-n4097", (), caught=False),
    CpuCatch("cumsum/inclusive_offsets", "float32-3x127", TWIN_FORWARD),
    CpuCatch("layernorm/wb_skips_last_row", "float32-3x127", (("twin-cpu", "backward"),)),
    CpuCatch("rmsnorm/drops_weight", "float32-3x127", TWIN_FORWARD),
    CpuCatch("add_rmsnorm/drops_tail", "bfloat16-3x127", TWIN_FORWARD),
    CpuCatch("add_rmsnorm/dw_without_rstd", "float32-3x127", (("twin-cpu", "backward"),)),
    CpuCatch("add_rmsnorm/h_without_residual", "bfloat16-37x64", (("twin-cpu", "backward"),)),
    CpuCatch("matmul/drops_partial_tile", "float32-17x20x9", TWIN_FORWARD),
    CpuCatch("histogram/inclusive_hi", "float32-edges", TWIN_FORWARD),
    # `counts[b] += 1` without atomicAdd: no fiber switch can fall between the read and
    # the write, so every increment lands on a CPU. Only a GPU shows lost increments.
    CpuCatch("histogram/racy_increment", "float32-n1000", (), caught=False),
)
PRESENT = [c for c in CATCHES if c.mistake in {t.id for t in bank()}]


def test_every_wrong_twin_of_the_bank_has_a_cpu_catch():
    assert {t.id for t in bank()} <= {c.mistake for c in CATCHES}


@pytest.mark.parametrize("catch", PRESENT, ids=lambda c: c.mistake)
def test_cpu_twin_catches_wrong_twin(catch, make_project, load_op):
    from portkit.backends import create
    from portkit.checking.harness import run_case

    name = "cpu_" + catch.mistake.replace("/", "_")
    prototype = catch.prototype.read_text()
    root = make_project({name: (prototype, wrong_twin_text(catch.mistake))})
    config, op = load_op(root, name)
    (case,) = [c for c in op.definition.cases if c.name == catch.case]
    results = run_case(op, case, [create("sim", config), create("twin-cpu", config)])
    failed = {(r.backend, r.check) for r in results if r.failed}
    if not catch.caught:
        assert not failed, results  # if this starts failing, the CPU learnt to see it
        return
    assert set(catch.fails) <= failed, results
    # The prototype is the real one: only the twin, or the comparison with it, fails.
    assert all(b == "twin-cpu" or c == "vs twin-cpu" for b, c in failed), failed
    if catch.says:
        (forward,) = [r for r in results if (r.backend, r.check) == catch.fails[0]]
        for phrase in catch.says:
            assert phrase in forward.detail, forward.detail
        if "bound_off_by_one" in catch.mistake:
            line = _bound_line(catch.mistake)
            where = re.search(rf"{name}\.cu:(\d+)", forward.detail)
            assert where and int(where.group(1)) in (line, line + 1), forward.detail


def test_the_real_twins_pass_the_same_cases(load_op):
    """The cases above are not failing for some other reason: the real twins pass them."""
    from portkit.backends import create
    from portkit.checking.harness import run_case

    config, _ = load_op(REPO, "vector_add")
    for op_name, case_name in (("vector_add", "float32-n129"), ("softmax", "float32-3x127")):
        _, op = load_op(REPO, op_name)
        (case,) = [c for c in op.definition.cases if c.name == case_name]
        results = run_case(op, case, [create("sim", config), create("twin-cpu", config)])
        assert not [r for r in results if r.failed], results
        # a tuned op's rows name their configuration: "sim (defaults)", "twin-cpu (threads=64)"
        assert {(r.backend.split(" (")[0], r.check) for r in results} >= {
            ("twin-cpu", "forward"),
            ("sim", "vs twin-cpu"),
        }
