"""The fast loop says what numba says: a prototype numba's CUDA compiler rejects for its
launch's argument types is red in ``portkit sim``, ``check --quick``, ``watch`` (every
mode) and the notebook API, as one line naming the kernel, file:line and numba's reason;
the verdict is kept by content, so a warm loop compiles nothing."""

from __future__ import annotations

import pytest

import portkit
from portkit.api.sessions import forget
from portkit.backends import numba_types
from portkit.project.session import Session
from portkit.results import Outcome
from portkit.watch.engine import Engine

HALF = (
    'portkit.cases.elementwise(sizes=(129,), large=None, special=(), dtypes=("float16",), '
    "gradcheck=False)"
)
# numba-cuda has no atomic add on float16 arrays ("No match"); the simulator has one.
HALF_ATOMIC = "out[i] = x[i] * 2.0\ncuda.atomic.add(out, i, x[i] - x[i])"
LIST = "a = [1.0, 2.0]\na.append(x[i])\nout[i] = a[2] * 2.0"
NUMPY = "out[i] = x[i] * 2.0 + np.linalg.norm(x) * 0.0"


@pytest.fixture(autouse=True)
def fresh():
    forget()
    numba_types.forget()
    yield
    forget()
    numba_types.forget()


@pytest.fixture
def rejected(make_project, sources, monkeypatch):
    """A project whose three ops numba rejects (and the simulator would pass)."""
    numpy_op = sources.unary_op("nt_numpy", NUMPY, cases=sources.ONE_CASE)
    root = make_project(
        {
            "nt_half": (
                sources.unary_op(
                    "nt_half", HALF_ATOMIC, cases=HALF, op_options='dtypes=("float16",)'
                ),
                None,
            ),
            "nt_list": (
                sources.unary_op("nt_list", LIST, cases=sources.ONE_CASE),
                sources.unary_twin("nt_list"),  # watch --diff has a side to diff against
            ),
            "nt_numpy": ("import numpy as np\n" + numpy_op, None),
        }
    )
    monkeypatch.chdir(root)
    return root


EXPECTED = {
    "nt_half": ("nt_half.py:16)", "no implementation of atomic.add for add(array(float16"),
    "nt_list": ("nt_list.py:15)", "int64): a Python list"),
    "nt_numpy": ("nt_numpy.py:16)", "no implementation of norm for norm(array(float32, 1d, C))"),
}
# Without SciPy numba refuses np.linalg with an ImportError that names no line: the kernel's
# `def` line (below its decorator) is given instead. Either is numba's rejection (a GPU
# refuses it alike).
WITHOUT_SCIPY = ("nt_numpy.py:13)", "(ImportError: scipy 0.16+ is required for linear algebra)")


def _one_line(text: str, op: str) -> None:
    where, reason = EXPECTED[op]
    joined = " ".join(text.split())
    if op == "nt_numpy" and WITHOUT_SCIPY[1] in joined:
        where, reason = WITHOUT_SCIPY
    assert f"kernel {op}_fwd (" in joined and where in joined, text
    assert "numba cannot compile it for sm_90 with arguments (" in joined, text
    assert reason in joined, text
    assert "Traceback" not in text


@pytest.mark.parametrize("op", sorted(EXPECTED))
def test_sim_is_red_with_numbas_reason(cli, rejected, op):
    case = ["--case", "float16-n129"] if op == "nt_half" else []
    result = cli(rejected, "sim", op, *case)
    assert result.exit_code == 1, result.output
    _one_line(result.output, op)


def test_check_quick_is_red(cli, rejected):
    result = cli(rejected, "check", "nt_half", "--quick", "--backend", "sim", "--no-compile")
    assert result.exit_code == 1, result.output
    _one_line(result.output, "nt_half")


def test_notebook_sim_and_quick_check_are_red(rejected):
    for report in (portkit.sim("nt_list"), portkit.check("nt_half", quick=True, backends="sim")):
        assert not report.passed
        (failed, *_) = report.failed
        assert failed.status is Outcome.FAIL
    _one_line(portkit.sim("nt_list").failed[0].detail, "nt_list")
    _one_line(portkit.check("nt_half", quick=True, backends="sim").failed[0].detail, "nt_half")


@pytest.mark.parametrize("mode", ["sim", "check", "diff"])
def test_watch_modes_are_red(rejected, mode):
    backends = ["sim"] if mode == "check" else []
    engine = Engine(Session.from_environment(rejected), ["nt_list"], mode, backends=backends)
    verdict = engine.run().verdicts["nt_list"]
    assert verdict.status is Outcome.FAIL, (verdict.results, verdict.diffs)
    (problem, *_) = verdict.problems
    _one_line(problem.text, "nt_list")


def test_a_warm_loop_compiles_nothing_and_the_disk_cache_answers_a_new_process(
    make_project, sources, monkeypatch, ptx_compiles
):
    root = make_project({"nt_ok": (sources.unary_op("nt_ok", cases=sources.ONE_CASE), None)})
    monkeypatch.chdir(root)
    compiled = ptx_compiles
    assert portkit.sim("nt_ok").passed
    assert compiled == ["nt_ok_fwd"]
    assert portkit.sim("nt_ok").passed and portkit.sim("nt_ok").passed
    assert compiled == ["nt_ok_fwd"]  # warm: the verdict in memory
    numba_types.forget()  # as a new process would start
    forget()
    assert portkit.sim("nt_ok").passed
    assert compiled == ["nt_ok_fwd"]  # the PTX on disk, in the project's cache folder
    assert list((root / ".portkit-cache").rglob("nt_ok_fwd-*.ptx"))


def test_an_edit_is_checked_again(make_project, sources, monkeypatch):
    root = make_project({"nt_edit": (sources.unary_op("nt_edit", cases=sources.ONE_CASE), None)})
    monkeypatch.chdir(root)
    assert portkit.sim("nt_edit").passed
    path = root / "prototypes" / "nt_edit.py"
    listed = LIST.replace("\n", "\n        ")
    path.write_text(path.read_text().replace("out[i] = x[i] * 2.0", listed))
    report = portkit.sim("nt_edit")
    assert not report.passed
    assert "int64): a Python list" in report.failed[0].detail


def test_rejection_is_one_line_from_numbas_message():
    def kernel(out):
        cuda.atomic.add(out, 0, 1.0)  # noqa: F821

    from numba.core.errors import TypingError

    message = (
        "\x1b[1mNo implementation of function Function(<class 'numba.cuda.stubs.atomic.add'>) "
        "found for signature:\n \n >>> add(array(float16, 1d, C), Literal[int](0), float16)\n"
        " \nThere are 2 candidate implementations:\n  No match.\x1b[0m\n"
    )
    line = numba_types.rejection("k", kernel, "array(float16, 1d, C)", TypingError(message))
    assert "\n" not in line and "\x1b" not in line
    assert line.startswith("kernel k (")
    assert f"test_numba_types.py:{kernel.__code__.co_firstlineno + 1})" in line
    assert line.endswith(
        "no implementation of atomic.add for add(array(float16, 1d, C), Literal[int](0), "
        "float16) (no match)"
    )
