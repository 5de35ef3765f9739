"""Run an op written from the docs alone through `portkit check --json` in a throwaway
project."""

from __future__ import annotations

import json

import pytest

from tests.user_ops.op_files import sources


@pytest.fixture
def check_op(make_project, cli):
    """``check_op(op, twin=None)`` -> (result, rows) of `portkit check OP --json` in a
    project of the op's prototype and ``twin`` (default: its own twin)."""

    def run(op: str, twin: str | None = None):
        prototype, own_twin = sources(op)
        root = make_project({op: (prototype, own_twin if twin is None else twin)})
        result = cli(root, "check", op, "--json")
        return result, json.loads(result.stdout)["results"]

    return run
