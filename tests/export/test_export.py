"""``portkit export``: the package it writes installs into a fresh virtual environment
(one that sees this interpreter's torch, whether this interpreter is a virtual
environment or a system Python) and imports there with portkit and numba blocked; bad
input is one line and exit 2, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tests.export.package_env import BLOCK_PORTKIT_AND_NUMBA, REPO, install, run_cli

GUARDED_IMPORT = BLOCK_PORTKIT_AND_NUMBA + textwrap.dedent(
    """
    import json
    import torch
    import exported_ops

    schemas = {
        n: str(getattr(torch.ops.expns, n).default._schema)
        for n in ("sigmoid", "sigmoid_backward", "vector_add")
    }
    try:
        exported_ops.sigmoid(torch.ones(3))
        error = None
    except exported_ops.InputError as exc:
        error = str(exc)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("portkit", "numba"))
    print(json.dumps({"file": exported_ops.__file__, "schemas": schemas, "error": error,
                      "loaded": loaded}))
    """
)


def test_exported_package_installs_and_imports_without_portkit_or_numba(
    project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_cli(
        project,
        "export",
        "sigmoid",
        "vector_add",
        "--out",
        str(out),
        "--arch",
        "sm_80,sm_90",
        "--name",
        "exported_ops",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    assert written["archs"] == ["sm_80", "sm_90"]
    package = out / "exported_ops"
    manifest = json.loads((package / "manifest.json").read_text())
    assert manifest["namespace"] == "expns" and manifest["toolkit"].startswith("NVRTC")
    entry = manifest["ops"]["sigmoid"]
    assert set(entry["cubins"]) == {"sm_80", "sm_90"} and entry["ptx_arch"] == "sm_90"
    for file in [*entry["cubins"].values(), entry["ptx"]]:
        assert (package / file).stat().st_size > 0
    assert entry["kernels"]["sigmoid_fwd"]["lowered"]["float"].startswith("_Z")
    launcher = (package / "ops" / "sigmoid.py").read_text()
    assert "numba" not in launcher and "import portkit\n" not in launcher
    assert (out / "pyproject.toml").is_file()

    venv = tmp_path / "venv"
    python = install(written["wheel"], venv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [str(python), "-c", GUARDED_IMPORT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["file"].startswith(str(venv))  # the installed copy, not the build folder
    assert report["schemas"]["sigmoid"] == "expns::sigmoid(Tensor a0) -> Tensor"
    assert report["schemas"]["sigmoid_backward"].startswith("expns::sigmoid_backward(")
    assert "vector_add(Tensor a0, Tensor a1) -> Tensor" in report["schemas"]["vector_add"]
    assert report["error"] == (
        "op sigmoid, input 0: tensor is on cpu, but this implementation runs on cuda; "
        "move it with .to('cuda')"
    )
    assert report["loaded"] == []
    # the compiled replayer ships (byte for byte) and is built, or refused, at import
    installed = Path(report["file"]).parent / "_runtime" / "native.cpp"
    assert installed.read_bytes() == (REPO / "portkit" / "runtime" / "native.cpp").read_bytes()
    if torch.version.cuda is None:  # no twin runs here: the package says so, once
        assert result.stderr.count("launches replay in Python") == 1
        assert "exported_ops: launches replay in Python: this torch is a CPU build" in (
            result.stderr
        )
    # `pip install OUT` (setuptools, from pyproject.toml) ships the runtime too
    built = tmp_path / "from_source"
    setup = [sys.executable, "-c", "import setuptools; setuptools.setup()"]
    subprocess.run(
        [*setup, "build_py", "--build-lib", str(built)], cwd=out, check=True, capture_output=True
    )
    shipped = sorted(p.name for p in (built / "exported_ops" / "_runtime").glob("*.*"))
    assert shipped == sorted(p.name for p in (package / "_runtime").glob("*.*"))
    assert "native.cpp" in shipped


@pytest.mark.parametrize(
    "args, words",
    [
        (["nosuchop"], "unknown op 'nosuchop'"),
        (["sigmoid", "--arch", "sm_999"], "unsupported architecture 'sm_999'"),
        (["sigmoid", "--arch", "sm_90,compute_90"], "unsupported architecture 'compute_90'"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(project, tmp_path, args, words):
    out = tmp_path / "out"
    done = run_cli(project, "export", *args[:1], "--out", str(out), *args[1:])
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["proj"]  # no staging folder left


def test_non_empty_output_folder_is_refused(project, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    done = run_cli(project, "export", "sigmoid", "--out", str(out))
    assert done.returncode == 2
    assert "exists and is not empty" in done.stderr and "Traceback" not in done.stderr
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_unwritable_output_folder_is_refused(project, tmp_path, monkeypatch, cli):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    done = run_cli(project, "export", "sigmoid", "--out", str(blocker / "out"))
    assert done.returncode == 2 and "is not a folder" in done.stderr
    # Root may write anywhere, so a read-only folder is simulated for the access check.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    result = cli(project, "export", "sigmoid", "--out", str(tmp_path / "ro" / "out"))
    assert result.exit_code == 2
    (tmp_path / "ro").mkdir()
    result = cli(project, "export", "sigmoid", "--out", str(tmp_path / "ro" / "out"))
    assert result.exit_code == 2 and "is not writable" in result.output
    assert list((tmp_path / "ro").iterdir()) == []


def test_failed_compile_leaves_nothing(project, tmp_path):
    (project / "cuda_src" / "sigmoid.cu").write_text(
        (project / "cuda_src" / "sigmoid.cu").read_text() + "\nthis is not C++;\n"
    )
    out = tmp_path / "out"
    done = run_cli(project, "export", "vector_add", "sigmoid", "--out", str(out), "--arch", "sm_90")
    assert done.returncode == 2 and "does not compile for sm_90" in done.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["proj"]


def test_launcher_calling_a_kernel_directly_cannot_be_exported(project, tmp_path):
    path = project / "prototypes" / "sigmoid.py"
    path.write_text(path.read_text().replace("k.sigmoid_fwd[", "sigmoid_fwd["))
    done = run_cli(project, "export", "sigmoid", "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "launchers call numba function sigmoid_fwd directly" in done.stderr
