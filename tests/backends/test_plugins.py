"""Third-party backends: ``[tool.portkit] backends`` and the ``portkit.backends`` entry-point
group reach ``portkit check --backend NAME``; their mistakes are one-line errors."""

from __future__ import annotations

import json
import shutil
from importlib import metadata
from pathlib import Path

import pytest

from portkit import backends
from portkit.backends import plugins
from tests.conftest import ONE_CASE, unary_op

EXAMPLE = Path(__file__).resolve().parent / "example_backend"
REFERENCE = "example_backend.backend:ExampleCPU"


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Each test starts from the built-ins: a third party's class registered in one test
    must not leak into the next (the registry is the process's)."""
    monkeypatch.setattr(backends, "_REGISTRY", dict(backends._REGISTRY))
    monkeypatch.delitem(backends._REGISTRY, "example-cpu", raising=False)


def project_with_example(make_project, table: str = "") -> Path:
    """A project with one op and the example backend's package copied into its root."""
    portkit_table = (
        'prototypes = "prototypes"\ncuda-src = "cuda_src"\ncache-dir = ".portkit-cache"\n' + table
    )
    op = unary_op("plug_double", "out[i] = x[i] * 2.0", cases=ONE_CASE)
    root = make_project({"plug_double": (op, None)}, portkit_table=portkit_table)
    shutil.copytree(EXAMPLE, root / "example_backend", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def fake_entry_points(monkeypatch, *points: tuple[str, str]) -> None:
    """Installed packages declaring ``points`` (name, "module:Class") in the group."""
    declared = [metadata.EntryPoint(name, value, plugins.GROUP) for name, value in points]

    def entry_points(**selection):
        assert selection == {"group": plugins.GROUP}
        return declared

    monkeypatch.setattr(plugins.metadata, "entry_points", entry_points)


def checked_rows(result) -> set[tuple[str, str, str]]:
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    return {(r["backend"], r["check"], r["status"]) for r in rows}


def test_a_project_key_brings_the_backend_to_check(make_project, cli):
    root = project_with_example(make_project, f'backends = ["{REFERENCE}"]\n')
    rows = checked_rows(cli(root, "check", "plug_double", "--backend", "example-cpu", "--json"))
    assert ("example-cpu", "forward", "pass") in rows
    assert {backend for backend, _, _ in rows} <= {"example-cpu", "numba", "twin"}


def test_an_entry_point_brings_the_backend_to_check(make_project, cli, monkeypatch):
    root = project_with_example(make_project)
    monkeypatch.syspath_prepend(str(root))  # as if the package were installed
    fake_entry_points(monkeypatch, ("example-cpu", REFERENCE))
    rows = checked_rows(cli(root, "check", "plug_double", "--backend", "example-cpu", "--json"))
    assert ("example-cpu", "forward", "pass") in rows


def test_an_unknown_backend_lists_the_known_ones_installed_included(make_project, cli, monkeypatch):
    root = project_with_example(make_project)
    fake_entry_points(monkeypatch, ("example-cpu", REFERENCE))
    result = cli(root, "check", "plug_double", "--backend", "mine")
    assert result.exit_code != 0
    (line,) = [line for line in result.output.splitlines() if "unknown backend" in line]
    assert "unknown backend 'mine'; backends: torch, sim, numba, twin" in line
    assert line.rstrip().endswith("example-cpu")
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        ("no_such_module:X", "cannot import no_such_module: ModuleNotFoundError"),
        ("example_backend.backend:Nope", "example_backend.backend has no Nope"),
        ("example_backend.backend:TYPE_CHECKING", "is not a subclass of portkit.backends.Backend"),
    ],
)
def test_a_wrong_project_reference_is_one_line(make_project, cli, reference, says):
    root = project_with_example(make_project, f'backends = ["{reference}"]\n')
    result = cli(root, "check", "plug_double", "--backend", "sim")
    assert result.exit_code != 0
    assert says in result.output and f"backend {reference!r}" in result.output
    assert "Traceback" not in result.output


def test_the_key_must_be_a_list_of_module_class_strings(make_project, cli):
    root = project_with_example(make_project, 'backends = "example_backend.backend"\n')
    result = cli(root, "check", "plug_double")
    assert result.exit_code != 0
    assert 'backends must be a list of "package.module:Class" strings' in result.output


def test_an_entry_point_must_carry_its_backends_name(make_project, monkeypatch):
    root = project_with_example(make_project)
    monkeypatch.syspath_prepend(str(root))
    fake_entry_points(monkeypatch, ("other-name", REFERENCE))
    with pytest.raises(backends.PortkitError, match="declares name 'example-cpu', not its entry"):
        backends.backend_class("other-name")


def test_an_entry_point_that_does_not_load_is_one_error(monkeypatch):
    fake_entry_points(monkeypatch, ("broken", "no_such_package.mod:B"))
    with pytest.raises(backends.PortkitError, match=r"entry point broken = .* does not load"):
        backends.backend_class("broken")


def test_a_third_party_may_not_take_a_builtin_name(make_project, cli, tmp_path):
    root = project_with_example(make_project, 'backends = ["impostor:Sim"]\n')
    (root / "impostor.py").write_text(
        "from portkit.backends import Backend\n"
        "class Sim(Backend):\n"
        "    name, role, device, description = 'sim', 'prototype', 'cpu', 'not the simulator'\n"
        "    def _probe(self):\n        return None\n"
        "    def launch_targets(self, op):\n        raise NotImplementedError\n"
    )
    result = cli(root, "check", "plug_double", "--backend", "sim")
    assert result.exit_code != 0
    assert "impostor.Sim: backend name 'sim' is already registered" in result.output


def test_a_backend_of_the_old_interface_is_one_line_naming_the_change(make_project, cli):
    """A project's backend still written against ``kernels(op, poison_outputs=...)``."""
    root = project_with_example(make_project, 'backends = ["oldstyle:Old"]\n')
    (root / "oldstyle.py").write_text(
        "from portkit.backends import Backend\n"
        "class Old(Backend):\n"
        "    name, role, device, description = 'old', 'prototype', 'cpu', 'before targets'\n"
        "    def _probe(self):\n        return None\n"
        "    def kernels(self, op, *, poison_outputs=False):\n"
        "        return self.kernel_set(op, {}, poison_outputs)\n"
    )
    result = cli(root, "check", "plug_double", "--backend", "old")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "oldstyle.Old: backend old defines kernels(op, poison_outputs=...)" in lines[0]
    assert "rename it launch_targets(op)" in lines[0]


def test_plain_import_and_check_read_no_entry_points(monkeypatch, make_project, load_op):
    """A name portkit knows never scans the installed packages (it costs tens of ms)."""

    def refuse(**selection):
        raise AssertionError("entry points read for a known backend")

    monkeypatch.setattr(plugins.metadata, "entry_points", refuse)
    config, _ = load_op(project_with_example(make_project), "plug_double")
    assert [b.name for b in backends.create_all(config, ["torch", "sim"])] == ["torch", "sim"]
    assert "sim" in backends.default_names(config)
