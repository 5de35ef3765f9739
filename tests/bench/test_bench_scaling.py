"""Shapes the op did not declare (``--shape``, ``--size``, the GPU-sized scaling of an op
without bench cases), on a CPU: the rule of ``portkit.bench.scaling``, and the CLI's
one-line errors. Nothing here runs a kernel, except the plan the CLI hands the bench,
which a fake receives."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from portkit.bench.cases import Wanted, bench_cases
from portkit.bench.scaling import (
    AUTO_BYTES,
    at_shapes,
    at_size,
    case_bytes,
    case_origin,
    gpu_sized,
    parse_shapes,
    parse_size,
    template,
)
from portkit.errors import PortkitError
from portkit.project.cases import Case
from tests.user_ops.op_files import sources as user_op

REPO = Path(__file__).resolve().parents[2]


def fake_op(*cases: Case, bench: tuple = (), dtypes=("float32", "bfloat16")):
    """What the rule reads of an op: its name, cases, bench cases and dtypes."""

    def refused(names):
        bad = [d for d in names if d not in (*dtypes, "int64")]
        return f"input is {bad[0]}, a dtype the op does not accept" if bad else None

    definition = SimpleNamespace(cases=cases, bench=bench, refused_dtype=refused)
    return SimpleNamespace(name="fake", definition=definition)


def norm_cases(*sizes: tuple[int, int]) -> tuple[Case, ...]:
    """x (rows, cols) and a weight (cols,), as layernorm's cases are."""
    return tuple(Case(f"float32-{r}x{c}", ((r, c), (c,))) for r, c in sizes)


# -- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shapes"),
    [
        ("4096x4096", ((4096, 4096),)),
        ("67108864", ((67108864,),)),
        ("8X1024, 1024x64", ((8, 1024), (1024, 64))),
    ],
)
def test_parse_shapes(text, shapes):
    assert parse_shapes(text) == shapes


@pytest.mark.parametrize("text", ["", "4096x", "x4", "4096*4096", "4096x0", "2^20x2", "a,b"])
def test_bad_shapes_are_one_line_errors(text):
    with pytest.raises(PortkitError, match="--shape"):
        parse_shapes(text)


@pytest.mark.parametrize(("text", "size"), [("67108864", 1 << 26), ("2^26", 1 << 26), ("1", 1)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "-5", "2^41", "1e6", "lots", "2^"])
def test_bad_sizes_are_one_line_errors(text):
    with pytest.raises(PortkitError, match="--size is a number of elements"):
        parse_size(text)


# -- the rule ------------------------------------------------------------------------------


def test_other_inputs_follow_the_dimension_they_equal_in_every_case():
    # 4096x4096: the weight equals both dimensions there, only the columns elsewhere
    op = fake_op(*norm_cases((3, 127), (2, 129), (4096, 4096)))
    case = at_shapes(op, ((8192, 1024),))
    assert case.shapes == ((8192, 1024), (1024,))
    assert (case.name, case_origin(case)) == ("float32-8192x1024", "float32-4096x4096")
    grown = at_size(op, 1 << 26)
    assert grown.shapes == ((16384, 4096), (4096,))
    assert at_size(op, (1 << 26) + 1).shapes[0] == (16385, 4096)  # whole rows, rounded up


def test_a_dimension_that_follows_none_keeps_its_size():
    # a (rows, k) and a kernel (5,) that equals no dimension of a
    op = fake_op(Case("a", ((3, 7), (5,))), Case("b", ((6, 9), (5,))))
    assert at_shapes(op, ((100, 200),)).shapes == ((100, 200), (5,))


def test_several_shapes_give_the_first_inputs_theirs():
    matmul = fake_op(Case("a", ((3, 5), (5, 7))), Case("b", ((2, 4), (4, 6))))
    assert at_shapes(matmul, ((64, 32),)).shapes == ((64, 32), (32, 7))  # b's N: its own
    assert at_shapes(matmul, ((64, 32), (32, 16))).shapes == ((64, 32), (32, 16))
    with pytest.raises(PortkitError, match="gives 3 shapes; op fake takes 2 inputs"):
        at_shapes(matmul, ((1,), (1,), (1,)))


def test_a_dimension_two_given_dimensions_explain_is_an_error_unless_they_agree():
    square = fake_op(*norm_cases((4, 4), (16, 16)))
    assert at_shapes(square, ((32, 32),)).shapes == ((32, 32), (32,))  # no matter which
    with pytest.raises(PortkitError, match=r"input 1's dimension 0 equals input 0's dimension 0"):
        at_shapes(square, ((32, 64),))
    # giving the weight's shape too settles it
    assert at_shapes(square, ((32, 64), (64,))).shapes == ((32, 64), (64,))
    # the automatic scaling cannot tell either: it times the case as declared
    assert gpu_sized(square).name == "float32-16x16"


