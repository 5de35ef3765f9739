"""Whole ops drafted and checked: each of the project's ten example ops, drafted into
a project without its hand-written twin, passes `portkit check --backend twin-cpu`
unmodified; so do two ops written here with constructs the ten do not use. A draft of
a prototype with an off-by-one bound keeps the bug, and check catches it in both the
simulator and the CPU twin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portkit.backends.twin_cpu.build import find_compiler

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
TEN = (
    "softmax", "sigmoid", "vector_add", "elementwise_mul", "softmax_warp",
    "rmsnorm", "layernorm", "cumsum", "histogram", "matmul",
)  # fmt: skip

pytestmark = [
    pytest.mark.compile,
    pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler for twin-cpu"),
]


def port_and_check(make_project, cli, name: str, prototype: str, *backends: str):
    root = make_project({name: (prototype, None)})
    ported = cli(root, "port", name)
    assert ported.exit_code == 0, ported.output
    draft = (root / "cuda_src" / f"{name}.cu").read_text()
    assert "#error" not in draft
    backend = ",".join(backends or ("twin-cpu",))
    result = cli(root, "check", name, "--backend", backend, "--quick", "--json")
    rows = json.loads(result.stdout)["results"]
    return result, rows, draft


def ran(rows, backend: str) -> set[str]:
    return {r["check"] for r in rows if r["backend"] == backend and r["status"] == "pass"}


# softmax (device functions, tuples, shared memory, shuffles) runs by default; the
# other nine with the GPU-sized cases' marker, which the quick loop leaves out.
@pytest.mark.parametrize(
    "op", [op if op == "softmax" else pytest.param(op, marks=pytest.mark.large) for op in TEN]
)
def test_the_draft_of_an_example_op_passes_check(make_project, cli, op):
    prototype = (REPO / "prototypes" / f"{op}.py").read_text()
    result, rows, _ = port_and_check(make_project, cli, op, prototype)
    failed = [r for r in rows if r["status"] == "fail"]
    assert result.exit_code == 0, failed
    assert "forward" in ran(rows, "twin-cpu")
    assert ("twin", "compile sm_90") in {(r["backend"], r["check"]) for r in rows}


@pytest.mark.parametrize("op", ["ticket", "blur3d"])
def test_the_draft_of_an_op_of_other_constructs_passes_check(make_project, cli, op):
    prototype = (HERE / f"{op}_prototype.py").read_text()
    result, rows, draft = port_and_check(make_project, cli, op, prototype, "twin-cpu", "sim")
    failed = [r for r in rows if r["status"] == "fail"]
    assert result.exit_code == 0, failed
    assert "forward" in ran(rows, "twin-cpu") and "forward" in ran(rows, "sim")
    assert "vs twin-cpu" in ran(rows, "sim")  # the prototype against the draft, tightly
    expected = {
        "ticket": [
            "T v = i < n ? x[i] : 0.0f;",
            "double c = v > limit ? limit : v < -limit ? -limit : (double)v;",
            "while (offset > 0) {",
            "s += __shfl_down_sync(FULL, s, offset);",
            "int t = atomicAdd(&counter[0], 1);",
        ],
        "blur3d": [
            "for (long long d = 2; d > -1; d += -1) {",
            "long long cc = c + d - 1;",
            "float taps[3];",
            "return expf(-(float)(d * d));",
            "acc += taps[d] * x[(z * rows + r) * cols + cc];",
        ],
    }[op]
    for line in expected:
        assert line in draft, line


def test_a_planted_bound_bug_is_ported_and_caught_by_both(make_project, cli, sources):
    prototype = sources.unary_op("pbound", bound="i <= n", cases=sources.ONE_CASE)
    result, rows, draft = port_and_check(make_project, cli, "pbound", prototype, "twin-cpu", "sim")
    assert "if (i <= n) {" in draft
    assert result.exit_code == 1
    failed = {r["backend"] for r in rows if r["status"] == "fail"}
    assert {"twin-cpu", "sim"} <= failed, rows


@pytest.mark.gpu
@pytest.mark.parametrize("op", TEN)
def test_on_a_gpu_the_draft_matches_the_numba_prototype(make_project, cli, op):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    prototype = (REPO / "prototypes" / f"{op}.py").read_text()
    result, rows, _ = port_and_check(make_project, cli, op, prototype, "numba", "twin")
    failed = [r for r in rows if r["status"] == "fail"]
    assert result.exit_code == 0, failed
    assert "forward" in ran(rows, "twin")
    # numba's prototype against the draft, with the twin tolerance
    assert "vs twin" in ran(rows, "numba"), rows
