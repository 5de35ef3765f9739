"""Runs that checked nothing never exit 0: a prototype that exits at import, a check
whose every case was skipped, a command run outside any project. And --json output stays
parseable when a prototype prints."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_errors import assert_clean


def one_line_error(out: str) -> str:
    (line,) = [x for x in out.splitlines() if x.startswith("error:")]
    return line


# -- a prototype that raises SystemExit at import -------------------------------------------


@pytest.mark.parametrize(
    "text, words",
    [
        ("import sys\nsys.exit(0)\n", "SystemExit: 0"),
        (
            "import argparse\nargparse.ArgumentParser().parse_args(['--nope'])\n",
            "SystemExit: 2",
        ),
    ],
)
def test_prototype_exiting_at_import_is_a_broken_op(make_project, sources, cli, text, words):
    root = make_project(
        {
            "fg_exits": (text, None),
            "fg_fine": (sources.unary_op("fg_fine", cases=sources.ONE_CASE), None),
        }
    )
    path = root / "prototypes" / "fg_exits.py"
    listing = cli(root, "list", "--json")
    assert listing.exit_code == 0, listing.output
    rows = {row["op"]: row for row in json.loads(listing.stdout)}
    assert f"{path} failed to import: {words}" in rows["fg_exits"]["error"]
    assert rows["fg_fine"]["kernels"] == ["fg_fine_fwd"]
    for command in (["check", "--all", "--no-compile"], ["compile"], ["lint"]):
        out = assert_clean(cli(root, *command), 2)
        assert f"op fg_exits cannot be loaded: {path} failed to import: {words}" in out


# -- outside a project -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["sim", "x"],
        ["check", "--all"],
        ["diff", "x"],
        ["compile"],
        ["lint"],
        ["bench", "--all"],
        ["export", "x", "--out", "out"],
    ],
)
def test_every_command_outside_a_project_says_so(tmp_path, cli, command):
    folder = tmp_path / "nowhere"
    folder.mkdir()
    out = assert_clean(cli(folder, *command), 2)
    line = one_line_error(out)
    assert f"no portkit project: no folder {folder.resolve() / 'prototypes'}" in line
    assert "[tool.portkit] prototypes" in line


def test_a_pyproject_without_portkit_table_or_folders_is_no_project(tmp_path, cli):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    out = assert_clean(cli(tmp_path, "check", "--all"), 2)
    pyproject = tmp_path.resolve() / "pyproject.toml"
    assert f"({pyproject} has no [tool.portkit] table)" in one_line_error(out)
    # a [tool.portkit] table makes it a project; the folder it names must exist
    (tmp_path / "pyproject.toml").write_text('[tool.portkit]\nprototypes = "src/protos"\n')
    out = assert_clean(cli(tmp_path, "check", "--all"), 2)
    assert f"prototypes names {tmp_path.resolve() / 'src' / 'protos'}: no such folder" in out
    # with no ops yet: nothing to check
    (tmp_path / "src" / "protos").mkdir(parents=True)
    out = assert_clean(cli(tmp_path, "check", "--all"), 3)
    assert f"nothing ran: no ops in {tmp_path.resolve() / 'src' / 'protos'}" in out


# -- every requested check skipped ------------------------------------------------------------


def test_check_with_every_case_skipped_exits_3(make_project, sources, cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("the twin backend runs on this machine")
    root = make_project(
        {
            "fg_gpu": (
                sources.unary_op("fg_gpu", cases=sources.ONE_CASE),
                sources.unary_twin("fg_gpu"),
            )
        }
    )
    result = cli(root, "check", "fg_gpu", "--backend", "twin", "--no-compile")
    out = assert_clean(result, 3)
    assert "nothing ran: all 1 checks were skipped (twin: no CUDA GPU" in out
    result = cli(root, "check", "fg_gpu", "--backend", "twin", "--no-compile", "--json")
    assert result.exit_code == 3
    assert {r["status"] for r in json.loads(result.stdout)["results"]} == {"skip"}
    # a check that ran is still a pass
    assert_clean(cli(root, "check", "fg_gpu", "--backend", "sim", "--no-compile"), 0)


def test_check_all_with_no_ops_exits_3(make_project, cli):
    root = make_project({})
    out = assert_clean(cli(root, "check", "--all"), 3)
    assert f"nothing ran: no ops in {root / 'prototypes'}" in out


def test_check_help_documents_exit_3(cli, tmp_path):
    out = assert_clean(cli(tmp_path, "check", "--help"), 0)
    assert "3 if nothing ran" in out


# -- print() in a prototype keeps --json valid ------------------------------------------------


def test_prints_at_import_do_not_corrupt_json(make_project, sources, cli):
    # one op per command: the catalog imports a prototype once per process
    commands = {
        "fg_noisy_c": ["check", "fg_noisy_c", "--backend", "sim", "--no-compile", "--json"],
        "fg_noisy_d": ["diff", "fg_noisy_d", "--json"],
        "fg_noisy_l": ["list", "--json"],
    }
    root = make_project(
        {
            name: (
                f'print("hello from {name}")\n' + sources.unary_op(name, cases=sources.ONE_CASE),
                sources.unary_twin(name),
            )
            for name in commands
        }
    )
    for name, command in commands.items():
        result = cli(root, *command)
        assert result.exit_code == 0, result.output
        json.loads(result.stdout)  # stdout is the JSON document and nothing else
        assert f"hello from {name}" in result.stderr


# -- a twin that is not UTF-8 ---------------------------------------------------------------


def test_non_utf8_twin_is_a_broken_op_naming_the_byte(make_project, sources, cli):
    root = make_project(
        {
            "fg_latin": (sources.unary_op("fg_latin", cases=sources.ONE_CASE), None),
            "fg_fine2": (sources.unary_op("fg_fine2", cases=sources.ONE_CASE), None),
        }
    )
    twin = root / "cuda_src" / "fg_latin.cu"
    good = sources.unary_twin("fg_latin").encode()
    twin.write_bytes(b"// caf\xe9\n" + good)
    expected = f"{twin} is not UTF-8: byte 0xe9 at offset 6 (line 1)"
    rows = {row["op"]: row for row in json.loads(cli(root, "list", "--json").stdout)}
    assert expected in rows["fg_latin"]["error"]
    assert "error" not in rows["fg_fine2"]
    for command in (["check", "fg_latin"], ["lint", "fg_latin"], ["export", "fg_latin"]):
        out = assert_clean(
            cli(root, *command, *(["--out", "o"] if command[0] == "export" else [])), 2
        )
        assert expected in one_line_error(out)
    assert_clean(cli(root, "check", "fg_fine2", "--backend", "sim", "--no-compile"), 0)
