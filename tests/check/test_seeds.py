"""Seeds as a dimension (portkit/checking/seeds.py): `portkit check --seeds N` and
`pytest --portkit-seeds N` run every case with N seeds and report each check's worst
margin (largest error over its bound), and a failure drawn by another seed names it."""

from __future__ import annotations

import json
import re

from portkit.checking.seeds import seeded, worst_margins
from portkit.project.cases import custom, make_inputs
from portkit.results import CheckResult, Outcome

SIGMOID = dict(
    body="out[i] = 1.0 / (1.0 + math.exp(-x[i]))",
    reference="torch.sigmoid",
    cases='[portkit.cases.custom("float32-n129", [(129,)], seed=7)]',
)


def test_seeded_cases_draw_other_inputs_from_consecutive_seeds():
    case = custom("c", [(16,)], seed=7)
    assert seeded(case, 0) is case
    third = seeded(case, 2)
    assert (third.seed, third.seed_round, third.name) == (9, 2, "c")
    assert not make_inputs(third, "cpu")[0].equal(make_inputs(case, "cpu")[0])
    assert make_inputs(third, "cpu")[0].equal(make_inputs(custom("c", [(16,)], seed=9), "cpu")[0])


def test_worst_margin_keeps_the_largest_per_check_with_its_seed():
    def row(case, check, margin):
        return CheckResult("op", case, "sim", check, Outcome.PASS, "", 0.0, margin=margin)

    tagged = [
        (row("a", "forward", 0.2), 0),
        (row("a", "forward", 0.7), 1),
        (row("b", "forward", 0.5), 0),
        (row("a", "backward", 0.1), 3),
        (row("a", "gradcheck", None), 0),
    ]
    worst = worst_margins(tagged)
    assert [(w.check, w.margin, w.case, w.seed) for w in worst] == [
        ("forward", 0.7, "a", 1),
        ("backward", 0.1, "a", 3),
    ]
    assert worst[0].line() == "op sim forward: worst margin 0.7 (case a, seed 1)"


def test_check_seeds_reports_the_worst_margin_per_check(make_project, sources, cli):
    root = make_project({"sig": (sources.unary_op("sig", **SIGMOID), None)})
    result = cli(root, "check", "sig", "--backend", "sim", "--no-compile", "--seeds", "3")
    assert result.exit_code == 0, result.output
    assert "worst margin per check over 3 seeds (1 = the bound):" in result.output
    line = re.search(r"sig sim forward: worst margin ([\d.e-]+) \(case float32-n129, seed (\d+)",
                     result.output)
    assert line and 0 < float(line.group(1)) < 1 and int(line.group(2)) in (7, 8, 9)
    as_json = cli(root, "check", "sig", "--backend", "sim", "--no-compile", "--seeds", "3",
                  "--json")
    report = json.loads(as_json.stdout)
    forward = [r for r in report["results"] if r["check"] == "forward"]
    assert len(forward) == 3 and all(0 < r["margin"] < 1 for r in forward)
    (worst,) = [w for w in report["worst_margins"] if w["check"] == "forward"]
    assert worst["margin"] == max(r["margin"] for r in forward)


def test_a_failure_in_another_seed_names_it(make_project, sources, cli):
    # Wrong only where x > 2.5: the case's own seed has no such element, a later seed does.
    body = "out[i] = 1.0 / (1.0 + math.exp(-x[i])) if x[i] < 2.5 else 0.5"
    options = dict(SIGMOID, body=body,
                   cases='[portkit.cases.custom("float32-n16", [(16,)], seed=0)]')
    root = make_project({"sig2": (sources.unary_op("sig2", **options), None)})
    alone = cli(root, "check", "sig2", "--backend", "sim", "--no-compile", "--json")
    assert alone.exit_code == 0, alone.output
    seeded_run = cli(root, "check", "sig2", "--backend", "sim", "--no-compile", "--seeds", "20",
                     "--json")
    assert seeded_run.exit_code == 1
    failed = [r for r in json.loads(seeded_run.stdout)["results"] if r["status"] == "fail"]
    assert failed and all(r["margin"] > 1 for r in failed)
    found = re.search(r"\[seed (\d+); reproduce: portkit check sig2 --case float32-n16 "
                      r"--first-seed (\d+)\]", failed[0]["detail"])
    assert found, failed[0]["detail"]
    seed, first = int(found.group(1)), int(found.group(2))
    assert seed == first  # the case's own seed is 0
    # The reproduce line runs that one seed alone, and it fails there.
    again = cli(root, "check", "sig2", "--backend", "sim", "--no-compile", "--case",
                "float32-n16", "--first-seed", str(first), "--json")
    assert again.exit_code == 1, again.output
    rows = [r for r in json.loads(again.stdout)["results"] if r["check"] == "forward"]
    assert len(rows) == 1 and rows[0]["status"] == "fail"
    assert f"[seed {seed}; reproduce:" in rows[0]["detail"]


def test_first_seed_starts_the_rounds_later(make_project, sources, cli):
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    root = make_project({"sig": (sources.unary_op("sig", **SIGMOID), None)})
    own = {c.name: c.seed for c in discover(load_config(root)).get("sig").definition.cases}
    result = cli(root, "check", "sig", "--backend", "sim", "--no-compile", "--seeds", "2",
                 "--first-seed", "3", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    forward = [r for r in report["results"] if r["check"] == "forward"]
    assert len(forward) == 2 * len({r["case"] for r in forward})  # two rounds of each case
    rounds = {w["seed"] - own[w["case"]] for w in report["worst_margins"]}
    assert rounds and rounds <= {3, 4}, rounds
    assert "over seeds 3 to 4 (1 = the bound)" in result.stderr
