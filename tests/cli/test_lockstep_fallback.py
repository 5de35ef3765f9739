"""A launch the lockstep engine hands to the per-thread engine is counted and shown
with -v, and is an error under lockstep-fallback = "error" (CI); the launch budget
stops a spinning kernel run by the notebook API in a thread."""

from __future__ import annotations

import threading

import pytest

PRINTS = 'out[i] = x[i] * 2.0\nif i == 0:\n    print("first")'
SPINS = "j = i\nwhile j >= 0:\n    j = (j + 1) % 7\nout[i] = x[i]"
TABLE = 'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n'


@pytest.fixture
def printing(make_project, sources):
    def make(table: str = TABLE):
        op = sources.unary_op("fb_print", PRINTS, cases=sources.ONE_CASE)
        return make_project({"fb_print": (op, None)}, portkit_table=table)

    return make


def test_sim_verbose_counts_the_fallback(cli, printing):
    result = cli(printing(), "sim", "fb_print", "-v")
    assert result.exit_code == 0, result.output
    line = "engine: fb_print_fwd: per-thread (line 17: print (its order is per thread))"
    assert line in result.output
    assert "lockstep fallbacks: 1 of 1 launch(es)" in result.output


def test_check_verbose_counts_the_fallbacks(cli, printing):
    result = cli(printing(), "check", "fb_print", "--backend", "sim", "--no-compile", "-v")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "sim: lockstep fallbacks: 1 of 1 launch(es)" in out
    line = "sim: fb_print_fwd: per-thread, 1 launch(es): line 17: print (its order is per thread)"
    assert line in out


def test_a_lockstep_launch_counts_no_fallback(cli, make_project, sources):
    root = make_project({"fb_plain": (sources.unary_op("fb_plain", cases=sources.ONE_CASE), None)})
    result = cli(root, "sim", "fb_plain", "-v")
    assert result.exit_code == 0, result.output
    assert "lockstep fallbacks: 0 of 1 launch(es)" in result.output


def test_the_environment_makes_a_fallback_an_error(cli, printing, monkeypatch):
    monkeypatch.setenv("PORTKIT_LOCKSTEP_FALLBACK", "error")
    result = cli(printing(), "sim", "fb_print")
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert (
        "kernel fb_print_fwd: ran in the per-thread engine, not in lockstep: line 17: print "
        '(its order is per thread) (lockstep-fallback = "error"' in out
    )
    assert "Traceback" not in result.output


def test_pyproject_makes_a_fallback_an_error_and_the_environment_allows_it(
    cli, printing, monkeypatch
):
    root = printing(TABLE + 'lockstep-fallback = "error"\n')
    result = cli(root, "sim", "fb_print")
    assert result.exit_code == 1, result.output
    assert "ran in the per-thread engine" in " ".join(result.output.split())
    monkeypatch.setenv("PORTKIT_LOCKSTEP_FALLBACK", "allow")
    assert cli(root, "sim", "fb_print").exit_code == 0


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("pyproject", '[tool.portkit] lockstep-fallback must be "allow" or "error", not \'fail\''),
        ("env", "PORTKIT_LOCKSTEP_FALLBACK='fail' is not one of , allow, error"),
    ],
)
def test_a_wrong_value_is_one_line(cli, printing, monkeypatch, where, expected):
    if where == "env":
        monkeypatch.setenv("PORTKIT_LOCKSTEP_FALLBACK", "fail")
        root = printing()
    else:
        root = printing(TABLE + 'lockstep-fallback = "fail"\n')
    result = cli(root, "sim", "fb_print")
    assert result.exit_code == 2, result.output
    assert expected in result.output and "Traceback" not in result.output


def test_notebook_sim_in_a_thread_stops_at_the_budget(make_project, sources, monkeypatch):
    import portkit
    from portkit.api.sessions import forget

    op = sources.unary_op("fb_spin", SPINS, cases=sources.ONE_CASE)
    root = make_project({"fb_spin": (op, None)}, portkit_table=TABLE + "sim-budget = 0.3\n")
    monkeypatch.chdir(root)
    forget()
    reports: list = []
    worker = threading.Thread(target=lambda: reports.append(portkit.sim("fb_spin")), daemon=True)
    worker.start()
    worker.join(120)
    forget()
    assert not worker.is_alive(), "portkit.sim in a thread spun past its budget"
    (report,) = reports
    assert not report.passed
    assert "kernel fb_spin_fwd: still running after 0.3 s" in " ".join(
        report.failed[0].detail.split()
    )


def test_the_setting_travels_to_a_child_process():
    from portkit.project.environment import Settings

    settings = Settings.from_environment({"PORTKIT_LOCKSTEP_FALLBACK": "Error"})
    assert settings.lockstep_fallback == "error"
    assert settings.as_environment() == {"PORTKIT_LOCKSTEP_FALLBACK": "error"}
    assert Settings.from_environment(settings.as_environment()) == settings
    assert Settings.from_environment({}).lockstep_fallback == ""