def test_the_template_is_the_largest_case_of_the_ranks_given():
    op = fake_op(
        Case("v", ((1000,),)),
        Case("m", ((8, 9),)),
        Case("m64", ((20, 30),), "float64"),
        Case("m32", ((20, 30),)),
    )
    assert template(op).name == "v"
    assert template(op, [2]).name == "m32"  # as large as m64; float32 first
    assert template(op, [2], "float64").name == "m64"
    with pytest.raises(
        PortkitError, match="no case whose first inputs are 3-D; its largest case.s inputs are 1000"
    ):
        template(op, [3])


def test_dtype_retypes_the_float_inputs_and_is_checked():
    op = fake_op(*norm_cases((3, 127), (4096, 4096)))
    case = at_size(op, 1 << 26, "bfloat16")
    assert (case.dtype, case.dtypes, case.shapes[0]) == (
        "bfloat16",
        ("bfloat16", "bfloat16"),
        (16384, 4096),
    )
    with pytest.raises(PortkitError, match="--dtype float16: input is float16"):
        at_size(op, 1 << 26, "float16")
    with pytest.raises(PortkitError, match="--dtype 'half' is not one of"):
        at_size(op, 1 << 26, "half")


def test_gpu_sized_doubles_the_rows_until_the_inputs_reach_auto_bytes():
    op = fake_op(*norm_cases((3, 127), (64, 1000)))
    case = gpu_sized(op)
    assert case.shapes == ((64 << 11, 1000), (1000,))  # 64 * 2^11 rows of 4000 bytes
    assert case_bytes(case) >= AUTO_BYTES > case_bytes(case) - 64 * 1024 * 4000
    assert case_origin(case) == "float32-64x1000" and not case.large and not case.gpu_only
    big = fake_op(Case("huge", ((1 << 27,),)))
    assert gpu_sized(big).name == "huge" and case_origin(gpu_sized(big)) is None


def test_cross_entropy_scales_its_targets_and_their_range(make_project, load_op):
    """The user op with an int64 target: the targets follow the rows, their upper bound
    the columns (class indices), in every case of the op."""
    name = "cross_entropy"
    prototype, twin = user_op(name)
    _, op = load_op(make_project({name: (prototype, twin)}), name)
    (case,) = bench_cases(op)
    rows = case.shapes[0][0]
    assert case.shapes == ((rows, 129), (rows,)) and case.int_range == (0, 129)
    assert case_origin(case) == "rows5x129" and case.dtypes == ("float32", "int64")
    assert case_bytes(case) >= AUTO_BYTES
    wide = at_shapes(op, ((1024, 50000),))
    assert wide.shapes == ((1024, 50000), (1024,)) and wide.int_range == (0, 50000)


def test_bench_cases_take_the_command_line_first():
    op = fake_op(*norm_cases((3, 127)), bench=norm_cases((4096, 4096)))
    assert [c.name for c in bench_cases(op)] == ["float32-4096x4096"]
    assert bench_cases(op, wanted=Wanted(shapes=((8, 8),)))[0].shapes == ((8, 8), (8,))
    assert bench_cases(op, wanted=Wanted(size=1 << 20))[0].shapes == ((256, 4096), (4096,))


# -- the command ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("softmax", "--shape", "4096*4096"), "--shape is like 4096x4096"),
        (("softmax", "--size", "lots"), "--size is a number of elements from 1 to 2^40"),
        (("softmax", "--shape", "8x8", "--size", "64"), "--shape and --size both choose"),
        (("softmax", "--case", "float32-4096x4096", "--shape", "8x8"), "--case and --shape"),
        (("softmax", "--dtype", "bfloat16"), "--dtype goes with --shape or --size"),
        (("softmax", "--shape", "8x8x8"), "op softmax has no case whose first inputs"),
        (("sigmoid", "--size", "64", "--dtype", "int8"), "op sigmoid: --dtype int8"),
    ],
)
def test_bad_shape_options_are_one_line_errors(cli, args, message):
    result = cli(REPO, "bench", *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert "Traceback" not in result.output


def test_shape_reaches_the_bench(cli, monkeypatch):
    """What --shape plans, seen by a fake in place of the GPU run."""
    from portkit.bench import session

    planned = []

    def fake_run(plan, *args, **kwargs):
        planned.extend(plan)
        raise PortkitError("stop here")

    monkeypatch.setattr(session, "require_gpu", lambda: None)
    monkeypatch.setattr(session, "run_bench", fake_run)
    result = cli(REPO, "bench", "layernorm", "--shape", "16384x4096", "--dtype", "bfloat16")
    assert result.exit_code == 2 and "stop here" in result.output
    ((op, (case,)),) = planned
    assert op.name == "layernorm" and case.dtype == "bfloat16"
    assert case.shapes == ((16384, 4096), (4096,), (4096,))
