"""``portkit tune --time-limit`` and a stopped run, on a CPU: the command's real path with
the simulator standing in for the GPU twin, test_tune's fake clock for CUDA events and a
scripted ``time.monotonic``. Each tuned case is in the table as soon as it is done; the
cases past the limit are named with the command that tunes them, and the exit code is 3
(not everything asked for ran); Ctrl-C keeps what was finished."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.tuning.test_tune import TUNED_OP, ConfigClock

# The same op with two small bench cases (tune times the bench cases; without them an op is
# timed grown to 256 MiB), the second in another shape bucket (1000 floats: float32-1024).
TWO_CASES = TUNED_OP.replace(
    'cases=[portkit.cases.custom("float32-n200", [(200,)])],',
    'cases=[portkit.cases.custom("float32-n200", [(200,)])],\n'
    '    bench=[portkit.cases.custom("float32-n200", [(200,)]), '
    'portkit.cases.custom("float32-n1000", [(1000,)])],',
)


@pytest.fixture
def gpu_free_tune(make_project, load_op, monkeypatch):
    """A project with the two-case op, and ``portkit tune`` wired to run it here."""
    import sys

    import torch

    import portkit.backends
    import portkit.bench.timing
    import portkit.cli.tune
    import portkit.tuning.runner

    assert TWO_CASES != TUNED_OP
    root = make_project({"twice": (TWO_CASES, None)})
    config, op = load_op(root, "twice")
    name = op.definition.forward.__module__  # the command imports the op afresh: its module
    real_create = portkit.backends.create
    monkeypatch.setattr(
        portkit.backends, "create", lambda name, cfg: real_create("sim", cfg) if name == "twin"
        else real_create(name, cfg)
    )  # fmt: skip
    monkeypatch.setattr(portkit.bench.timing, "CudaClock", lambda: ConfigClock(sys.modules[name]))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "FakeGPU")

    def script(*readings):
        """time.monotonic() for the command and the runner: these readings in turn, or an
        exception instance raised when its turn comes."""
        left = list(readings)

        def monotonic():
            value = left.pop(0)
            if isinstance(value, BaseException):
                raise value
            return value

        clock = SimpleNamespace(monotonic=monotonic)
        monkeypatch.setattr(portkit.cli.tune, "time", clock)
        monkeypatch.setattr(portkit.tuning.runner, "time", clock)

    return root, script


def _table(root):
    return json.loads((root / "tuning" / "twice.json").read_text())["gpus"]["FakeGPU"]


def test_cases_past_the_time_limit_are_named_and_the_run_exits_3(gpu_free_tune, cli):
    root, script = gpu_free_tune
    # the deadline is read at 0 (limit 5 s); the first case starts at 1, the second at 7
    script(0.0, 1.0, 7.0)
    result = cli(root, "tune", "twice", "--time-limit", "5", "--reps", "5", "--json")
    assert result.exit_code == 3, result.output
    data = json.loads(result.stdout)  # the line below is on stderr: stdout stays JSON
    assert [c["case"] for c in data["cases"]] == ["float32-n200"]
    (case,) = data["cases"]  # every configuration timed is listed, the winner among them
    assert len(case["trials"]) == case["tried"] > 1
    best = next(t for t in case["trials"] if t["config"] == case["best"]["config"])
    assert best["us"] == case["best"]["us"] == best["forward_us"] + best["backward_us"]
    assert data["not_tuned"] == ["float32-n1000"] and data["written"] is True
    assert list(_table(root)) == ["float32-256"]  # the first case only, written
    assert (
        "not tuned, past --time-limit 5 s: float32-n1000; tune them with "
        "`portkit tune twice --case float32-n1000`"
    ) in result.stderr


def test_within_the_time_limit_every_case_is_tuned_and_the_run_exits_0(gpu_free_tune, cli):
    root, script = gpu_free_tune
    script(0.0, 1.0, 2.0)
    result = cli(root, "tune", "twice", "--time-limit", "5", "--reps", "5")
    assert result.exit_code == 0, result.output
    assert sorted(_table(root)) == ["float32-1024", "float32-256"]
    assert "not tuned" not in result.output


def test_ctrl_c_keeps_the_cases_already_tuned(gpu_free_tune, cli):
    root, script = gpu_free_tune
    script(0.0, 1.0, KeyboardInterrupt())  # Ctrl-C as the second case would start
    result = cli(root, "tune", "twice", "--time-limit", "60", "--reps", "5")
    assert result.exit_code == 130, result.output
    assert list(_table(root)) == ["float32-256"]
    assert "kept in" in result.output and "twice.json: float32-n200" in result.output
    assert "interrupted" in result.output


def test_a_dry_run_past_the_limit_writes_nothing(gpu_free_tune, cli):
    root, script = gpu_free_tune
    script(0.0, 1.0, 7.0)
    result = cli(root, "tune", "twice", "--time-limit", "5", "--reps", "5", "--dry-run")
    assert result.exit_code == 3, result.output
    assert not (root / "tuning" / "twice.json").exists()


@pytest.mark.parametrize("limit", ["0", "-1", "soon"])
def test_a_time_limit_that_is_not_a_positive_number_is_a_usage_error(gpu_free_tune, cli, limit):
    root, _ = gpu_free_tune
    result = cli(root, "tune", "twice", "--time-limit", limit)
    assert result.exit_code == 2 and "--time-limit" in result.output
