"""``portkit tune`` on a CPU: the search strategies with a fake evaluation, the whole
tuning path (bench's runner, every timed output checked) on the simulator with a fake
clock whose times favour a configuration that computes a wrong result, the table it
writes, ``portkit check`` running every configuration that table can pick, and the
command's errors. Nothing here measures a time."""

from __future__ import annotations

import json

import pytest

from portkit.errors import PortkitError
from portkit.tuning.search import Trials, defaults, grid, search

DECLARED = {"a": [1, 2, 3], "b": [10, 20], "c": ["x", "y"]}


def _fake(times):
    """evaluate() timing each configuration by ``times(config dict)``, None = wrong."""
    batches = []

    def evaluate(batch):
        batches.append(list(batch))
        return {c: times(dict(c)) for c in batch}

    return evaluate, batches


def _cost(config):
    return 100.0 - 10 * config["a"] - config["b"] / 10 + (5 if config["c"] == "y" else 0)


def test_grid_times_every_configuration_in_one_batch_and_picks_the_fastest():
    evaluate, batches = _fake(_cost)
    trials = search(DECLARED, evaluate, "grid", budget=12)
    assert len(batches) == 1 and len(batches[0]) == 12 == len(grid(DECLARED))
    assert dict(trials.best()[0]) == {"a": 3, "b": 20, "c": "x"}


def test_a_wrong_configuration_is_never_chosen_however_fast():
    def times(config):
        return None if config["a"] == 3 else _cost(config) - (1000 if config["a"] == 3 else 0)

    for strategy in ("grid", "greedy", "random"):
        evaluate, _ = _fake(times)
        best = search(DECLARED, evaluate, strategy, budget=12).best()
        assert best is not None and dict(best[0])["a"] != 3, strategy
        assert dict(best[0]) == {"a": 2, "b": 20, "c": "x"} or strategy == "random"


def test_nothing_correct_means_no_best():
    evaluate, _ = _fake(lambda c: None)
    assert search(DECLARED, evaluate, "grid", budget=12).best() is None


def test_greedy_moves_one_knob_at_a_time_from_the_defaults_within_the_budget():
    evaluate, batches = _fake(_cost)
    trials = search(DECLARED, evaluate, "greedy", budget=8)
    assert batches[0] == [defaults(DECLARED)]
    assert all(len({n for n, v in c if dict(defaults(DECLARED))[n] != v}) <= 1 for c in batches[1])
    assert len(trials.times) <= 8
    assert dict(trials.best()[0]) == {"a": 3, "b": 20, "c": "x"}


def test_auto_is_grid_within_the_budget_and_greedy_past_it():
    evaluate, batches = _fake(_cost)
    search(DECLARED, evaluate, "auto", budget=12)
    assert len(batches) == 1
    evaluate, batches = _fake(_cost)
    search(DECLARED, evaluate, "auto", budget=11)
    assert len(batches) > 1


def test_random_includes_the_defaults_and_respects_the_budget():
    evaluate, batches = _fake(_cost)
    trials = search(DECLARED, evaluate, "random", budget=5, seed=3)
    assert len(trials.times) == 5 and defaults(DECLARED) in trials.times


@pytest.mark.parametrize(
    ("strategy", "budget", "message"),
    [("grid", 4, "the grid has 12 configurations, more than --budget 4"), ("best", 4, "unknown"),
     ("grid", 0, "at least 1")],
)  # fmt: skip
def test_search_errors(strategy, budget, message):
    with pytest.raises(PortkitError, match=message):
        search(DECLARED, _fake(_cost)[0], strategy, budget)


def test_trials_best_ignores_wrong_ones():
    assert Trials({(("a", 1),): None, (("a", 2),): 5.0}).best() == ((("a", 2),), 5.0)


# -- the whole path on the simulator -------------------------------------------------------

# `split` is a knob that changes nothing but the launch (blocks of 32 or 64 threads); with
# `skip` = 2 the launcher covers only every other block: a wrong, and fast, configuration.
TUNED_OP = """\
import torch
from numba import cuda

import portkit

LAST = {}


@cuda.jit
def twice_fwd(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * 2.0


@cuda.jit
def twice_bwd(x, dy, dx, n):
    i = cuda.grid(1)
    if i < n:
        dx[i] = dy[i] * 2.0


@portkit.op(
    reference=lambda x: x * 2,
    cases=[portkit.cases.custom("float32-n200", [(200,)])],
    knobs={"threads": [32, 64], "skip": [1, 2]},
)
class Twice:
    def forward(k, x):
        kn = portkit.knobs(k, x)
        LAST.update(kn.as_dict())
        out = k.empty_like(x)
        n = x.numel()
        k.twice_fwd[portkit.cdiv(n, kn.threads * kn.skip), kn.threads](x, out, n)
        return out, (x,)

    def backward(k, saved, dy):
        (x,) = saved
        kn = portkit.knobs(k, x)
        LAST.update(kn.as_dict())
        dx = k.empty_like(x)
        n = x.numel()
        k.twice_bwd[portkit.cdiv(n, kn.threads), kn.threads](x, dy, dx, n)
        return (dx,)
"""

