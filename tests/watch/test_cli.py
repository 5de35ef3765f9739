"""``portkit watch`` on the command line: its mistakes in one line, and --runs."""

from __future__ import annotations

from tests.watch.conftest import edit


def test_an_unknown_op_is_one_line_and_exit_2(watched, cli):
    root = watched("cli_known")
    result = cli(root, "watch", "cli_nope", "--runs", "1")
    assert result.exit_code == 2
    known = "cli_known, cli_known_other"
    assert result.output.strip() == f"error: unknown op 'cli_nope'; known ops: {known}"
    assert "Traceback" not in result.output


def test_backend_outside_check_mode_is_a_usage_error(watched, cli):
    root = watched("cli_mode")
    result = cli(root, "watch", "cli_mode", "--sim", "--backend", "sim", "--runs", "1")
    assert result.exit_code == 2
    assert "--backend chooses the backends of --check, not of --sim" in result.output
    assert "Traceback" not in result.output


def test_runs_stops_and_the_exit_code_is_the_latest_verdicts(watched, cli):
    root = watched("cli_runs")
    passing = cli(root, "watch", "cli_runs", "--sim", "--runs", "1")
    assert passing.exit_code == 0, passing.output
    assert "cli_runs pass in" in passing.output and "run 1:" in passing.output
    edit(root / "prototypes" / "cli_runs.py", "if i < n:", "if i <= n:")
    failing = cli(root, "watch", "cli_runs", "--sim", "--runs", "1")
    assert failing.exit_code == 1
    line = next(l for l in failing.output.splitlines() if l.startswith("cli_runs FAIL"))
    assert "kernel cli_runs_fwd, block (4, 0, 0), thread (1, 0, 0), cli_runs.py:15" in line


def test_help_teaches_the_modes_with_examples(cli, tmp_path):
    result = cli(tmp_path, "watch", "--help")
    assert result.exit_code == 0
    for text in ("--sim", "--check", "--diff", "--runs", "portkit watch sigmoid --sim"):
        assert text in result.output
