"""`portkit check` with the verdict store: passes served while their key is unchanged,
failures never, a one-op edit re-checks that op only, a damaged store is no crash, and
the two phases (docs/verdict-cache.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SIM = ("--backend", "sim", "--no-compile", "--json")


@pytest.fixture(autouse=True)
def verdicts_on(monkeypatch):
    monkeypatch.setenv("PORTKIT_VERDICT_CACHE", "1")  # tests/conftest.py turns it off


def rows_of(result) -> list[dict]:
    return json.loads(result.output[result.output.index('{\n "results"') :])["results"]


def check(cli, root: Path, *args: str) -> tuple[int, list[dict]]:
    result = cli(root, "check", *args)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, rows_of(result)


def ran(rows: list[dict]) -> set[tuple[str, str]]:
    return {(r["op"], r["check"]) for r in rows if r["status"] == "pass" and not r["cached"]}


def served(rows: list[dict]) -> set[tuple[str, str]]:
    return {(r["op"], r["check"]) for r in rows if r["cached"]}


def test_a_pass_is_served_while_unchanged_and_no_cache_runs_it(make_project, sources, cli):
    root = make_project({"vc_a": (sources.unary_op("vc_a", cases=sources.ONE_CASE), None)})
    _, first = check(cli, root, "vc_a", *SIM)
    assert ran(first) == {("vc_a", "forward")} and not served(first)
    result = cli(root, "check", "vc_a", "--backend", "sim", "--no-compile")
    assert result.exit_code == 0, result.output
    assert "0 passed, 1 cached (passed before, unchanged), 0 failed" in result.output
    _, again = check(cli, root, "vc_a", *SIM)
    assert served(again) == {("vc_a", "forward")} and not ran(again)
    assert all(r["seconds"] == 0 for r in again if r["cached"])
    _, forced = check(cli, root, "vc_a", *SIM, "--no-cache")
    assert ran(forced) == {("vc_a", "forward")} and not served(forced)
    text = cli(root, "check", "vc_a", *SIM).output
    assert json.loads(text[text.index('{\n "results"') :])["cached"] == 1


def test_a_failure_is_never_served_from_the_store(make_project, sources, cli):
    good = sources.unary_op("vc_f", cases=sources.ONE_CASE)
    root = make_project({"vc_f": (good, None)})
    prototype = root / "prototypes" / "vc_f.py"
    assert check(cli, root, "vc_f", *SIM)[0] == 0
    prototype.write_text(good.replace("x[i] * 2.0", "x[i] * 3.0"))
    for _ in range(2):  # failing twice: run both times, never cached
        code, rows = check(cli, root, "vc_f", *SIM)
        assert code == 1
        (forward,) = [r for r in rows if r["check"] == "forward"]
        assert forward["status"] == "fail" and not forward["cached"]
    store = json.loads((root / ".portkit-cache" / "verdicts.json").read_text())
    statuses = {row["status"] for entry in store["verdicts"].values() for row in entry["rows"]}
    assert statuses == {"pass"}  # only the earlier pass is kept
    prototype.write_text(good)  # back to the content that passed: served again
    assert served(check(cli, root, "vc_f", *SIM)[1]) == {("vc_f", "forward")}


def test_a_stored_row_that_is_not_a_pass_is_never_served(tmp_path):
    from portkit.checking.verdicts.store import VerdictStore
    from portkit.results import CheckResult, Outcome

    path = tmp_path / "verdicts.json"
    row = {"op": "x", "case": "c", "backend": "sim", "check": "forward", "status": "fail"}
    row["stage"] = "run"
    path.write_text(json.dumps({"format": 2, "verdicts": {"k": {"unit": "x", "rows": [row]}}}))
    store = VerdictStore.open(path)
    assert store.lookup("k") is None
    failed = CheckResult("x", "c", "sim", "forward", Outcome.FAIL, "wrong")
    passed = CheckResult("x", "c", "sim", "forward", Outcome.PASS)
    store.record("k2", "x", [passed, failed])  # a unit with a failure is not stored
    assert store.lookup("k2") is None
    store.record("k3", "x", [passed])
    assert store.lookup("k3") is not None
    store.record("k3", "x", [failed])  # the unit fails now: its old pass is forgotten
    assert store.lookup("k3") is None


def test_a_run_whose_only_news_is_a_failure_not_in_the_file_leaves_it_unwritten(tmp_path):
    """A failure is never stored, so a run that only failed again has nothing to write
    (rewriting a large store cost 0.5 s of a no-change run); a stored pass that now fails
    is still removed."""
    from portkit.checking.verdicts.store import VerdictStore
    from portkit.results import CheckResult, Outcome

    path = tmp_path / "verdicts.json"
    passed = CheckResult("x", "c", "sim", "forward", Outcome.PASS)
    failed = CheckResult("x", "c", "sim", "forward", Outcome.FAIL, "wrong")
    store = VerdictStore.open(path)
    store.record("kept", "x", [passed])
    store.save()
    written = path.stat().st_ino  # a write replaces the file (write_atomic): a new inode
    again = VerdictStore.open(path)
    again.record("never-passed", "x", [failed])
    again.save()
    assert path.stat().st_ino == written and not again.removed
    again.record("kept", "x", [failed])
    again.save()
    assert VerdictStore.open(path).lookup("kept") is None


def test_a_one_op_edit_rechecks_that_op_only(make_project, sources, cli):
    ops = {
        name: (sources.unary_op(name, cases=sources.SMALL_CASES), None)
        for name in ("vc_one", "vc_two")
    }
    root = make_project(ops)
    _, cold = check(cli, root, "--all", "--backend", "sim", "--json")
    assert len(ran(cold)) > 0 and not served(cold)
    _, warm = check(cli, root, "--all", "--backend", "sim", "--json")
    assert not ran(warm) and served(warm) == ran(cold)
    prototype = root / "prototypes" / "vc_one.py"
    prototype.write_text(prototype.read_text() + "\n# edited\n")
    _, edited = check(cli, root, "--all", "--backend", "sim", "--json")
    fresh = [r for r in edited if r["status"] == "pass" and not r["cached"]]
    cached = [r for r in edited if r["cached"]]
    assert {r["op"] for r in fresh} == {"vc_one"}
    assert {r["op"] for r in cached} == {"vc_two"}
    assert len(fresh) == sum(r["op"] == "vc_one" for r in cold if r["status"] == "pass")


def test_a_damaged_store_is_said_and_treated_as_empty(make_project, sources, cli):
    root = make_project({"vc_d": (sources.unary_op("vc_d", cases=sources.ONE_CASE), None)})
    store = root / ".portkit-cache" / "verdicts.json"
    store.parent.mkdir(parents=True, exist_ok=True)
    for damage in ("{not json", '{"format": 2, "verdicts": [1, 2]}', "\x00\x01"):
        store.write_text(damage)
        result = cli(root, "check", "vc_d", "--backend", "sim", "--no-compile")
        assert result.exit_code == 0, result.output
        assert f"verdict file {store} is damaged" in result.output
        assert "1 passed" in result.output and "Traceback" not in result.output
        assert json.loads(store.read_text())["format"] == 2  # rewritten whole


def test_a_store_of_an_older_format_is_said_and_checked_again(make_project, sources, cli):
    """Format 1 rows have no stage: a compile row read from one would pass for a run row,
    so the file is re-checked, not guessed from labels, and rewritten as format 2."""
    root = make_project({"vc_o": (sources.unary_op("vc_o", cases=sources.ONE_CASE), None)})
    store = root / ".portkit-cache" / "verdicts.json"
    store.parent.mkdir(parents=True, exist_ok=True)
    _, rows = check(cli, root, "vc_o", *SIM)  # stores its pass, format 2
    stored = json.loads(store.read_text())
    assert stored["format"] == 2
    assert {r["stage"] for e in stored["verdicts"].values() for r in e["rows"]} == {"run"}
    for entry in stored["verdicts"].values():
        for row in entry["rows"]:
            del row["stage"]
    store.write_text(json.dumps(stored | {"format": 1}))
    result = cli(root, "check", "vc_o", *SIM)
    assert result.exit_code == 0, result.output
    said = f"verdict file {store} is of an older portkit (format 1)"
    assert result.output.count(said) == 1, result.output  # read at the start and at save
    assert not served(rows_of(result)) and ran(rows_of(result)) == ran(rows)
    assert json.loads(store.read_text())["format"] == 2


def test_an_unreadable_store_is_said_and_the_run_goes_on(make_project, sources, cli):
    root = make_project({"vc_u": (sources.unary_op("vc_u", cases=sources.ONE_CASE), None)})
    (root / ".portkit-cache" / "verdicts.json").mkdir(parents=True)  # unreadable as a file
    result = cli(root, "check", "vc_u", "--backend", "sim", "--no-compile")
    assert result.exit_code == 0, result.output
    assert "is unreadable" in result.output and "could not write verdict file" in result.output
    assert "Traceback" not in result.output


def test_verdicts_path_is_read_and_written_and_a_missing_folder_is_exit_2(
    make_project, sources, cli, tmp_path
):
    root = make_project({"vc_p": (sources.unary_op("vc_p", cases=sources.ONE_CASE), None)})
    missing = tmp_path / "no" / "such" / "verdicts.json"
    result = cli(root, "check", "vc_p", "--backend", "sim", "--verdicts", str(missing))
    assert result.exit_code == 2
    assert f"folder {missing.parent} does not exist" in result.output
    assert "Traceback" not in result.output and not missing.parent.exists()
    folder = cli(root, "check", "vc_p", "--verdicts", str(tmp_path))
    assert folder.exit_code == 2 and "is a folder" in folder.output
    artefact = tmp_path / "ci-verdicts.json"
    check(cli, root, "vc_p", *SIM, "--verdicts", str(artefact))
    assert artefact.is_file() and not (root / ".portkit-cache" / "verdicts.json").exists()
    _, rows = check(cli, root, "vc_p", *SIM, "--verdicts", str(artefact))
    assert served(rows) == {("vc_p", "forward")}


def test_phase_cpu_runs_no_gpu_row_and_compiles_every_listed_arch(make_project, sources, cli):
    table = 'cache-dir = ".portkit-cache"\narchs = ["sm_80", "sm_90", "sm_100"]\n'
    op = sources.unary_op("vc_cpu", cases=sources.ONE_CASE)
    root = make_project({"vc_cpu": (op, sources.unary_twin("vc_cpu"))}, portkit_table=table)
    result = cli(root, "check", "vc_cpu", "--phase", "cpu", "--json")
    assert result.exit_code == 0, result.output
    rows = rows_of(result)
    assert not {r["backend"] for r in rows if r["case"] != "all"} & {"numba", "twin"}
    compiles = {r["check"] for r in rows if r["backend"] == "twin"}
    assert {"compile sm_80", "compile sm_90", "compile sm_100"} <= compiles
    assert all(r["status"] == "pass" for r in rows if r["check"].startswith("compile"))


def test_phase_gpu_runs_only_gpu_rows_and_says_what_it_could_not(make_project, sources, cli):
    from portkit.backends.base import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        pytest.skip("this machine has a GPU: the GPU phase runs here")
    op = sources.unary_op("vc_gpu", cases=sources.ONE_CASE)
    root = make_project({"vc_gpu": (op, sources.unary_twin("vc_gpu"))})
    result = cli(root, "check", "vc_gpu", "--phase", "gpu")
    assert result.exit_code == 3, result.output  # nothing ran: no GPU here
    assert "not run on this machine" in result.output and "every GPU row" in result.output
    rows = rows_of(cli(root, "check", "vc_gpu", "--phase", "gpu", "--json"))
    assert {r["backend"] for r in rows} == {"numba", "twin"}
    assert all(r["status"] == "skip" for r in rows)


def test_phase_and_backend_that_share_nothing_is_a_usage_error(make_project, sources, cli):
    root = make_project({"vc_b": (sources.unary_op("vc_b", cases=sources.ONE_CASE), None)})
    result = cli(root, "check", "vc_b", "--phase", "gpu", "--backend", "sim")
    assert result.exit_code == 2 and "--phase gpu runs none of the backends" in result.output


def test_archs_must_be_a_list_of_sm_names(make_project, sources, cli):
    table = 'cache-dir = ".portkit-cache"\narchs = "sm_90"\n'
    root = make_project({"vc_x": (sources.unary_op("vc_x"), None)}, portkit_table=table)
    result = cli(root, "check", "vc_x")
    assert result.exit_code == 2 and "archs must be a list like" in result.output


def test_an_op_with_a_tuning_table_is_served_per_configuration(tmp_path, cli):
    """A case a table entry is for runs each backend per configuration ("sim (defaults)",
    "sim (rows_per_block=2 ...)"): those rows, and the pairs between them, are the
    backend's unit, served whole; a changed table runs them again."""
    from tests.export.package_env import project_with

    root = project_with(tmp_path / "proj", ["softmax_warp"], "vc_knobs")
    (root / "tuning").mkdir()
    tuned = {"config": {"rows_per_block": 2, "bwd_rows_per_block": 2}}
    table = {"format": 1, "gpus": {"FakeGPU": {"float32-1x1": tuned}}}
    (root / "tuning" / "softmax_warp.json").write_text(json.dumps(table))
    args = ("softmax_warp", "--case", "float32-1x1", "--phase", "cpu", "--no-compile", "--json")
    _, first = check(cli, root, *args)
    configured = {r["backend"] for r in first if r["backend"].startswith("sim (")}
    assert len(configured) == 2 and not served(first), configured
    # each row says its configuration and comparison as fields (--json), the labels print them
    for r in first:
        suffix = f" ({r['configuration']})" if r["configuration"] else ""
        assert r["backend"] in {f"{b}{suffix}" for b in ("sim", "twin-cpu", "torch")}, r
    vs = [r for r in first if r["compared_with"] is not None]
    assert {r["compared_with"] for r in vs} == {"twin-cpu"} and len(vs) == 2, first
    assert all(r["check"] == f"vs twin-cpu ({r['configuration']})" for r in vs)
    _, again = check(cli, root, *args)
    assert again and all(r["cached"] for r in again if r["status"] == "pass"), again
    assert {r["backend"] for r in again if r["backend"].startswith("sim (")} == configured
    table["gpus"] = {}  # no tuned entry: the defaults alone, unlabelled
    (root / "tuning" / "softmax_warp.json").write_text(json.dumps(table))
    _, after = check(cli, root, *args)
    assert not served(after) and {r["backend"] for r in after} >= {"sim", "twin-cpu"}
