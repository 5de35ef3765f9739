"""``portkit export`` refuses names that would shadow something or never import, writes
with the user's umask, and lets only one export write a folder at a time."""

from __future__ import annotations

import importlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from portkit.errors import PortkitError
from portkit.export.lock import export_lock, lock_path
from portkit.export.names import check_package_name
from tests.export.package_env import REPO

PORTKIT = [sys.executable, "-m", "portkit.cli"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("torch", "package name 'torch' is taken by the installed distribution torch "),
        ("click", "package name 'click' is taken by the installed distribution click "),
        ("json", "package name 'json' is a standard-library module: the package would hide it"),
        ("import", "package name 'import' is a Python keyword: it cannot be imported"),
        ("my-kernels", "package name 'my-kernels' is not a Python identifier; try my_kernels"),
        ("2fast", "package name '2fast' is not a Python identifier"),
    ],
)
def test_a_name_that_shadows_or_cannot_import_is_one_line_exit_2(
    project, tmp_path, cli, name, message
):
    out = tmp_path / "out"
    result = cli(project, "export", "sigmoid", "--out", str(out), "--name", name)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]  # nothing written


def _fake_distribution(site: Path, name: str, generator: str) -> None:
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "WHEEL").write_text(f"Wheel-Version: 1.0\n{generator}\nTag: py3-none-any\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
    (site / name).mkdir()
    (site / name / "__init__.py").write_text("")


def test_an_earlier_export_of_the_package_may_be_upgraded(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_distribution(site, "old_export", "Generator: portkit export")
    _fake_distribution(site, "someone_elses", "Generator: bdist_wheel (0.45.1)")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    check_package_name("old_export")  # the same package exported before: no error
    with pytest.raises(PortkitError, match="taken by the installed distribution someone_elses"):
        check_package_name("someone_elses")


def _modes(root: Path) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {"dirs": {stat.S_IMODE(root.stat().st_mode)}, "files": set()}
    for path in root.rglob("*"):
        found["dirs" if path.is_dir() else "files"].add(stat.S_IMODE(path.stat().st_mode))
    return found


def test_exported_folders_and_files_follow_the_umask(project, tmp_path, cli):
    out = tmp_path / "out"
    previous = os.umask(0o027)
    try:
        result = cli(project, "export", "sigmoid", "--out", str(out), "--arch", "sm_90")
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    assert _modes(out) == {"dirs": {0o750}, "files": {0o640}}
    assert (out / "dist").is_dir() and (out / "pyproject.toml").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "proj"]  # no lock left


def test_an_export_into_a_folder_another_export_is_writing_is_one_line(project, tmp_path, cli):
    out = (tmp_path / "out").resolve()
    with export_lock(out):
        result = cli(project, "export", "sigmoid", "--out", str(out), "--arch", "sm_90")
        assert lock_path(out).exists()  # the refused export leaves the holder's lock alone
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"error: another portkit export is writing {out}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


def test_two_exports_at_once_one_writes_the_other_fails_cleanly(project, tmp_path):
    out = (tmp_path / "out").resolve()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [*PORTKIT, "export", "sigmoid", "vector_add", "--out", str(out), "--arch", "sm_90"]
    runs = [
        subprocess.Popen(args, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    done = [(r.wait(timeout=300), r.stderr.read().decode()) for r in runs]
    for r in runs:
        r.stdout.close()
        r.stderr.close()
    assert sorted(code for code, _ in done) == [0, 2], done
    (error,) = [err.strip() for code, err in done if code == 2]
    assert "Traceback" not in error and len(error.splitlines()) == 1, error
    # refused at the lock, or after the winner's rename: either way one line
    assert error in (
        f"error: another portkit export is writing {out}",
        f"error: output folder {out} exists and is not empty; name a new folder",
    ), error
    assert len(list((out / "dist").glob("*.whl"))) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "proj"]


def test_missing_parent_folders_are_made_but_a_file_in_the_way_is_one_line(project, cli):
    """`--out build/my_kernels` in a fresh checkout (the README's tour) makes build/; a
    file where a parent folder should be is one line, exit 2, and nothing is written."""
    result = cli(project, "export", "sigmoid", "--out", "build/deeper/kernels", "--arch", "sm_90")
    assert result.exit_code == 0, result.output
    assert (project / "build" / "deeper" / "kernels").is_dir()
    (project / "blocker").write_text("not a folder")
    result = cli(project, "export", "sigmoid", "--out", "blocker/kernels", "--arch", "sm_90")
    assert result.exit_code == 2
    assert "is not a folder" in result.output and "Traceback" not in result.output
