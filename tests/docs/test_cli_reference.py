"""docs/cli.md and docs/pytest-plugin.md say what the click commands and the pytest plugin
say today (scripts/cli_reference.py writes both)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generator():
    path = REPO / "scripts" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("portkit_script_cli_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_the_references_are_current(generator):
    assert generator.stale() == [], (
        "stale: run PYTHONPATH=$PWD python scripts/cli_reference.py and commit docs/"
    )


def test_every_command_is_in_the_reference(generator):
    from portkit.cli.app import main

    page = generator.render_cli()
    for name in main.commands:
        assert f"\n## portkit {name}\n" in page
        assert f"Usage: portkit {name} " in page


def test_every_marker_and_option_of_the_plugin_is_in_its_reference(generator):
    import portkit.pytest_plugin as plugin

    page = generator.render_plugin()
    for marker in plugin.MARKERS:
        assert f"| `{marker}` |" in page
    for option in ("--portkit-simt", "--portkit-seeds N", "--portkit-bench-baseline FILE"):
        assert f"| `{option}` |" in page
    assert "--portkit-under-sanitizer" not in page  # internal: help=SUPPRESS


def test_check_mode_names_the_stale_page_in_one_line(generator, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(generator, "DOCS", tmp_path)
    (tmp_path / "cli.md").write_text("# an old page\n")
    assert generator.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "docs/cli.md" in err and "docs/pytest-plugin.md" in err
    assert generator.main([]) == 0 and generator.main(["--check"]) == 0
    assert (tmp_path / "pytest-plugin.md").read_text() == generator.render_plugin()
