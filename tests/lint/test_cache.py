"""The typed-IR findings kept on disk (portkit/lint/cache.py): the next process reads an
unchanged op's findings; an edit of the prototype or of a module it imports, another
numba/torch version, a damaged entry and the switches all lint afresh."""

from __future__ import annotations

import json
import sys

import pytest

from portkit import cache_files
from portkit.checking.harness import lint_result
from portkit.lint import cache
from portkit.lint.findings import code_findings, remembered_code_findings
from portkit.project.discovery import load_op
from portkit.project.imports import prototype_imports
from portkit.project.session import Session

# A float literal in a float32 kernel: one float64 error, so the findings are not empty
# (0.1 is no float32, so LLVM cannot fold the promotion away as it does for 2.5).
ENV_SWITCH = "PORTKIT_PROTOTYPE_CACHE"
FLOAT64_BODY = "out[i] = x[i] * 0.1"
CLEAN_BODY = "out[i] = x[i] * x[i]"


@pytest.fixture(autouse=True)
def cache_on(monkeypatch):
    monkeypatch.delenv(ENV_SWITCH, raising=False)


def fresh_op(root, name):
    """The op as a new process imports it (a new module, new dispatchers), with the
    settings a command reads from the environment."""
    config = Session.from_environment(root).config
    return config, load_op(name, config.prototypes_dir / f"{name}.py", None)


def entries(root):
    return sorted((root / ".portkit-cache" / "numba").rglob(cache.FILE_NAME))


def test_the_second_lint_reads_the_cache_and_gives_the_same_findings(make_project, sources):
    root = make_project({"lc_hit": (sources.unary_op("lc_hit", FLOAT64_BODY), None)})
    config, op = fresh_op(root, "lc_hit")
    first, cached = remembered_code_findings(op, config)
    assert not cached and [f.kind for f in first] == ["float64"]
    assert len(entries(root)) == 1
    config, op = fresh_op(root, "lc_hit")
    again, cached = remembered_code_findings(op, config)
    assert cached and again == first == code_findings(op)


def test_the_check_row_says_where_its_findings_came_from(make_project, sources, cli):
    root = make_project({"lc_row": (sources.unary_op("lc_row", FLOAT64_BODY), None)})
    config, op = fresh_op(root, "lc_row")
    assert "from the lint cache" not in lint_result(op, config).detail
    config, op = fresh_op(root, "lc_row")
    row = lint_result(op, config)
    assert row.detail.startswith(
        "1 error(s), 0 warning(s) (from the lint cache), see `portkit lint lc_row`"
    )
    result = cli(root, "check", "lc_row", "--backend", "torch", "-v")
    assert result.exit_code == 1, result.output  # float64 arithmetic is an error
    assert "from the lint cache" in result.output


def test_an_edited_prototype_is_linted_again(make_project, sources):
    root = make_project({"lc_edit": (sources.unary_op("lc_edit", FLOAT64_BODY), None)})
    config, op = fresh_op(root, "lc_edit")
    assert len(remembered_code_findings(op, config)[0]) == 1
    path = root / "prototypes" / "lc_edit.py"
    path.write_text(path.read_text().replace("x[i] * 0.1", "x[i] * x[i]"))
    config, op = fresh_op(root, "lc_edit")
    findings, cached = remembered_code_findings(op, config)
    assert not cached and findings == []
    assert len(entries(root)) == 2


def test_an_edited_helper_module_of_the_launcher_is_linted_again(
    make_project, sources, monkeypatch
):
    """The launcher takes its block size from a helper module: only the helper's bytes
    change, and with them the launch-fill warning of the large case."""
    large = '[portkit.cases.custom("float32-n6400", [(6400,)], large=True)]'
    prototype = "from lc_blocks import BLOCK\n" + sources.unary_op(
        "lc_helper", CLEAN_BODY, cases=large, block="BLOCK", grid="portkit.cdiv(n, BLOCK)"
    )
    root = make_project({"lc_helper": (prototype, None)}, files={"lc_blocks.py": "BLOCK = 32\n"})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "lc_blocks", raising=False)
    config, op = fresh_op(root, "lc_helper")
    assert (root / "lc_blocks.py").resolve() in prototype_imports(op, config)
    assert remembered_code_findings(op, config) == ([], False)  # 200 blocks fill 132 SMs
    (root / "lc_blocks.py").write_text("BLOCK = 256\n")
    monkeypatch.delitem(sys.modules, "lc_blocks")
    config, op = fresh_op(root, "lc_helper")
    findings, cached = remembered_code_findings(op, config)
    assert not cached and [f.kind for f in findings] == ["launch"]  # 25 blocks


def test_the_key_ignores_project_modules_the_prototype_does_not_import(
    make_project, sources, monkeypatch
):
    """A pytest worker imports a conftest.py or a plugin from the project root; the op's
    findings are the same, and so must the key be (with sys.modules in the key, the
    entries `portkit check` wrote were missed there)."""
    root = make_project(
        {"lc_alone": (sources.unary_op("lc_alone", FLOAT64_BODY), None)},
        files={"lc_plugin.py": "X = 1\n"},
    )
    config, op = fresh_op(root, "lc_alone")
    key = cache.lint_key(op, config)
    remembered_code_findings(op, config)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "lc_plugin", raising=False)
    __import__("lc_plugin")  # imported by the process, not by the prototype
    assert "lc_plugin" in sys.modules
    config, op = fresh_op(root, "lc_alone")
    assert cache.lint_key(op, config) == key
    assert remembered_code_findings(op, config)[1] is True
    (root / "lc_plugin.py").write_text("X = 2\n")
    assert cache.lint_key(op, config) == key


