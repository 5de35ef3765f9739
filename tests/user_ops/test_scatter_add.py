"""A scatter-add with duplicate int64 indices written from the docs alone:
the case kind `duplicates` makes indices that repeat, the forward's float atomics are
judged by the summation-order bound, and a scatter that is not atomic, or a backward that
gathers from the wrong row, fails."""

from __future__ import annotations

import json

import pytest
import torch

from portkit.backends.twin_cpu.build import find_compiler
from portkit.project.cases import make_inputs
from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("scatter_add")
CPU = ("--backend", "sim,torch,twin-cpu", "--no-compile", "--json")
needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")


def test_the_cases_draw_valid_indices_that_repeat(load_op, make_project):
    _, op = load_op(make_project({"scatter_add": (PROTOTYPE, None)}), "scatter_add")
    case = op.case("float32-few-rows")
    src, idx = make_inputs(case, "cpu")
    (rows,) = case.extra
    assert idx.dtype == torch.int64 and src.shape == (2048, 3)
    assert int(idx.min()) >= 0 and int(idx.max()) < rows
    assert torch.bincount(idx).max() > 100  # hundreds of atomics meet on one element


@needs_compiler
def test_scatter_add_passes_on_the_cpu_backends(make_project, cli):
    root = make_project({"scatter_add": (PROTOTYPE, TWIN)})
    result = cli(root, "check", "scatter_add", *CPU)
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
    forward = {(r["case"], r["backend"]): r["detail"] for r in rows if r["check"] == "forward"}
    detail = forward[("float32-few-rows", "twin-cpu")]
    assert "float atomics on 24 of 24 elements" in detail
    assert "within the summation-order bound" in detail
    ran = {(r["case"], r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    assert ("float64-gradcheck", "twin-cpu", "gradcheck") in ran


@needs_compiler
def test_a_non_atomic_scatter_fails(make_project, cli):
    racy = TWIN.replace(
        "atomicAdd(out + idx[r] * dim + c, src[i]);", "out[idx[r] * dim + c] += src[i];"
    )
    assert racy != TWIN
    root = make_project({"scatter_add": (PROTOTYPE, racy)})
    result = cli(root, "check", "scatter_add", *CPU, "--case", "float32-few-rows")
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 1, rows
    assert ("twin-cpu", "forward") in {
        (r["backend"], r["check"]) for r in rows if r["status"] == "fail"
    }


@needs_compiler
def test_a_backward_gathering_the_wrong_row_fails(make_project, cli):
    wrong = TWIN.replace(
        "dsrc[i] = dout[idx[r] * dim + c];", "dsrc[i] = dout[(r % dim) * dim + c];"
    )
    assert wrong != TWIN
    root = make_project({"scatter_add": (PROTOTYPE, wrong)})
    result = cli(root, "check", "scatter_add", *CPU, "--case", "float32-duplicates")
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 1, rows
    assert ("twin-cpu", "backward") in {
        (r["backend"], r["check"]) for r in rows if r["status"] == "fail"
    }


@pytest.mark.compile
def test_scatter_add_passes_check(check_op):
    result, rows = check_op("scatter_add")
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
