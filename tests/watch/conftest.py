"""A throwaway project for the watch engine and the notebook API: one op with a twin,
edited between runs."""

from __future__ import annotations

from pathlib import Path

import pytest


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (old, path)
    path.write_text(text.replace(old, new))


@pytest.fixture
def watched(make_project, sources, monkeypatch):
    """``watched(name)`` -> the root of a project with op ``name`` (kernel ``x * 2``, a
    twin) and a second, untouched op ``name + "_other"``; the working directory is it."""

    def make(name: str) -> Path:
        other = name + "_other"
        root = make_project(
            {
                name: (sources.unary_op(name, cases=sources.ONE_CASE), sources.unary_twin(name)),
                other: (sources.unary_op(other, cases=sources.ONE_CASE), sources.unary_twin(other)),
            }
        )
        monkeypatch.chdir(root)
        return root

    return make
