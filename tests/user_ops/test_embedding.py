"""An embedding gather with a scatter-add backward: its indices are a structured input
(valid rows, with duplicates), so the float atomics of the backward meet on rows and are
compared with the control plus the summation-order term."""

from __future__ import annotations

import json

import pytest

from portkit.backends.twin_cpu.build import find_compiler
from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("embedding")
CPU = ("--backend", "sim,torch,twin-cpu", "--no-compile", "--json")
needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")


@needs_compiler
def test_embedding_passes_on_the_cpu_backends(make_project, cli):
    root = make_project({"embedding": (PROTOTYPE, TWIN)})
    result = cli(root, "check", "embedding", *CPU)
    rows = json.loads(result.stdout)["results"]
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
    backward = {
        (r["case"], r["backend"]): r["detail"] for r in rows if r["check"] == "backward"
    }
    detail = backward[("float32-duplicates", "twin-cpu")]
    assert "float atomics on 800 of 800 elements" in detail
    assert "within the summation-order bound" in detail


@needs_compiler
def test_a_non_atomic_scatter_fails(make_project, cli):
    racy = TWIN.replace(
        "atomicAdd(dweight + idx[r] * dim + c, dout[i]);",
        "dweight[idx[r] * dim + c] += dout[i];",
    )
    assert racy != TWIN
    root = make_project({"embedding": (PROTOTYPE, racy)})
    result = cli(root, "check", "embedding", *CPU, "--case", "float32-duplicates")
    rows = json.loads(result.stdout)["results"]
    failed = {(r["backend"], r["check"]) for r in rows if r["status"] == "fail"}
    assert ("twin-cpu", "backward") in failed, rows


@pytest.mark.compile
def test_embedding_passes_check(check_op):
    result, rows = check_op("embedding")
    assert result.exit_code == 0, [r for r in rows if r["status"] == "fail"]