def test_other_versions_are_a_miss(make_project, sources, monkeypatch):
    import numba
    import torch

    root = make_project({"lc_versions": (sources.unary_op("lc_versions", FLOAT64_BODY), None)})
    config, op = fresh_op(root, "lc_versions")
    key = cache.lint_key(op, config)
    assert cache.lint_key(op, config) == key
    remembered_code_findings(op, config)
    for module, version in ((torch, "0.0.1"), (numba, "0.0.2")):
        with monkeypatch.context() as patch:
            patch.setattr(module, "__version__", version)
            assert cache.lint_key(op, config) != key
            assert remembered_code_findings(op, config)[1] is False
    with monkeypatch.context() as patch:
        patch.setenv("NUMBA_OPT", "0")
        assert cache.lint_key(op, config) != key
    assert remembered_code_findings(op, config)[1] is True


@pytest.mark.parametrize(
    "damage",
    [b"{not json", b'{"format": 2, "findings": [{"kind": "float64"}]}', b"[1, 2]", b""],
)
def test_a_damaged_entry_is_linted_again_and_rewritten(make_project, sources, damage):
    root = make_project({"lc_damaged": (sources.unary_op("lc_damaged", FLOAT64_BODY), None)})
    config, op = fresh_op(root, "lc_damaged")
    first, _ = remembered_code_findings(op, config)
    (entry,) = entries(root)
    entry.write_bytes(damage)
    config, op = fresh_op(root, "lc_damaged")
    assert remembered_code_findings(op, config) == (first, False)
    assert json.loads(entry.read_text())["findings"][0]["kind"] == "float64"
    config, op = fresh_op(root, "lc_damaged")
    assert remembered_code_findings(op, config) == (first, True)


def test_the_environment_switch_turns_it_off(make_project, sources, monkeypatch):
    root = make_project({"lc_off": (sources.unary_op("lc_off", FLOAT64_BODY), None)})
    monkeypatch.setenv(ENV_SWITCH, "0")
    for _ in range(2):
        config, op = fresh_op(root, "lc_off")
        findings, cached = remembered_code_findings(op, config)
        assert not cached and len(findings) == 1
    assert entries(root) == []


def test_check_no_cache_writes_no_findings(make_project, sources, cli):
    root = make_project({"lc_cli": (sources.unary_op("lc_cli"), None)})
    result = cli(root, "check", "lc_cli", "--backend", "torch", "--no-cache")
    assert result.exit_code == 0, result.output
    assert entries(root) == []
    result = cli(root, "check", "lc_cli", "--backend", "torch")
    assert result.exit_code == 0, result.output
    assert len(entries(root)) == 1


def test_portkit_lint_uses_the_same_entries(make_project, sources, cli):
    root = make_project({"lc_lint": (sources.unary_op("lc_lint", FLOAT64_BODY), None)})
    result = cli(root, "lint", "lc_lint", "--json", "--no-resources")
    assert result.exit_code == 1, result.output  # float64 arithmetic is an error
    (entry,) = entries(root)
    # A planted entry (with its digest) is what the next lint reports: proof it read the cache.
    data = json.loads(entry.read_text())
    data["findings"][0]["message"] = "planted"
    cache_files.store(entry, json.dumps(data))
    config, op = fresh_op(root, "lc_lint")
    findings, cached = remembered_code_findings(op, config)
    assert cached and findings[0].message == "planted"


def test_a_cache_that_cannot_be_written_does_not_fail_the_lint(make_project, sources):
    root = make_project(
        {"lc_blocked": (sources.unary_op("lc_blocked", FLOAT64_BODY), None)},
        portkit_table='cache-dir = "blocked"\n',
    )
    (root / "blocked").write_text("a file where the cache folder would be")
    config, op = fresh_op(root, "lc_blocked")
    assert config.cache_dir != root / "blocked"  # a temporary folder, for this process only
    findings, cached = remembered_code_findings(op, config)
    assert not cached and len(findings) == 1


def test_a_module_imported_while_linting_is_never_cached(make_project, sources, monkeypatch):
    """A launcher that imports a project module on its first call: the key taken before
    linting could not see that module, so nothing is stored (a later edit of it could
    otherwise be served stale)."""
    prototype = sources.unary_op("lc_lazy", CLEAN_BODY, grid="__import__('lc_lazy_grid').grid(n)")
    helper = "import portkit\n\ndef grid(n):\n    return portkit.cdiv(n, 32)\n"
    root = make_project({"lc_lazy": (prototype, None)}, files={"lc_lazy_grid.py": helper})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "lc_lazy_grid", raising=False)
    config, op = fresh_op(root, "lc_lazy")
    assert remembered_code_findings(op, config) == ([], False)
    assert entries(root) == []
