"""``--portkit-shard K/N``: the shards partition the suite, keep ops whole where that
balances, split a heavy op, and read and write the durations file."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys

import pytest

from portkit.pytest_plugin import shards
from tests.pytest_runs import pytest_runs
from tests.test_plugin import plugin_args


def suite(rng: random.Random, ops: int, most: int) -> list[str]:
    return [
        f"prototypes/op{o}.py::sim[float32-n{i}]"
        for o in range(ops)
        for i in range(rng.randint(1, most))
    ]


@pytest.mark.parametrize("seed", range(30))
def test_shards_partition_the_items(seed):
    rng = random.Random(seed)
    ids = suite(rng, rng.randint(1, 12), 40) + [f"tests/test_x.py::t{i}" for i in range(5)]
    recorded = {n: rng.uniform(0.01, 30) for n in ids if rng.random() < 0.7} if seed % 2 else {}
    for count in range(1, 9):
        got = shards.partition(ids, count, recorded)
        assert len(got) == count
        assert set().union(*got) == set(ids)
        assert sum(len(s) for s in got) == len(set(ids))  # pairwise disjoint
        shuffled = ids[:]
        rng.shuffle(shuffled)
        assert shards.partition(shuffled, count, recorded) == got  # order does not matter


def test_light_ops_stay_whole_and_counts_balance():
    ids = [f"prototypes/op{o}.py::sim[c{i}]" for o in range(8) for i in range(10)]
    got = shards.partition(ids, 4, {})
    for shard in got:
        ops = {shards.group_of(n) for n in shard}
        assert sum(1 for n in ids if shards.group_of(n) in ops) == len(shard)  # whole ops
        assert len(shard) == 20


def test_a_heavy_op_is_split_by_its_durations():
    heavy = [f"prototypes/matmul.py::sim[c{i}]" for i in range(8)]
    light = [f"prototypes/op{o}.py::sim[c{i}]" for o in range(4) for i in range(4)]
    recorded = {n: 10.0 for n in heavy} | {n: 0.5 for n in light}
    got = shards.partition(heavy + light, 4, recorded)
    loads = [sum(recorded[n] for n in shard) for shard in got]
    assert max(loads) - min(loads) <= 10.0  # at most one item apart
    assert max(loads) <= (sum(recorded.values()) / 4) + 10.0
    assert all(any(n in heavy for n in shard) for shard in got)  # matmul on every shard


def test_unrecorded_items_weigh_the_median_of_the_recorded_ones():
    weights = shards.item_weights(["a", "b", "c", "d"], {"a": 1.0, "b": 3.0, "c": 100.0})
    assert weights == {"a": 1.0, "b": 3.0, "c": 100.0, "d": 3.0}
    assert shards.item_weights(["a", "b"], {"z": 5.0}) == {"a": 1.0, "b": 1.0}


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "a/b", "3", "-1/2", "1/2/3", ""])
def test_a_bad_shard_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="K/N|between 1 and N"):
        shards.parse_shard(text)


def test_parse_shard():
    assert shards.parse_shard("2/4") == shards.Shard(2, 4)
    assert str(shards.parse_shard(" 1/ 3")) == "1/3"


def test_durations_file_merges_unsharded_and_holds_a_shards_own_items(tmp_path):
    path = tmp_path / "d.json"
    assert shards.read_durations(path) == {}
    shards.write_durations(path, {"a": 1.0, "b": 2.0}, sharded=False)
    shards.write_durations(path, {"b": 5.0}, sharded=False)
    assert shards.read_durations(path) == {"a": 1.0, "b": 5.0}
    shards.write_durations(path, {"c": 7.0}, sharded=True)
    assert shards.read_durations(path) == {"c": 7.0}
    path.write_text('{"a": "slow"}')
    with pytest.raises(shards.DurationsError, match="node id -> seconds"):
        shards.read_durations(path)
    path.write_text("not json")
    with pytest.raises(shards.DurationsError, match="not a durations file"):
        shards.read_durations(path)


# -- the plugin, end to end in a subprocess -------------------------------------------------


@pytest.fixture
def project(pytester, make_project, sources):
    ops = {
        f"shard_op{k}": (sources.unary_op(f"shard_op{k}"), sources.unary_twin(f"shard_op{k}"))
        for k in range(3)
    }
    return make_project(ops, at=pytester.path)


def collected(pytester, *arg_lists: list[str]) -> list[list[str]]:
    """The items each of ``arg_lists`` collects (`pytest prototypes --collect-only -q`),
    the collections run one after another in one fresh process (tests/pytest_runs.py)."""
    common = [*plugin_args(), "prototypes", "-p", "no:cacheprovider", "--collect-only", "-q"]
    found = []
    for result in pytest_runs(pytester, *(common + list(args) for args in arg_lists)):
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        found.append([line for line in result.outlines if re.match(r"^prototypes/\w+\.py::", line)])
    return found


def test_the_plugins_shards_partition_the_collected_items(pytester, project):
    everything, *parts = collected(
        pytester, [], *(["--portkit-shard", f"{k}/3"] for k in (1, 2, 3))
    )
    assert len(everything) > 10
    assert sorted(n for part in parts for n in part) == sorted(everything)
    assert all(parts)
    for part in parts:  # three light ops over three shards: one whole op each
        assert len({shards.group_of(n) for n in part}) == 1
        assert part == [n for n in everything if n in part]  # collection order kept


def test_a_bad_shard_is_a_usage_error(pytester, project):
    result = pytester.runpytest_subprocess(*plugin_args(), "prototypes", "--portkit-shard", "4/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--portkit-shard" in err and "between 1 and N" in err
    assert "Traceback" not in err + result.stdout.str()
    (pytester.path / "bad.json").write_text("[1, 2]")
    bad = pytester.runpytest_subprocess(
        *plugin_args(), "prototypes", "--portkit-shard", "1/2", "--portkit-durations", "bad.json"
    )
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.json: not a durations file" in bad.stderr.str()


def test_a_shard_records_the_durations_of_its_own_items(pytester, project):
    result = pytester.runpytest_subprocess(
        *plugin_args(),
        "prototypes",
        "-p",
        "no:cacheprovider",
        "-v",
        "-m",
        "sim",
        "--portkit-shard",
        "2/3",
        "--portkit-durations",
        "durations.json",
    )
    assert result.ret == 0, result.stdout.str()
    assert "portkit shard 2/3 (whole ops, balanced by item count)" in result.stdout.str()
    # the shard's items, as its own -v lines name them (one line each, its outcome)
    mine = [
        m.group(1)
        for m in map(re.compile(r"^(prototypes/\w+\.py::\S+) PASSED").match, result.outlines)
        if m
    ]
    recorded = json.loads((pytester.path / "durations.json").read_text())
    assert sorted(recorded) == sorted(mine) and mine
    assert len(mine) == result.parseoutcomes()["passed"]  # no item left out of the list
    assert all(seconds > 0 for seconds in recorded.values())


def test_xdist_workers_inside_a_shard_still_get_a_gpu_each(monkeypatch):
    """A shard on a 4-GPU runner with ``-n 4``: worker gwN gets GPU N (the pinning is per
    process and knows nothing of shards); a shard given one GPU leaves it as it is."""
    from portkit.pytest_plugin import pin_worker_gpu

    for worker, gpu in (("gw0", "0"), ("gw3", "3"), ("gw5", "1")):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        assert pin_worker_gpu() == gpu
        assert os.environ["CUDA_VISIBLE_DEVICES"] == gpu
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    assert pin_worker_gpu() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert pin_worker_gpu(pin=False) is None


def test_xdist_workers_share_the_cores_instead_of_a_thread_per_core_each(monkeypatch):
    """16 workers on a 64-core runner each get 4 of torch's threads (before the prototypes
    import torch, and torch told as well where a conftest imported it); a user's own
    OMP_NUM_THREADS wins, and a process outside xdist is left alone."""
    import types

    from portkit.checking.parallel import gpus
    from portkit.pytest_plugin import share_worker_threads

    told = []
    monkeypatch.setattr(gpus, "usable_cores", lambda: 64)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(set_num_threads=told.append))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "16")
    assert share_worker_threads() == 4
    assert os.environ["OMP_NUM_THREADS"] == "4" and told == [4]
    assert share_worker_threads() is None  # set now: kept, as a user's setting would be
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "128")
    assert share_worker_threads() == 1  # never zero threads
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert share_worker_threads() is None and "OMP_NUM_THREADS" not in os.environ
