"""A verdict's key covers everything it depends on: changing any one part gives another
key, so the stored pass is not served (checking/verdicts/key.py). Keys only: no check
runs here (test_verdicts_cli.py runs them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import portkit
from portkit.backends import create
from portkit.checking.verdicts import key as keys
from portkit.checking.verdicts.serve import Verdicts
from portkit.checking.verdicts.store import VerdictStore
from portkit.project.imports import project_imports

OP = "vk_op"

HELPER_IMPORT = "from vk_helpers import SCALE\n"


@pytest.fixture
def project(make_project, sources):
    prototype = HELPER_IMPORT + sources.unary_op(
        OP, "out[i] = x[i] * SCALE", cases=sources.ONE_CASE
    )
    return make_project(
        {OP: (prototype, '#include "vk_inc.cuh"\n' + sources.unary_twin(OP))},
        files={
            "vk_helpers.py": "from vk_consts import TWO as SCALE\n",
            "vk_consts.py": "TWO = 2.0\n",
            "vk_unrelated.py": "X = 1\n",
            "cuda_src/vk_inc.cuh": "// shared\n",
        },
    )


def key_of(load_op, root: Path, backend: str = "sim", case=None, **config_changes) -> str:
    config, op = load_op(root, OP)
    if config_changes:
        config = dataclasses.replace(config, **config_changes)
    verdicts = Verdicts(VerdictStore(root / "unused.json"), config)
    case = case or op.definition.cases[0]
    return verdicts.backend_key(op, case, create(backend, config))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def test_the_key_is_stable_when_nothing_changes(project, load_op):
    assert key_of(load_op, project) == key_of(load_op, project)


def test_the_prototype_invalidates(project, load_op):
    before = key_of(load_op, project)
    edit(project / "prototypes" / f"{OP}.py", "i = cuda.grid(1)", "i = cuda.grid(1)  # edited")
    assert key_of(load_op, project) != before


def test_an_imported_module_invalidates_transitively_and_an_unrelated_one_does_not(
    project, load_op
):
    before = key_of(load_op, project)
    (project / "vk_unrelated.py").write_text("X = 2\n")
    assert key_of(load_op, project) == before  # not imported: a one-file edit elsewhere
    (project / "vk_consts.py").write_text("TWO = 2.0  # imported by vk_helpers\n")
    assert key_of(load_op, project) != before


def test_project_imports_follow_the_imports(project):
    root = project.resolve()
    found = project_imports(
        root / "prototypes" / f"{OP}.py", [root, root / "prototypes"], root
    )
    names = {p.name for p in found}
    assert names == {f"{OP}.py", "vk_helpers.py", "vk_consts.py"}


def test_the_twin_source_and_its_header_invalidate(project, load_op):
    before = key_of(load_op, project)
    edit(project / "cuda_src" / f"{OP}.cu", "T(2)", "T(2.0)")
    after_twin = key_of(load_op, project)
    assert after_twin != before
    (project / "cuda_src" / "vk_inc.cuh").write_text("// shared, edited\n")
    assert key_of(load_op, project) != after_twin


def test_a_declared_tolerance_invalidates(project, load_op):
    before = key_of(load_op, project)
    option = (
        'tolerances=[portkit.Tolerance(rtol=1e-3, atol=1e-5, output=0, against="reference", '
        'reason="loose")])'
    )
    edit(
        project / "prototypes" / f"{OP}.py",
        "(129,)])])",
        "(129,)])], " + option,
    )
    assert key_of(load_op, project) != before


def test_the_case_and_its_seed_invalidate(project, load_op):
    _, op = load_op(project, OP)
    case = op.definition.cases[0]
    before = key_of(load_op, project, case=case)
    assert key_of(load_op, project, case=dataclasses.replace(case, seed=case.seed + 1)) != before
    assert key_of(load_op, project, case=dataclasses.replace(case, shapes=((128,),))) != before
    assert key_of(load_op, project, case=dataclasses.replace(case, dtype="float64")) != before


def test_the_backend_strict_mode_and_archs_invalidate(project, load_op):
    before = key_of(load_op, project)
    assert key_of(load_op, project, backend="twin-cpu") != before
    assert key_of(load_op, project, strict=True) != before
    assert key_of(load_op, project, archs=("sm_80",)) != before


def test_portkit_version_invalidates(project, load_op, monkeypatch):
    before = key_of(load_op, project)
    monkeypatch.setattr(portkit, "__version__", "99.0")
    keys.portkit_source.cache_clear()
    try:
        assert key_of(load_op, project) != before
    finally:
        monkeypatch.undo()
        keys.portkit_source.cache_clear()
    assert key_of(load_op, project) == before


def test_a_library_version_invalidates(project, load_op, monkeypatch):
    before = key_of(load_op, project)
    versions = dict(keys.library_versions())
    for library in ("torch", "numba", "numba-cuda", "cuda runtime", "nvrtc"):
        changed = {**versions, library: versions[library] + ".1"}
        monkeypatch.setattr(keys, "library_versions", lambda changed=changed: changed)
        assert key_of(load_op, project) != before, library
    monkeypatch.undo()
    assert key_of(load_op, project) == before


def test_the_gpu_name_arch_and_driver_invalidate_gpu_units_only(project, load_op, monkeypatch):
    h100 = {"gpu": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "driver": "13000"}
    monkeypatch.setattr(keys, "gpu_identity", lambda: h100)
    gpu_before, cpu_before = key_of(load_op, project, "twin"), key_of(load_op, project)
    for changed in ({"gpu": "NVIDIA H200"}, {"arch": "sm_100"}, {"driver": "13010"}):
        monkeypatch.setattr(keys, "gpu_identity", lambda c=changed: {**h100, **c})
        assert key_of(load_op, project, "twin") != gpu_before, changed
        assert key_of(load_op, project) == cpu_before  # a CPU unit is not tied to the GPU


def test_the_cpu_side_compiler_invalidates_cpu_units(project, load_op, monkeypatch):
    before = key_of(load_op, project, "twin-cpu")
    monkeypatch.setattr(keys, "cpu_identity", lambda: {"cpu": "x86_64", "c++": "g++ 99"})
    assert key_of(load_op, project, "twin-cpu") != before
