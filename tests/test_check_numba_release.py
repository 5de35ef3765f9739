"""scripts/check_numba_release.py's offline parts: reading the index's answer, deciding
which requirements of a candidate release go into its temporary folder, reading pytest's
report and writing its own. (The script itself downloads, so nothing here runs it.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_numba_release.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("check_numba_release", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_newest_version_is_read_from_pip_index(script):
    output = (
        "numba-cuda (0.31.2)\n"
        "Available versions: 0.31.2, 0.31.1, 0.30.4\n"
        "  INSTALLED: 0.30.4\n  LATEST:    0.31.2\n"
    )
    assert script.newest_version(output) == "0.31.2"


def test_an_index_answer_without_a_version_cannot_be_checked(script):
    with pytest.raises(script.CheckError, match="named no version"):
        script.newest_version("WARNING: nothing here\n")


def test_only_unmet_requirements_of_the_extra_in_use_are_installed_beside(script):
    requirements = [
        "numba>=0.60.0",
        "cuda-core<2.0.0,>=1.3",
        "packaging",
        'cuda-bindings<13.0.0,>=12.9.1; extra == "cu12"',
        'nvidia-nvjitlink<14.0.0,>=13.0.0; extra == "cu13"',
        "brand-new-dependency>=1",
    ]
    installed = {
        "numba": "0.68.1",
        "cuda-core": "1.2.2",
        "packaging": "24.0",
        "cuda-bindings": "13.5.0",
        "nvidia-nvjitlink": "13.0.88",
    }
    unmet = script.unmet_requirements(requirements, installed.get, extra="cu13")
    assert unmet == ["cuda-core<2.0.0,>=1.3", "brand-new-dependency>=1"]


def test_pytest_report_gives_counts_and_the_broken_tests(script):
    xml = """<?xml version="1.0"?>
    <testsuites><testsuite name="pytest">
      <testcase classname="tests.test_a" name="test_ok"/>
      <testcase classname="tests.test_a" name="test_bad"><failure message="x"/></testcase>
      <testcase classname="tests.test_b" name="test_gone"><error message="y"/></testcase>
      <testcase classname="tests.test_b" name="test_gpu"><skipped message="no GPU"/></testcase>
    </testsuite></testsuites>"""
    summary = script.junit_summary(xml)
    assert summary == {
        "passed": 1,
        "failed": 2,
        "skipped": 1,
        "broken": ["tests.test_a::test_bad", "tests.test_b::test_gone"],
    }


def test_the_report_names_what_moved_and_what_broke(script):
    report = {
        "date": "2026-11-24",
        "candidate": "0.31.0",
        "installed": "0.30.4",
        "also_installed": ["cuda-core>=1.3"],
        "moved": ["numba.cuda.core.caching:_CacheLocator"],
        "tests": {"passed": 3, "failed": 1, "skipped": 0, "broken": ["t::test_cache"]},
        "ok": False,
    }
    text = script.render(report)
    assert text.splitlines()[0] == "numba-cuda 0.31.0 (pinned here: 0.30.4), checked 2026-11-24"
    assert "private names moved: numba.cuda.core.caching:_CacheLocator" in text
    assert "broke: t::test_cache" in text
    assert "also in the temporary folder: cuda-core>=1.3" in text
    assert text.endswith("verdict: keep the pin")
    assert "verdict: the pin can move" in script.render(
        {**report, "moved": [], "tests": {**report["tests"], "failed": 0, "broken": []}, "ok": True}
    )


def test_an_index_that_does_not_answer_is_exit_2_and_nothing_is_installed(
    script, monkeypatch, capsys
):
    calls = []

    class Failed:
        returncode, stdout, stderr = 1, "", "ERROR: could not reach the index"

    def fake_pip(*args):
        calls.append(args)
        return Failed()

    monkeypatch.setattr(script, "_pip", fake_pip)
    assert script.main(["--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and "could not reach the index" in report["error"]
    assert calls == [("index", "versions", "numba-cuda")]


def test_every_named_adapter_test_exists(script):
    root = SCRIPT.parents[1]
    for test in script.ADAPTER_TESTS:
        path, _, name = test.partition("::")
        assert (root / path).is_file(), path
        if name:
            assert f"def {name}(" in (root / path).read_text(), test
