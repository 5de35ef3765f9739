"""`portkit lint`'s resource table through the caches: the prototype's usage kept by the
lint cache (lint/findings.py remembered_prototype_usages), the twin's beside its cubins
(lint/resources.py twin_usages): a second lint compiles nothing, an edited twin is
measured again while the prototype's rows are still served, and the rows are the same."""

from __future__ import annotations

import pytest

import portkit.lint.findings as findings
import portkit.lint.resources as resources
from portkit.build.compile_checks import signatures_by_dtype
from portkit.lint.ptx import ResourceUsage
from portkit.project.discovery import load_op
from portkit.project.session import Session


def fresh(root):
    config = Session.from_environment(root).config
    op = load_op(
        "rc_twice", config.prototypes_dir / "rc_twice.py", config.cuda_src_dir / "rc_twice.cu"
    )
    return config, op


def refuse(*args, **kwargs):
    raise AssertionError("computed again: the cache should have served it")


@pytest.fixture(autouse=True)
def cache_on(monkeypatch):
    monkeypatch.delenv("PORTKIT_PROTOTYPE_CACHE", raising=False)


def test_a_second_lint_is_served_and_an_edited_twin_is_measured_again(
    make_project, sources, monkeypatch
):
    root = make_project(
        {"rc_twice": (sources.unary_op("rc_twice"), sources.unary_twin("rc_twice"))}
    )
    config, op = fresh(root)
    first = findings.resource_rows(op, signatures_by_dtype(op), config)
    assert {r.side for r in first} == {"prototype", "twin"}

    with monkeypatch.context() as patch:
        patch.setattr(resources, "prototype_usage", refuse)
        patch.setattr(resources, "_compiled_twin_usages", refuse)
        config, op = fresh(root)
        assert findings.resource_rows(op, signatures_by_dtype(op), config) == first

    twin = root / "cuda_src" / "rc_twice.cu"
    twin.write_text(twin.read_text().replace("x[i] * T(2)", "x[i] * T(2) + T(0)"))
    with monkeypatch.context() as patch:
        patch.setattr(resources, "prototype_usage", refuse)  # the prototype is unchanged
        config, op = fresh(root)
        again = findings.resource_rows(op, signatures_by_dtype(op), config)
    assert [r.usage for r in again if r.side == "prototype"] == [
        r.usage for r in first if r.side == "prototype"
    ]


def test_without_a_config_nothing_is_kept(make_project, sources, monkeypatch):
    root = make_project(
        {"rc_twice": (sources.unary_op("rc_twice"), sources.unary_twin("rc_twice"))}
    )
    config, op = fresh(root)
    findings.resource_rows(op, signatures_by_dtype(op))
    assert not list((config.cache_dir / "twins").glob("*.resources.json"))


def test_a_usage_survives_its_json():
    usage = ResourceUsage(
        registers=40,
        spill_store_bytes=0,
        spill_load_bytes=4,
        shared_bytes=128,
        local_bytes=8,
        f64_instructions=3,
        global_loads={16: 2, 4: 1},
        global_stores={2: 5},
        special_functions={"ex2.approx.f32": 1},
    )
    assert ResourceUsage.from_json(usage.to_json()) == usage
    with pytest.raises((TypeError, KeyError, ValueError)):
        ResourceUsage.from_json({"registers": 1})
