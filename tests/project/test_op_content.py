"""Bounded caches keyed by an op's content (portkit/project/op_content.py) and the one
session per project that ``portkit.load`` and ``portkit.check`` share (api/sessions.py):
what keeps a resident process's memory flat."""

from __future__ import annotations

import gc
import weakref

import portkit
from portkit.api import sessions
from portkit.project import shared
from portkit.project.op_content import by_op_content, op_content_key
from portkit.project.session import Session
from portkit.torch_op.layout import op_layout


def catalog_op(root, name):
    return Session.from_environment(root).op(name)


def test_one_content_one_entry_an_edit_a_new_one(make_project, sources):
    root = make_project({"oc_a": (sources.unary_op("oc_a", cases=sources.ONE_CASE), None)})
    calls = []

    @by_op_content(maxsize=2)
    def describe(op):
        calls.append(op.name)
        return op.name

    first, again = catalog_op(root, "oc_a"), catalog_op(root, "oc_a")
    assert first is not again and op_content_key(first) == op_content_key(again)
    describe(first)
    describe(again)  # another object, the same content: a hit
    assert calls == ["oc_a"]
    prototype = root / "prototypes" / "oc_a.py"
    prototype.write_text(prototype.read_text().replace("* 2.0", "* 3.0"))
    edited = catalog_op(root, "oc_a")
    assert op_content_key(edited) != op_content_key(first)
    describe(edited)
    assert calls == ["oc_a", "oc_a"] and describe.cache_len() == 2


def test_the_cache_is_bounded_and_keeps_no_op_alive(make_project, sources):
    ops = {f"oc_{n}": (sources.unary_op(f"oc_{n}", cases=sources.ONE_CASE), None) for n in "bcd"}
    root = make_project(ops)

    @by_op_content(maxsize=2)
    def name_of(op):
        return op.name

    alive = []
    for name in ops:
        op = catalog_op(root, name)
        name_of(op)
        alive.append(weakref.ref(op))
        del op
    gc.collect()
    assert name_of.cache_len() == 2
    assert all(ref() is None for ref in alive)  # functools.cache kept all three


def test_op_layout_holds_no_op(make_project, sources):
    root = make_project({"oc_e": (sources.unary_op("oc_e", cases=sources.ONE_CASE), None)})
    op = catalog_op(root, "oc_e")
    layout = op_layout(op)
    ref = weakref.ref(op)
    del op
    gc.collect()
    assert ref() is None and layout.outputs == 1
    assert op_layout(catalog_op(root, "oc_e")) is layout  # same content: the same layout


def test_load_and_check_share_one_session(make_project, sources, monkeypatch):
    sessions.forget()
    root = make_project({"oc_f": (sources.unary_op("oc_f", cases=sources.ONE_CASE), None)})
    monkeypatch.chdir(root)
    portkit.load("oc_f", "sim")
    shared = sessions.project_session()
    assert portkit.check("oc_f", quick=True, backends="sim").passed
    assert sessions.project_session() is shared
    assert "oc_f" in shared.catalog._ops  # loaded once, for both
    portkit.load("oc_f", "sim")
    assert sessions.project_session() is shared
    monkeypatch.setenv("PORTKIT_REPLAY", "0")  # read at each call, as before
    portkit.load("oc_f", "sim")
    assert shared.settings.replay == "off"
    sessions.forget()


def test_sessions_are_bounded(make_project, sources, monkeypatch):
    sessions.forget()
    roots = [make_project({}) for _ in range(sessions.MAX_SESSIONS + 2)]
    for root in roots:
        sessions.project_session(root, require=False)
    kept = list(shared._sessions)
    assert kept == [r.resolve() for r in roots[-sessions.MAX_SESSIONS :]]
    sessions.forget()
