"""portkit.lint.numba_ir: float64 arithmetic and int64 index math found in numba's typed IR.

Kernels are planted in a module written to a temporary folder and imported from
there, so their source lines are real; each line a test expects a finding on (or
none on) carries a ``# at:<name>`` marker. Nothing here needs a GPU.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from numba import types

from portkit.build.finding import Severity
from portkit.lint.numba_ir import (
    FLOAT64,
    INT64_INDEX,
    IRFinding,
    float64_findings,
    has_float64_input,
    int64_index_findings,
    ir_findings,
)

REPO = Path(__file__).resolve().parents[2]

F32 = types.float32[::1]
F64 = types.float64[::1]
SIG32 = (F32, F32, types.int64)  # (x, out, n)
SIG64 = (F64, F64, types.int64)

KERNELS = """\
import math

import numba
from numba import cuda


@cuda.jit
def literal_float(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * 2.5  # at:literal_float


@cuda.jit
def typed_constant(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * numba.float32(2.5)


@cuda.jit
def int_literal(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = 1 + x[i]  # at:int_literal


@cuda.jit
def typed_int(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = numba.float32(1) + x[i]


@cuda.jit
def comparison_only(x, out, n):
    i = cuda.grid(1)
    if i < n and x[i] > 0.5:  # at:comparison
        out[i] = x[i]


@cuda.jit
def math_inf(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = max(x[i], -math.inf)  # at:math_inf


@cuda.jit
def int_division(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = i / n  # at:int_division


@cuda.jit(device=True)
def halve(v):
    w = v + v
    return w * 0.25  # at:halve


@cuda.jit
def calls_device(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = halve(x[i])  # at:calls_device


@cuda.jit
def exp_plain(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = math.exp(x[i])


@cuda.jit
def exp_scaled(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = math.exp(x[i] * 0.5)  # at:exp_scaled


@cuda.jit
def index_in_loop(x, out, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    for c in range(tid, cols, 128):
        out[row * cols + c] = x[c]  # at:index_in_loop


@cuda.jit
def index_outside_loop(x, out, cols):
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    out[row * cols + tid] = x[tid]  # at:index_outside_loop


@cuda.jit
def loop_without_index_math(x, out, cols):
    tid = cuda.threadIdx.x
    for c in range(tid, cols, 128):
        out[c] = x[c]
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted kernels' module, and ``line(name)``: the line marked ``# at:name``."""
    path = tmp_path_factory.mktemp("lint_ir") / "planted_kernels.py"
    path.write_text(KERNELS)
    name = "portkit_test_lint_ir_planted"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        lines = KERNELS.splitlines()

        def line(marker: str) -> int:
            (found,) = [n for n, text in enumerate(lines, 1) if f"# at:{marker}" in text]
            return found

        module.line = line
        module.path = str(path)
        yield module
    finally:
        del sys.modules[name]


def lint(module, kernel: str, signature=SIG32) -> list[IRFinding]:
    return ir_findings(kernel, getattr(module, kernel), signature)


def only(findings: list[IRFinding], kind: str) -> list[IRFinding]:
    return [f for f in findings if f.kind == kind]


def test_python_float_literal_is_flagged_at_its_line(planted):
    findings = lint(planted, "literal_float")
    assert len(findings) == 1
    (f,) = findings
    assert (f.kind, f.severity) == (FLOAT64, Severity.ERROR)
    assert (f.kernel, f.function) == ("literal_float", "literal_float")
    assert (f.path, f.line) == (planted.path, planted.line("literal_float"))
    assert f.source == "out[i] = x[i] * 2.5  # at:literal_float"
    assert f.message == "float32 * float64 -> float64 (Python float literal 2.5)"
    assert f.fix == "use a typed constant: numba.float32(2.5)"


def test_typed_constants_are_not_flagged(planted):
    assert lint(planted, "typed_constant") == []
    assert lint(planted, "typed_int") == []


def test_int_literal_meeting_float32_is_flagged(planted):
    (f,) = lint(planted, "int_literal")
    assert f.line == planted.line("int_literal")
    assert f.message.startswith("int64 + float32 -> float64")
    assert "int literal 1" in f.message
    assert f.fix == "write numba.float32(1)"


def test_comparisons_are_not_arithmetic(planted):
    assert lint(planted, "comparison_only") == []


def test_math_inf_is_flagged(planted):
    (f,) = lint(planted, "math_inf")
    assert f.line == planted.line("math_inf")
    assert "math.inf is a float64 constant" in f.message
    assert "numba.float32(math.inf)" in f.fix


def test_true_division_of_integers_is_flagged(planted):
    (f,) = lint(planted, "int_division")
    assert f.line == planted.line("int_division")
    assert f.message.startswith("int64 / int64 -> float64")
    assert "//" in f.fix


def test_float64_inputs_mean_no_float64_findings(planted):
    assert lint(planted, "literal_float", SIG64) == []
    assert lint(planted, "int_literal", SIG64) == []
    # one float64 scalar among float32 arrays is enough: float64 is then intended
    assert lint(planted, "literal_float", (F32, F32, types.float64)) == []
    # the raw finder still sees the float64 arithmetic
    raw = float64_findings("literal_float", planted.literal_float, SIG64)
    assert [f.line for f in raw] == [planted.line("literal_float")]
    assert raw[0].message.startswith("float64 * float64 -> float64 (")
    assert "Python float literal 2.5" in raw[0].message


def test_has_float64_input():
    assert not has_float64_input(SIG32)
    assert has_float64_input(SIG64)
    assert has_float64_input((F32, types.float64))
    assert has_float64_input((types.UniTuple(types.float64, 2),))
    assert not has_float64_input((types.int64, types.float32[:, ::1]))


def test_device_function_lines_are_reported_with_its_name(planted):
    findings = lint(planted, "calls_device")
    (f,) = findings  # the call on the kernel's own line is not arithmetic
    assert (f.kernel, f.function) == ("calls_device", "halve")
    assert (f.path, f.line) == (planted.path, planted.line("halve"))
    assert f.message == "float32 * float64 -> float64 (Python float literal 0.25)"
    # typed with the argument types of the call: float64 in, float64 throughout
    raw64 = float64_findings("calls_device", planted.calls_device, SIG64)
    assert sorted(f.line for f in raw64) == [planted.line("halve") - 1, planted.line("halve")]
    assert {f.function for f in raw64} == {"halve"}


def test_math_exp_of_float32_is_clean_but_of_a_float64_product_is_not(planted):
    assert lint(planted, "exp_plain") == []
    findings = lint(planted, "exp_scaled")
    assert len(findings) == 1  # the product and the exp of that line make one finding
    (f,) = findings
    assert f.line == planted.line("exp_scaled")
    assert "float32 * float64 -> float64 (Python float literal 0.5)" in f.message
    assert "math.exp(float64) -> float64" in f.message
    assert f.fix == "use a typed constant: numba.float32(0.5)"


def test_int64_index_math_in_a_loop_is_flagged(planted):
    findings = lint(planted, "index_in_loop")
    (f,) = findings
    assert (f.kind, f.severity) == (INT64_INDEX, Severity.WARNING)
    assert (f.function, f.line) == ("index_in_loop", planted.line("index_in_loop"))
    assert f.message.startswith("int64 index math in a loop")
    assert "int64 + int64 -> int64, indexes out" in f.message
    assert "numba.int32" in f.fix
    assert int64_index_findings("index_in_loop", planted.index_in_loop, SIG32) == findings


def test_int64_index_math_outside_loops_or_plain_loop_indices_are_not_flagged(planted):
    assert lint(planted, "index_outside_loop") == []
    assert lint(planted, "loop_without_index_math") == []


def _repo_findings() -> dict[str, dict[str, list[IRFinding]]]:
    """op -> kernel -> findings, for the float32 signatures of each repository op."""
    from portkit.launch.trace import record_launches
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    catalog = discover(load_config(REPO))
    result: dict[str, dict[str, list[IRFinding]]] = {}
    for name in ("vector_add", "elementwise_mul", "sigmoid", "softmax"):
        op = catalog.get(name)
        # Every float32 case: an op may pick its kernel by size (softmax's short rows).
        result[name] = {}
        for case in op.definition.cases:
            if case.dtype != "float32" or not case.numel or case.gpu_only:
                continue
            for launch in record_launches(op, case):
                if launch.kernel not in result[name]:
                    kernel = op.kernels[launch.kernel]
                    result[name][launch.kernel] = ir_findings(
                        launch.kernel, kernel, launch.signature
                    )
    return result


def _line_of(path: Path, text: str) -> int:
    (found,) = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return found


def test_repository_ops():
    results = _repo_findings()
    for op, kernels in results.items():
        for kernel, findings in kernels.items():
            print(f"{op}.{kernel}: {len(findings)} finding(s)")
            for f in findings:
                print(f"  {f.kind} {f.function} {Path(f.path).name}:{f.line} {f.message}")
            keys = [(f.kind, f.path, f.line) for f in findings]
            assert len(keys) == len(set(keys))
            assert [(f.path, f.line) for f in findings] == sorted(
                (f.path, f.line) for f in findings
            )

    # The examples index with int64 on purpose (tensors may pass 2^31 elements, as the
    # twins' `long long`): every such finding sits on a line that says so, and nothing
    # else is found (no float64 in their float32 kernels).
    from portkit.lint.findings import _allowed

    for op, kernels in results.items():
        for kernel, findings in kernels.items():
            assert only(findings, FLOAT64) == [], (op, kernel)
            for f in findings:
                assert f.kind == INT64_INDEX and _allowed(f.path, f.line, INT64_INDEX), (
                    op,
                    kernel,
                    f,
                )
    softmax = REPO / "prototypes" / "softmax.py"
    fwd = results["softmax"]["softmax_fwd"]
    assert _line_of(softmax, "s = add_exp(m, s, x[row, base + j])") in {
        f.line for f in only(fwd, INT64_INDEX)
    }
