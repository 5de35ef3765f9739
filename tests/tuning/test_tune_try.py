"""``portkit tune --try``: the spec's parsing and its errors, the configuration it
overrides (the table's entry for this GPU and case, else the defaults), the batch timed
on the simulator with a fake clock (forward and backward apart, a wrong configuration
flagged), and the report. Nothing here measures a time."""

from __future__ import annotations

import json

import pytest

from portkit.errors import PortkitError
from portkit.tuning.tries import apply, current_config, parse_try
from tests.tuning.test_tune import ConfigClock, tuned_project  # noqa: F401 (fixture)

DECLARED = {"threads": [32, 64], "skip": [1, 2], "math": ["float64", "float32"]}


def test_a_spec_sets_each_knob_to_its_declared_value():
    assert parse_try("threads=64", DECLARED) == {"threads": 64}
    assert parse_try(" skip = 2 , math=float32", DECLARED) == {"skip": 2, "math": "float32"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("threads", "--try 'threads': write knob=value[,knob=value...]"),
        ("threads=64,", "write knob=value[,knob=value...]"),
        ("blocks=2", "no knob 'blocks'; the op declares threads, skip, math"),
        ("threads=128", "threads takes 32, 64 (its declared values); got 128"),
    ],
)
def test_a_bad_spec_names_what_is_wrong(spec, message):
    with pytest.raises(PortkitError) as err:
        parse_try(spec, DECLARED)
    assert message in str(err.value)


def test_the_current_configuration_is_this_gpus_entry_for_the_case_else_the_defaults():
    from portkit.project.cases import Case

    table = {
        "gpus": {
            "H": {
                "float32-256": {"config": {"threads": 64, "skip": 2}, "case": "small"},
                "bfloat16-4096x4096": {"config": {"math": "float32"}, "case": "other"},
            },
            "G": {"float32-256": {"config": {"threads": 64}, "case": "small"}},
        }
    }
    small = Case("small", ((200,),))
    assert dict(current_config(table, "H", small, DECLARED)) == {
        "threads": 64, "skip": 2, "math": "float64"
    }  # fmt: skip
    # no entry records the case: the entry of its first input's bucket, as knobs(k, x) reads
    wide = Case("wide", ((4000, 4100), (4100,)), "bfloat16")
    assert dict(current_config(table, "H", wide, DECLARED))["math"] == "float32"
    large = Case("large", ((100000,),))
    assert dict(current_config(table, "H", large, DECLARED)) == {
        "threads": 32, "skip": 1, "math": "float64"
    }  # fmt: skip
    assert dict(current_config(None, "H", small, DECLARED))["threads"] == 32
    current = current_config(table, "G", small, DECLARED)
    assert apply(current, {"skip": 2}) == (("threads", 64), ("skip", 2), ("math", "float64"))


def test_tries_are_timed_beside_the_current_one_each_direction_apart(tuned_project):  # noqa: F811
    from portkit.backends import create
    from portkit.tuning.runner import try_case

    root, config, op, module = tuned_project
    sim = create("sim", config)
    current = (("threads", 32), ("skip", 1))
    tries = [(("threads", 64), ("skip", 1)), (("threads", 32), ("skip", 2)), current]
    (case,) = op.definition.cases
    tuning = try_case(op, case, sim, config, ConfigClock(module), current, tries, reps=5,
                      warmup=1)  # fmt: skip
    # the repeated current configuration is timed once; the order is current first
    assert list(tuning.trials.times) == [current, tries[0], tries[1]]
    assert tuning.default == current
    # the fake clock: 9 us a span at threads=32 skip=1, 7 at threads=64; a span a direction
    assert tuning.directions[current] == {"forward": 9.0, "backward": 9.0}
    assert tuning.directions[tries[0]] == {"forward": 7.0, "backward": 7.0}
    assert tuning.trials.times[tries[0]] == pytest.approx(14.0)
    # skip=2 leaves elements unwritten: wrong, with no time, however fast the clock said
    assert tuning.trials.times[tries[1]] is None
    assert "forward: fail" in tuning.failures[tries[1]]


def test_the_report_rows_give_each_direction_and_the_ratio_to_the_current(tuned_project):  # noqa: F811
    from portkit.backends import create
    from portkit.cli.tune_tries import _case_dict
    from portkit.tuning.runner import try_case

    root, config, op, module = tuned_project
    current = (("threads", 32), ("skip", 1))
    tries = [(("threads", 64), ("skip", 1)), (("threads", 32), ("skip", 2))]
    (case,) = op.definition.cases
    tuning = try_case(op, case, create("sim", config), config, ConfigClock(module), current,
                      tries, reps=5, warmup=1)  # fmt: skip
    rows = json.loads(json.dumps(_case_dict(tuning)))["rows"]
    assert [r["current"] for r in rows] == [True, False, False]
    assert rows[1]["forward_us"] == 7.0 and rows[1]["backward_us"] == 7.0
    assert rows[1]["x_current"] == pytest.approx(18.0 / 14.0)
    assert rows[2]["us"] is None and rows[2]["x_current"] is None
    assert rows[2]["wrong"].startswith("forward: fail")


def test_a_bad_try_is_a_one_line_error_before_any_gpu_is_asked_for(tuned_project, cli):  # noqa: F811
    root, *_ = tuned_project
    result = cli(root, "tune", "twice", "--try", "threads=128")
    assert result.exit_code == 2
    assert "threads takes 32, 64 (its declared values); got 128" in result.output
    assert "Traceback" not in result.output
    assert not (root / "tuning").exists()


def test_a_good_try_without_a_gpu_says_it_needs_one(tuned_project, cli):  # noqa: F811
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    root, *_ = tuned_project
    result = cli(root, "tune", "twice", "--try", "threads=64,skip=1")
    assert result.exit_code == 2
    assert "portkit tune times the twin on this machine's GPU" in result.output


@pytest.mark.gpu
def test_on_a_gpu_a_try_times_both_directions_and_writes_nothing(cli):
    from pathlib import Path

    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")

    repo = Path(__file__).resolve().parents[2]
    table = repo / "tuning" / "sigmoid.json"
    before = table.read_bytes()
    result = cli(repo, "tune", "sigmoid", "--try", "fwd_packs=4", "--try", "fwd_threads=512",
                 "--reps", "5", "--warmup", "1", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index('{\n "op"') :])
    for case in data["cases"]:
        rows = case["rows"]
        assert rows[0]["current"]
        assert 4 in {r["config"]["fwd_packs"] for r in rows}
        assert 512 in {r["config"]["fwd_threads"] for r in rows}
        assert all(r["wrong"] is None and r["forward_us"] > 0 for r in rows)
        assert all(r["backward_us"] > 0 for r in rows)
    assert table.read_bytes() == before


def test_a_search_option_beside_try_is_an_error_not_ignored(tuned_project, cli):  # noqa: F811
    root, *_ = tuned_project
    result = cli(root, "tune", "twice", "--try", "threads=64", "--budget", "4",
                 "--time-limit", "10")  # fmt: skip
    assert result.exit_code == 2
    assert "--try times the configurations named, with no search: --budget, --time-limit" in (
        result.output
    )