# Per configuration, the microseconds the fake clock reports: skip=2 is the fastest.
FAKE_US = {(32, 1): 9.0, (64, 1): 7.0, (32, 2): 1.0, (64, 2): 2.0}


class ConfigClock:
    """A clock whose spans last what ``FAKE_US`` says for the configuration the launcher
    ran last (the prototype module's ``LAST``)."""

    cover_us = 0.0

    def __init__(self, module):
        self.module, self.now = module, 0.0

    def prepare(self, spin=True):
        pass

    def mark(self):
        self.now += FAKE_US[(self.module.LAST["threads"], self.module.LAST["skip"])]
        return self.now

    def elapsed_us(self, start, end):
        return end - start

    def covers(self, host_us):
        return True


@pytest.fixture
def tuned_project(make_project, load_op):
    import sys

    root = make_project({"twice": (TUNED_OP, None)})
    config, op = load_op(root, "twice")
    return root, config, op, sys.modules[op.definition.forward.__module__]


def test_tune_picks_the_fastest_correct_configuration_never_the_wrong_one(tuned_project):
    from portkit.backends import create
    from portkit.project.tuning_table import merge_results, table_path
    from portkit.tuning.runner import table_results, tune_op

    root, config, op, module = tuned_project
    sim = create("sim", config)
    tunings = tune_op(op, op.definition.cases, sim, config, ConfigClock(module), reps=5, warmup=1)
    (tuning,) = tunings
    assert tuning.buckets == ("float32-256",)
    assert {dict(c)["skip"] for c in tuning.failures} == {2}  # caught by the check
    assert all("forward: fail" in why for why in tuning.failures.values())
    config_, time = tuning.best
    assert dict(config_) == {"threads": 64, "skip": 1}
    # forward and backward, each a span of two marks of 7 us
    assert time == pytest.approx(14.0) and tuning.default_us == pytest.approx(18.0)
    merge_results(table_path(config, "twice"), op, "FakeGPU", table_results(tunings))
    table = json.loads((root / "tuning" / "twice.json").read_text())
    entry = table["gpus"]["FakeGPU"]["float32-256"]
    assert entry["config"] == {"threads": 64, "skip": 1} and entry["case"] == "float32-n200"


def test_check_runs_every_configuration_the_table_can_pick(tuned_project, cli):
    root, *_ = tuned_project
    (root / "tuning").mkdir()
    (root / "tuning" / "twice.json").write_text(json.dumps({
        "format": 1, "knobs": {"threads": [32, 64], "skip": [1, 2]},
        "gpus": {"H": {"float32-256": {"config": {"threads": 64}}},
                 "G": {"float32-256": {"config": {"threads": 64, "skip": 1}},
                       "float32-512": {"config": {"threads": 64, "skip": 2}}},
                 "K": {"float32-256": {"config": {"skip": 2}}}},
    }))  # fmt: skip
    # the case is 256 floats: float32-512's configuration is never picked for it
    result = cli(root, "check", "twice", "--backend", "sim", "--no-compile", "--json")
    rows = json.loads(result.output[result.output.index('{\n "results"') :])["results"]
    forward = {r["backend"]: r["status"] for r in rows if r["check"] == "forward"}
    assert forward == {
        "sim (defaults)": "pass",
        "sim (threads=64 skip=1)": "pass",
        "sim (threads=32 skip=2)": "fail",  # a table that picks a wrong configuration fails
    }
    assert result.exit_code == 1


def test_check_without_a_table_runs_the_defaults_as_before(tuned_project, cli):
    root, *_ = tuned_project
    result = cli(root, "check", "twice", "--backend", "sim", "--no-compile", "--json")
    rows = json.loads(result.output[result.output.index('{\n "results"') :])["results"]
    assert {r["backend"] for r in rows if r["check"] == "forward"} == {"sim"}
    assert result.exit_code == 0


def test_a_stale_table_is_a_one_line_error(tuned_project, cli):
    root, *_ = tuned_project
    (root / "tuning").mkdir()
    (root / "tuning" / "twice.json").write_text(
        '{"format": 1, "gpus": {"H": {"float32-256": {"config": {"threads": 128}}}}}'
    )
    result = cli(root, "check", "twice", "--backend", "sim", "--no-compile")
    assert "knob threads=128 of op twice is not among its declared values [32, 64]" in (
        result.output
    )
    assert result.exit_code != 0


def test_tune_without_a_gpu_exits_2(tuned_project, cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    root, *_ = tuned_project
    result = cli(root, "tune", "twice")
    assert result.exit_code == 2
    assert "portkit tune times the twin on this machine's GPU" in result.output
    assert not (root / "tuning").exists()


def test_tune_of_an_op_without_knobs_says_how_to_declare_them(make_project, sources, cli):
    root = make_project({"plain": (sources.unary_op("plain"), None)})
    result = cli(root, "tune", "plain")
    assert result.exit_code == 2 and "op plain declares no knobs" in result.output
