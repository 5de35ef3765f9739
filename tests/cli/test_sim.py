"""``portkit sim`` on the repository's own ops, pdb at a chosen thread, and the
simulator's promise to leave the environment and the user's modules alone."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numba
import pytest
from numba import cuda

from portkit.backends import create
from portkit.checking.harness import run_case
from portkit.project.config import load_config
from portkit.project.discovery import discover

REPO = Path(__file__).resolve().parents[2]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_sim_sigmoid_passes(cli):
    result = cli(REPO, "sim", "sigmoid")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "sigmoid in the simulator" in out
    assert "first elements" in out
    assert "output 0 sim" in out and "output 0 reference" in out
    assert "grad 0 sim" in out
    assert "pass forward" in out and "pass backward" in out
    assert out.rstrip().endswith("PASS")
    assert "Traceback" not in out


def test_sim_size_dtype_seed(cli):
    result = cli(REPO, "sim", "sigmoid", "--size", "5", "--dtype", "float64", "--seed", "3")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "inputs 5 float64, seed 3" in out
    assert "PASS" in out
    # five rows in the table, indices 0..4, no row 5
    rows = re.findall(r"^\W*(\d+) ", out, re.M)
    assert rows == ["0", "1", "2", "3", "4"]


def test_sim_show_limits_rows(cli):
    result = cli(REPO, "sim", "sigmoid", "--size", "20", "--show", "3")
    assert result.exit_code == 0, result.output
    assert re.findall(r"^\W*(\d+) ", result.output, re.M) == ["0", "1", "2"]


def test_sim_softmax_shape(cli):
    result = cli(REPO, "sim", "softmax", "--shape", "2x3")
    assert result.exit_code == 0, result.output
    assert "softmax in the simulator: inputs 2x3 float32" in result.output
    assert "PASS" in result.output


def test_sim_shape_of_wrong_rank(cli):
    result = cli(REPO, "sim", "sigmoid", "--shape", "2x3")
    assert result.exit_code == 2
    out = flat(result.output)
    assert "op sigmoid takes 1-D inputs; the requested shape 2x3 is 2-D" in out
    assert "Traceback" not in result.output


def test_sim_named_case(cli):
    result = cli(REPO, "sim", "vector_add", "--case", "float64-special")
    assert result.exit_code == 0, result.output
    assert "inputs 24 24 float64" in result.output


def test_sim_breakpoint_in_pdb(portkit_process):
    # pdb stops on the kernel's first line; `n` runs `start = cuda.grid(1)`, `p start`
    # shows it.
    proc = portkit_process(
        REPO,
        *"sim sigmoid --size 8 --block 0 --thread 3".split(),
        input="p cuda.threadIdx.x\nn\np start\nc\n",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    banner = "portkit: kernel sigmoid_fwd, block (0, 0, 0), thread (3, 0, 0)"
    assert banner in out
    after = out[out.index(banner) + len(banner) :]
    assert "sigmoid.py" in after and "sigmoid_fwd()" in after
    # cuda.threadIdx.x, then start = cuda.grid(1): NumPy int64 scalars, as numba types them
    assert after.count("(Pdb) np.int64(3)\n") == 2
    assert "NameError" not in after
    assert out.count("portkit: kernel") == 1  # one stop, on the first launch only
    assert "PASS" in after


def test_sim_breakpoint_second_block(portkit_process):
    proc = portkit_process(
        REPO,
        # 1100 elements are 275 packs of 4: two blocks of 256 threads
        *"sim sigmoid --size 1100 --block 1 --thread 2 --kernel sigmoid_bwd".split(),
        input="n\np start\nc\n",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    banner = "portkit: kernel sigmoid_bwd, block (1, 0, 0), thread (2, 0, 0)"
    assert banner in out
    assert "(Pdb) np.int64(258)\n" in out[out.index(banner) :]  # 1 * 256 + 2


def test_device_function_in_simulator():
    """sigmoid's kernel calls the device function stable_sigmoid."""
    config = load_config(REPO)
    op = discover(config).get("sigmoid")
    case = op.case("float32-special")
    results = run_case(op, case, [create("sim", config)])
    assert {r.check: r.status for r in results} == {"forward": "pass", "backward": "pass"}


