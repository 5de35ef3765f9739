"""A cache folder that cannot be used, and cache entries damaged on disk: one line each,
and the command runs on (rebuilding, or without the cache) instead of failing the op."""

from __future__ import annotations

import pytest

from tests.cli.test_errors import assert_clean

NO_CACHE_DIR = 'prototypes = "prototypes"\ncuda-src = "cuda_src"\n'


@pytest.fixture
def op_with_twin(make_project, sources):
    def make(name: str, **options):
        return make_project(
            {name: (sources.unary_op(name, cases=sources.ONE_CASE), sources.unary_twin(name))},
            **options,
        )

    return make


def notices(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("portkit: ")]


def test_xdg_cache_home_pointing_at_a_file(op_with_twin, cli, monkeypatch, tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    root = op_with_twin("cf_xdg", portkit_table=NO_CACHE_DIR)
    result = cli(root, "check", "cf_xdg", "--backend", "twin-cpu,sim")
    out = assert_clean(result, 0)
    (line,) = notices(result)
    assert line.startswith(f"portkit: cache folder {blocked / 'portkit'} (set by XDG_CACHE_HOME)")
    assert "is not usable (NotADirectoryError" in line and "running without the cache" in line
    assert "passed, 0 failed" in out
    for command in (["compile"], ["lint", "--no-resources"]):
        assert_clean(cli(root, *command), 0)


def test_cache_dir_in_pyproject_pointing_at_a_file(op_with_twin, cli):
    root = op_with_twin("cf_conf", portkit_table=NO_CACHE_DIR + 'cache-dir = "blocked"\n')
    (root / "blocked").write_text("a file")
    result = cli(root, "check", "cf_conf", "--backend", "twin-cpu", "--no-compile")
    assert_clean(result, 0)
    (line,) = notices(result)
    pyproject = root / "pyproject.toml"
    assert f"cache folder {root / 'blocked'} (set by [tool.portkit] cache-dir in {pyproject})" in (
        line
    )


def test_truncated_cpu_twin_library_is_rebuilt(op_with_twin, cli):
    root = op_with_twin("cf_lib")
    args = ("check", "cf_lib", "--backend", "twin-cpu", "--no-compile")
    assert_clean(cli(root, *args), 0)
    libraries = sorted((root / ".portkit-cache" / "twins-cpu").glob("cf_lib-*.so"))
    assert libraries
    for library in libraries:
        library.write_bytes(library.read_bytes()[:1000])
    result = cli(root, *args)
    out = assert_clean(result, 0)
    assert "0 failed" in out
    lines = notices(result)
    assert lines and all("is damaged: digest mismatch (1000 bytes" in x for x in lines)
    assert all(x.endswith("rebuilding it") for x in lines)
    assert_clean(cli(root, *args), 0)
    assert all(library.stat().st_size > 1000 for library in libraries)


def test_truncated_cubin_and_ptx_are_compiled_again(op_with_twin, cli):
    root = op_with_twin("cf_bin")
    assert_clean(cli(root, "compile", "cf_bin"), 0)
    cache = root / ".portkit-cache"
    (cubin,) = (cache / "twins").glob("cf_bin-*.cubin")
    ptx = sorted((cache / "numba").rglob("*.ptx"))
    assert ptx
    for artifact in (cubin, *ptx):
        artifact.write_bytes(artifact.read_bytes()[:10])
    result = cli(root, "compile", "cf_bin")
    out = assert_clean(result, 0)
    assert "cubin from NVRTC" in out
    assert "from the prototype cache" not in out
    damaged = {line.split()[3] for line in notices(result)}
    assert damaged == {str(p) for p in (cubin, *ptx)}
    out = assert_clean(cli(root, "compile", "cf_bin"), 0)
    assert "cubin from cache" in out


def test_stale_build_folder_is_swept_on_the_next_build(op_with_twin, cli):
    import os
    import time

    root = op_with_twin("cf_sweep")
    folder = root / ".portkit-cache" / "twins-cpu"
    folder.mkdir(parents=True)
    stale = folder / ".build-killed"
    stale.mkdir()
    (stale / "cf_sweep.cpp").write_text("// a killed run's leftovers")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    assert_clean(cli(root, "check", "cf_sweep", "--backend", "twin-cpu", "--no-compile"), 0)
    assert not stale.exists()
