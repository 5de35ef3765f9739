"""`portkit check --json`: the results as data, for CI and scripts (gpu-trust.sh)."""

from __future__ import annotations

import json


def test_check_json_lists_every_result(make_project, sources, cli):
    root = make_project({"double": (sources.unary_op("double", cases=sources.ONE_CASE), None)})
    result = cli(root, "check", "double", "--backend", "sim", "--no-compile", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index('{\n "results"') :])
    (row,) = [r for r in report["results"] if r["check"] == "forward"]
    assert (row["op"], row["backend"], row["case"], row["status"]) == (
        "double",
        "sim",
        "float32-n129",
        "pass",
    )
    assert row["seconds"] >= 0