NESTED = """\
import torch
from numba import cuda

import portkit


@cuda.jit(device=True)
def inner(v):
    return v + 1.0


@cuda.jit(device=True)
def outer(v):
    return inner(v) * 2.0


def make_kernel():
    @cuda.jit(device=True)
    def closed(v):
        return outer(v) - 2.0   # (v + 1) * 2 - 2 = 2v

    @cuda.jit
    def sim_nested_fwd(x, out, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = closed(x[i])

    return sim_nested_fwd


sim_nested_fwd = make_kernel()


@portkit.op(
    reference=lambda x: x * 2, cases=[portkit.cases.custom("float64-n40", [(40,)], "float64")]
)
class Nested:
    def forward(k, x):
        out = k.empty_like(x)
        k.sim_nested_fwd[2, 32](x, out, x.numel())
        return out, ()
"""


def test_nested_and_closure_device_functions(make_project, load_op):
    root = make_project({"sim_nested": (NESTED, None)})
    config, op = load_op(root, "sim_nested")
    assert set(op.kernels) == {"sim_nested_fwd"}
    results = run_case(op, op.definition.cases[0], [create("sim", config)])
    assert [(r.check, r.status, r.detail) for r in results] == [("forward", "pass", "")]
    module = sys.modules["portkit_ops.sim_nested"]
    assert module.inner.targetoptions.get("device") is True
    assert module.cuda is cuda


def test_sim_leaves_environment_and_module_alone(cli):
    assert "NUMBA_ENABLE_CUDASIM" not in os.environ
    result = cli(REPO, "sim", "sigmoid", "--size", "40")
    assert result.exit_code == 0, result.output
    assert "NUMBA_ENABLE_CUDASIM" not in os.environ
    assert not numba.config.ENABLE_CUDASIM
    module = sys.modules["portkit_ops.sigmoid"]
    assert module.cuda is numba.cuda
    assert module.math is __import__("math")
    # the names still hold numba's real dispatchers, not simulator stand-ins
    assert type(module.sigmoid_fwd).__module__.startswith("numba.cuda.dispatcher")
    assert type(module.stable_sigmoid).__module__.startswith("numba.cuda.dispatcher")
    assert module.sigmoid_fwd.py_func.__globals__ is vars(module)


@pytest.mark.parametrize("size", [0, 1])
def test_sim_tiny_sizes(cli, size):
    result = cli(REPO, "sim", "sigmoid", "--size", str(size))
    assert result.exit_code == 0, result.output
    assert f"inputs {size} float32" in result.output
    assert "PASS" in result.output


def test_sim_reports_failure_with_exit_1(make_project, sources, cli):
    py = sources.unary_op("sim_bad", "out[i] = x[i] * 3.0", cases=sources.ONE_CASE)
    root = make_project({"sim_bad": (py, None)})
    result = cli(root, "sim", "sim_bad")
    assert result.exit_code == 1
    out = flat(result.output)
    assert "FAIL forward" in out
    assert "129 of 129 elements differ" in out
    assert "first elements" in out
    assert result.output.rstrip().endswith("FAIL")


def test_sim_failure_names_seed(make_project, sources, cli):
    """Like `portkit check`, a `portkit sim` failure names the seed that reproduces it."""
    py = sources.unary_op("sim_seed", "out[i] = x[i] * 3.0", cases=sources.ONE_CASE)
    root = make_project({"sim_seed": (py, None)})
    result = cli(root, "sim", "sim_seed", "--seed", "4")
    assert result.exit_code == 1
    assert "[seed 4; reproduce: portkit" in flat(result.output)


