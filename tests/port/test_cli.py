"""`portkit port` as a user meets it: where it writes, what it refuses, its exit codes."""

from __future__ import annotations

import os

import pytest

BODY = "out[i] = x[i] * 2.0"


@pytest.fixture
def project(make_project, sources):
    def make(name: str, body: str = BODY, twin: str | None = None):
        return make_project({name: (sources.unary_op(name, body, cases=sources.ONE_CASE), twin)})

    return make


def test_writes_the_twin_path_by_default(project, cli):
    root = project("pdefault")
    result = cli(root, "port", "pdefault")
    assert result.exit_code == 0, result.output
    twin = root / "cuda_src" / "pdefault.cu"
    assert result.stdout == f"wrote {twin} (1 kernels)\n"
    text = twin.read_text()
    assert "__global__ void pdefault_fwd(const float* x, float* out, long long n) {" in text
    assert "out[i] = x[i] * 2.0;  // pdefault.py:15" in text
    assert not [p for p in twin.parent.iterdir() if p.name.startswith(".")]  # no temp left


def test_refuses_to_replace_a_twin_without_force(project, cli, sources):
    twin_source = sources.unary_twin("pkeep")
    root = project("pkeep", twin=twin_source)
    twin = root / "cuda_src" / "pkeep.cu"
    result = cli(root, "port", "pkeep")
    assert result.exit_code == 2
    assert result.stderr == f"error: {twin} exists; pass --force to replace it with the draft\n"
    assert "Traceback" not in result.output
    assert twin.read_text() == twin_source
    forced = cli(root, "port", "pkeep", "--force")
    assert forced.exit_code == 0, forced.output
    assert "// Draft twin of pkeep.py" in twin.read_text()


def test_out_and_kernel(project, cli, tmp_path):
    root = project("pout")
    out = tmp_path / "elsewhere" / "draft.cu"
    result = cli(root, "port", "pout", "--out", str(out), "--kernel", "pout_fwd")
    assert result.exit_code == 0, result.output
    assert "pout_fwd" in out.read_text()
    assert not (root / "cuda_src" / "pout.cu").exists()


def test_an_unknown_kernel_is_one_line(project, cli):
    root = project("pnokernel")
    result = cli(root, "port", "pnokernel", "--kernel", "nope")
    assert result.exit_code == 2
    assert result.stderr == "error: op pnokernel has no kernel nope; its kernels: pnokernel_fwd\n"


def test_gaps_are_listed_and_the_exit_code_is_1(project, cli):
    root = project("pgap", "for v in x:\n    out[i] = v")
    result = cli(root, "port", "pgap")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines == [
        "pgap.py:15: kernel pgap_fwd: for loop over anything but range() is not translated",
        "1 constructs not translated: see the #error lines",
    ]
    text = (root / "cuda_src" / "pgap.cu").read_text()
    assert '#error "portkit port: for loop over anything but range() at pgap.py:15' in text


def test_check_runs_portkit_check_on_the_draft_in_a_copy(project, cli):
    root = project("pchecked")
    result = cli(root, "port", "pchecked", "--check")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "draft of pchecked passes portkit check"
    # the machine's backends: the CPU twin and the simulator, or numba and the twin on a GPU
    import torch

    pair = ("numba", "twin") if torch.cuda.is_available() else ("twin-cpu", "sim")
    assert all(name in result.stdout for name in pair), result.stdout
    assert sorted(p.name for p in (root / "cuda_src").iterdir()) == ["pchecked.cu"]


def test_the_readme_tour_op_is_drafted_and_its_draft_passes_check(make_project, cli):
    from tests.cli.test_readme_tour import readme_block

    root = make_project({"scale": (readme_block("prototypes/scale.py", "python"), None)})
    result = cli(root, "port", "scale", "--check")
    assert result.exit_code == 0, result.output
    draft = (root / "cuda_src" / "scale.cu").read_text()
    assert "__global__ void scale_fwd(const T* x, T* out, long long n) {" in draft
    assert "out[i] = (double)x[i] * 3;  // scale.py:" in draft  # numba: f32 * int64 is f64


def test_the_draft_goes_through_clang_format_when_it_is_installed(
    project, cli, tmp_path, monkeypatch
):
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "clang-format"
    fake.write_text('#!/bin/sh\necho "// formatted with $1"\ncat\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    root = project("pformat")
    assert cli(root, "port", "pformat").exit_code == 0
    first = (root / "cuda_src" / "pformat.cu").read_text().splitlines()[0]
    assert first.startswith("// formatted with --style={BasedOnStyle: Google, IndentWidth: 4")
    (root / ".clang-format").write_text("BasedOnStyle: LLVM\n")
    assert cli(root, "port", "pformat", "--force").exit_code == 0
    first = (root / "cuda_src" / "pformat.cu").read_text().splitlines()[0]
    assert first == "// formatted with --style=file"
    fake.write_text("#!/bin/sh\nexit 1\n")  # a failing clang-format leaves the draft as it is
    assert cli(root, "port", "pformat", "--force").exit_code == 0
    assert (root / "cuda_src" / "pformat.cu").read_text().startswith("// Draft twin of pformat.py")
