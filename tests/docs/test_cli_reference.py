"""docs/cli.md is what the click commands say today (scripts/cli_reference.py writes it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_generator():
    path = REPO / "scripts" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("portkit_script_cli_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current():
    generator = load_generator()
    page = (REPO / "docs" / "cli.md").read_text()
    assert page == generator.render(), (
        "docs/cli.md is stale: run PYTHONPATH=$PWD python scripts/cli_reference.py and commit it"
    )


def test_every_command_is_in_the_reference():
    from portkit.cli.app import main

    page = load_generator().render()
    for name in main.commands:
        assert f"\n## portkit {name}\n" in page
        assert f"Usage: portkit {name} " in page


def test_check_mode_says_stale_in_one_line(tmp_path, monkeypatch, capsys):
    generator = load_generator()
    stale = tmp_path / "cli.md"
    stale.write_text("# an old page\n")
    monkeypatch.setattr(generator, "PAGE", stale)
    assert generator.main(["--check"]) == 1
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert generator.main([]) == 0 and generator.main(["--check"]) == 0
