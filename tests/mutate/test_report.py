"""The selection under --limit, the score and its exit rule."""

from __future__ import annotations

from portkit.mutate.model import HINTS, KILLED, KINDS, STILLBORN, SURVIVED, Mutant, MutantResult
from portkit.mutate.report import OpScore, by_kind, summary_line, too_many_survivors
from portkit.mutate.runner import select


def mutant(kind: str, side: str = "twin", line: int = 1) -> Mutant:
    return Mutant(kind, side, "f", line, f"{kind} at {line}", "")


def test_every_kind_has_a_hint():
    assert set(HINTS) == set(KINDS)


def test_limit_takes_each_side_and_kind_in_turn_keeping_the_order():
    mutants = [mutant("index", line=i) for i in range(10)] + [
        mutant("barrier", line=20),
        mutant("guard", "prototype", line=30),
    ]
    chosen = select(mutants, 4)
    assert [m.kind for m in chosen] == ["index", "index", "barrier", "guard"]
    assert [m.line for m in chosen] == [0, 1, 20, 30]
    assert select(mutants, None) == mutants and select(mutants, 100) == mutants


def test_survival_share_leaves_stillborn_mutants_out():
    score = OpScore("op", generated=5)
    score.results = [
        MutantResult(mutant("index"), KILLED, "sim forward float32-n1", "wrong"),
        MutantResult(mutant("guard"), SURVIVED, "", HINTS["guard"]),
        MutantResult(mutant("int32"), STILLBORN, "twin-cpu compile", "error"),
        MutantResult(mutant("tail"), KILLED, "twin-cpu forward float32-n1", "NaN"),
    ]
    assert score.judged == 3 and abs(score.survival - 1 / 3) < 1e-12
    assert too_many_survivors([score], 0.3) == ["op"]
    assert too_many_survivors([score], 0.34) == []
    line = summary_line(score)
    assert "4 mutants (of 5 generated): 2 killed" in line and "1 stillborn" in line
    assert "1 by sim forward" in line and "1 by twin-cpu forward" in line
    assert by_kind([score])["int32"][STILLBORN] == 1
    assert score.as_dict()["killed_by"] == {"sim forward": 1, "twin-cpu forward": 1}


def test_an_op_with_no_judged_mutant_does_not_fail():
    assert too_many_survivors([OpScore("op")], 0.0) == []
