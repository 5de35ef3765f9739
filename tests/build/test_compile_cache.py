"""The sm_90 compile check remembers signatures that compiled (their PTX under the
prototype cache's content key), so an unchanged op is not compiled again by the next
process; an edit, ``--no-cache`` and PORTKIT_PROTOTYPE_CACHE=0 compile afresh."""

from __future__ import annotations

import os

from portkit.build.compile_checks import check_prototype
from portkit.project.discovery import load_op
from portkit.project.session import Session
from portkit.results import Outcome

ENV_SWITCH = "PORTKIT_PROTOTYPE_CACHE"


def fresh_op(root, name):
    """The op as a new process imports it (no catalog reuse), with the settings a
    command reads from the environment."""
    config = Session.from_environment(root).config
    return config, load_op(name, config.prototypes_dir / f"{name}.py", None)


def ptx_files(root):
    return sorted((root / ".portkit-cache" / "numba").rglob("*.ptx"))


def test_second_compile_check_reads_the_cache_and_an_edit_compiles_again(
    make_project, sources, monkeypatch
):
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    root = make_project({"cc_cached": (sources.unary_op("cc_cached"), None)})
    config, op = fresh_op(root, "cc_cached")
    first = check_prototype(op, config)
    assert first.status == Outcome.PASS and "from the prototype cache" not in first.detail
    signatures = len(ptx_files(root))
    assert signatures >= 1 and f"{signatures} kernel signature(s)" in first.detail
    assert ".version" in ptx_files(root)[0].read_text()  # it is the PTX
    config, op = fresh_op(root, "cc_cached")
    again = check_prototype(op, config)
    assert (
        again.status == Outcome.PASS and f"({signatures} from the prototype cache)" in again.detail
    )
    path = root / "prototypes" / "cc_cached.py"
    path.write_text(path.read_text().replace("x[i] * 2.0", "x[i] * 5.0"))
    config, op = fresh_op(root, "cc_cached")
    edited = check_prototype(op, config)
    assert edited.status == Outcome.PASS and "from the prototype cache" not in edited.detail
    assert len(ptx_files(root)) == 2 * signatures


def test_a_failed_compile_is_not_remembered(make_project, sources, monkeypatch):
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    broken = sources.unary_op("cc_broken", "out[i] = x[i] * undefined_name")
    root = make_project({"cc_broken": (broken, None)})
    config, op = fresh_op(root, "cc_broken")
    assert check_prototype(op, config).status != Outcome.PASS
    assert ptx_files(root) == []


def test_the_environment_switch_turns_it_off(make_project, sources, monkeypatch):
    monkeypatch.setenv(ENV_SWITCH, "0")
    root = make_project({"cc_off": (sources.unary_op("cc_off"), None)})
    config, op = fresh_op(root, "cc_off")
    assert check_prototype(op, config).status == Outcome.PASS
    assert ptx_files(root) == []


def test_check_no_cache_compiles_afresh_and_leaves_the_switch_as_it_was(
    make_project, sources, cli, monkeypatch
):
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    root = make_project({"cc_cli": (sources.unary_op("cc_cli"), None)})
    result = cli(root, "check", "cc_cli", "--backend", "torch", "--no-cache")
    assert result.exit_code == 0, result.output
    assert ptx_files(root) == []
    assert ENV_SWITCH not in os.environ
    result = cli(root, "check", "cc_cli", "--backend", "torch")
    assert result.exit_code == 0, result.output
    assert len(ptx_files(root)) >= 1


def test_check_no_cache_turns_the_session_switch_off_not_the_environment(
    make_project, sources, cli, monkeypatch
):
    import portkit.checking.harness as harness

    monkeypatch.delenv(ENV_SWITCH, raising=False)
    seen = []
    run_suite = harness.run_suite

    def watched(plan, backends, config, **options):
        seen.append((os.environ.get(ENV_SWITCH), config.settings.prototype_cache))
        return run_suite(plan, backends, config, **options)

    monkeypatch.setattr(harness, "run_suite", watched)
    root = make_project({"cc_env": (sources.unary_op("cc_env"), None)})
    result = cli(root, "check", "cc_env", "--backend", "torch", "--no-cache")
    assert result.exit_code == 0, result.output
    result = cli(root, "check", "cc_env", "--backend", "torch")
    assert result.exit_code == 0, result.output
    assert seen == [(None, False), (None, True)]


def test_a_cache_that_cannot_be_written_does_not_fail_the_check(make_project, sources):
    root = make_project(
        {"cc_blocked": (sources.unary_op("cc_blocked"), None)},
        portkit_table='cache-dir = "blocked"\n',
    )
    (root / "blocked").write_text("a file where the cache folder would be")
    config, op = fresh_op(root, "cc_blocked")
    result = check_prototype(op, config)
    assert result.status == Outcome.PASS, result.detail
