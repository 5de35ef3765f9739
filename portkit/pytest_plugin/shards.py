"""``--portkit-shard K/N``: the collected items split into N deterministic shards, so a
suite spreads over N machines (a CI matrix), each running ``pytest ... --portkit-shard K/N``.

The unit is the op: the items of one prototype file (for other test files, the file)
stay in one shard, so a shard compiles and caches only its own ops. Ops go to the
least-loaded shard, heaviest first (longest-processing-time first). An op heavier than
a shard's fair share (the total over N) is split item by item instead, so one slow op
cannot leave the other shards idle. Weights are the recorded durations of
``--portkit-durations FILE`` (an item missing from it weighs the median of those
present); without the file every item weighs 1, a balanced split by item count.

Every shard computes the same split from the same inputs (the collected node ids, the
durations file), and each keeps the items assigned to it, so the N shards partition the
suite: every item runs in exactly one. Shards on different machines must therefore
collect the same items and read the same durations file (the CI artefact).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from portkit.atomic_write import write_atomic


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: K must be between 1 and N")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"K/N"`` -> Shard; argparse's ``type=``: a bad value is a usage error (exit 4)."""
    index, slash, count = text.partition("/")
    if not slash or not index.strip().isdigit() or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not K/N (shard K of N, 1 <= K <= N), e.g. --portkit-shard 2/4"
        )
    try:
        return Shard(int(index), int(count))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def group_of(nodeid: str) -> str:
    """The op of a generated item (its prototype file), else the test file."""
    return nodeid.split("::", 1)[0]


def item_weights(nodeids: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each item's weight: its recorded seconds, the median of the recorded ones where it
    has none, and 1 for every item where none of them is recorded."""
    known = [durations[n] for n in nodeids if n in durations]
    if not known:
        return {n: 1.0 for n in nodeids}
    typical = statistics.median(known)
    return {n: durations.get(n, typical) for n in nodeids}


def partition(nodeids: Sequence[str], count: int, durations: Mapping[str, float]) -> list[set[str]]:
    """The items of each of ``count`` shards (index 0 is shard 1/N). Depends only on the
    set of ``nodeids`` and ``durations``, never on collection order."""
    ids = sorted(set(nodeids))
    weight = item_weights(ids, durations)
    groups: dict[str, list[str]] = {}
    for nodeid in ids:
        groups.setdefault(group_of(nodeid), []).append(nodeid)
    share = sum(weight.values()) / count
    units: list[tuple[float, str, list[str]]] = []
    for name, members in groups.items():
        total = sum(weight[n] for n in members)
        if total > share and len(members) > 1:
            units += [(weight[n], n, [n]) for n in members]
        else:
            units.append((total, name, members))
    shards: list[set[str]] = [set() for _ in range(count)]
    loads = [0.0] * count
    for total, _, members in sorted(units, key=lambda u: (-u[0], u[1])):
        lightest = min(range(count), key=lambda k: (loads[k], k))
        shards[lightest].update(members)
        loads[lightest] += total
    return shards


class DurationsError(ValueError):
    """A durations file that is not a JSON object of node id -> seconds."""


def read_durations(path: Path) -> dict[str, float]:
    """The recorded seconds per node id; empty where the file does not exist yet."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DurationsError(f"{path}: not a durations file ({exc})") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in data.values()
    ):
        raise DurationsError(f"{path}: not a durations file (a JSON object of node id -> seconds)")
    return {str(k): float(v) for k, v in data.items()}


def write_durations(path: Path, fresh: Mapping[str, float], sharded: bool) -> None:
    """Record this run's seconds per item. Unsharded, they update the file's entries
    (an item not run this time keeps its old one); a shard writes its own items only,
    so the N shards' files add up to the whole suite (``jq -s add``) with no stale
    entry from a shard that did not run an item."""
    merged = {} if sharded else read_durations(path)
    merged.update(fresh)
    write_atomic(path, json.dumps(dict(sorted(merged.items())), indent=1) + "\n")


class DurationRecorder:
    """A pytest plugin object: each item's setup, call and teardown seconds, written to
    the durations file when the session ends. Registered in the process that sees every
    report: the only one without xdist, the controller with it (workers record nothing)."""

    def __init__(self, path: Path, sharded: bool) -> None:
        self.path, self.sharded = path, sharded
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        if self.seconds:
            write_durations(self.path, self.seconds, self.sharded)