def test_check_reproduce_hint_runs(make_project, sources, cli):
    py = sources.unary_op("sim_rep", "out[i] = x[i] * 3.0", cases=sources.SMALL_CASES)
    root = make_project({"sim_rep": (py, None)})
    out = flat(cli(root, "check", "sim_rep", "--backend", "sim", "--no-compile").output)
    hints = set(re.findall(r"reproduce: portkit (check sim_rep --case [\w.-]+)\]", out))
    assert hints == {
        f"check sim_rep --case {c}" for c in ("float32-n1", "float32-n129", "float64-gradcheck")
    }
    for hint in hints:
        again = cli(root, *hint.split(), "--backend", "sim", "--no-compile")
        assert again.exit_code == 1, again.output
        assert "0 passed, 1 failed, 0 skipped" in again.output


def test_sim_reproduce_hint_runs(make_project, sources, cli):
    """The command a `portkit sim` failure prints reproduces that failure."""
    py = sources.unary_op("sim_rep2", "out[i] = x[i] * 3.0", cases=sources.SMALL_CASES)
    root = make_project({"sim_rep2": (py, None)})
    out = flat(cli(root, "sim", "sim_rep2", "--seed", "9").output)
    hint = re.search(r"reproduce: portkit (\w+ sim_rep2 [^\]]*)\]", out)
    assert hint is not None, out
    args = hint.group(1).split()
    if args[0] == "check":
        args += ["--backend", "sim", "--no-compile"]
    again = cli(root, *args)
    assert again.exit_code == 1, again.output
    assert "seed 9" in flat(again.output)


BWD_FIRST = """\
import torch
from numba import cuda

import portkit


@cuda.jit
def sim_order_bwd(x, dy, dx, n):
    i = cuda.grid(1)
    if i < n:
        dx[i] = dy[i] * 2.0


@cuda.jit
def sim_order_fwd(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * 2.0


@portkit.op(reference=lambda x: x * 2, cases=[portkit.cases.custom("float32-n9", [(9,)])])
class Order:
    def forward(k, x):
        out = k.empty_like(x)
        k.sim_order_fwd[1, 32](x, out, x.numel())
        return out, (x,)

    def backward(k, saved, dy):
        (x,) = saved
        dx = k.empty_like(x)
        k.sim_order_bwd[1, 32](x, dy, dx, x.numel())
        return (dx,)
"""


def test_sim_breakpoint_default_kernel_is_forwards_first(make_project, portkit_process):
    """--help: "Kernel to stop in (default: the first one the forward launches)"."""
    root = make_project({"sim_order": (BWD_FIRST, None)})
    proc = portkit_process(root, "sim", "sim_order", "--block", "0", "--thread", "1", input="c\n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "portkit: kernel sim_order_fwd, block (0, 0, 0), thread (1, 0, 0)" in out


def test_numba_simulator_refuses_warp_intrinsics(cli):
    result = cli(REPO, "sim", "softmax_warp", "--backend", "numba-sim")
    assert result.exit_code == 2
    assert "numba-sim cannot run softmax_warp: numba's simulator has no warp intrinsics" in (
        result.output
    )


def test_numba_simulator_stays_available_as_a_cross_check(cli):
    result = cli(REPO, "sim", "vector_add", "--size", "40", "--backend", "numba-sim")
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output


def test_sim_refuses_a_shared_shape_numba_does_not_fold(make_project, sources, cli):
    """numba types a shared array's shape as a literal; `TY + 2` is not one, so numba
    refuses the kernel and `portkit sim` says so in one line (tests/simt/test_numba_rules)."""
    body = """
    s = cuda.shared.array((THREADS + 2, 2), dtype=x.dtype)
    s[0, 0] = x[i]
    out[i] = s[0, 0] * 2.0
    """
    py = sources.unary_op("sim_shape", body, cases=sources.ONE_CASE)
    root = make_project({"sim_shape": (py, None)})
    result = cli(root, "sim", "sim_shape")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    line = flat(result.output)
    assert "kernel sim_shape_fwd, " in line and "sim_shape.py:15: cuda.shared.array's" in line
    assert "numba does not fold arithmetic on names (THREADS + 2)" in line
    assert "define SHAPE = (THREADS + 2, 2) at module level" in line
