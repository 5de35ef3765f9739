"""`portkit check --json`: the results as data, for CI and scripts (gpu.sh sanitizer)."""

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


def test_backends_may_be_listed_with_commas(make_project, sources, cli):
    # with a twin: a requested backend that cannot run (twin-cpu of a twin-less op) exits 3
    op = sources.unary_op("double", cases=sources.ONE_CASE)
    root = make_project({"double": (op, sources.unary_twin("double"))})
    rows = []
    for flags in (["--backend", "sim,twin-cpu"], ["--backend", "sim", "--backend", "twin-cpu"]):
        result = cli(root, "check", "double", *flags, "--no-compile", "--json")
        assert result.exit_code == 0, result.output
        report = json.loads(result.output[result.output.index('{\n "results"') :])
        rows.append({(r["backend"], r["check"], r["case"], r["status"]) for r in report["results"]})
    assert rows[0] == rows[1]
    assert {backend for backend, *_ in rows[0]} == {"sim", "twin-cpu"}
    wrong = cli(root, "check", "double", "--backend", "sim,nope", "--no-compile")
    assert wrong.exit_code == 2 and "unknown backend 'nope'" in wrong.output
    empty = cli(root, "check", "double", "--backend", ",", "--no-compile")
    assert empty.exit_code == 2 and "--backend needs a backend name" in empty.output


def test_statuses_are_written_as_plain_strings(make_project, sources, cli):
    """``CheckResult.status`` is an ``Outcome``; ``--json`` writes its value, as before."""
    py = sources.unary_op("json_wrong", "out[i] = x[i] * 3.0", cases=sources.ONE_CASE)
    root = make_project({"json_wrong": (py, None)})
    result = cli(root, "check", "json_wrong", "--backend", "sim,twin", "--no-compile", "--json")
    assert result.exit_code == 1, result.output
    text = result.output[result.output.index('{\n "results"') :]
    rows = json.loads(text)["results"]
    statuses = {(r["backend"], r["check"]): r["status"] for r in rows}
    assert statuses[("sim", "forward")] == "fail"
    assert statuses[("twin", "run")] == "skip"  # no GPU here, or twin-less on one
    fields = ["op", "case", "backend", "check", "status", "detail", "seconds", "warnings"]
    more = ["margin", "cached", "configuration", "compared_with", "stage", "site", "mismatch"]
    assert all(list(r) == [*fields, *more] for r in rows)
    assert {r["stage"] for r in rows} == {"run"}  # no compile checks (--no-compile)
    # an op without knobs runs one configuration; no twin ran beside the prototype here
    assert all(r["configuration"] is None and r["compared_with"] is None for r in rows)
    assert not any(r["cached"] for r in rows)  # run, not served from the verdict store
    assert all(r["warnings"] == [] for r in rows)  # this kernel gives no simulator warning
    # A compared row carries its margin (largest error over its bound); others None.
    assert {(r["backend"], r["check"]): r["margin"] for r in rows}[("twin", "run")] is None
    assert '"status": "fail",' in text and '"status": "skip",' in text


def test_an_outcome_reads_as_its_value():
    from portkit.results import Outcome

    assert [str(o) for o in Outcome] == ["pass", "fail", "skip", "error", "running"]
    assert f"{Outcome.FAIL}" == "fail" and Outcome("skip") is Outcome.SKIP
    assert json.dumps([Outcome.PASS]) == '["pass"]'
