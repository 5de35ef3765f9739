"""The fuzz list (docs/verdicts.md), one test each: nothing green that did not check (a dropped
gradient, a launch over the device's shared-memory limit, a configured folder that does
not exist, a requested backend or case that did not run, an export of a twin that fails
compile), and every mistake one line with a nonzero exit, nothing written where it
should not be (port --out, package names, cache subfolders, --json and raw writes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_errors import assert_clean
from tests.cli.test_false_green import one_line_error

WORKTREE = Path(__file__).resolve().parents[2]
NO_GPU = "no CUDA GPU visible to PyTorch"


def no_gpu() -> bool:
    import torch

    return not torch.cuda.is_available()


# -- a gradient the backward drops ----------------------------------------------------------

MUL = """\
import torch
from numba import cuda

import portkit


@cuda.jit
def {name}_fwd(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] * {b_value}


@cuda.jit
def {name}_bwd(b, dout, da, n):
    i = cuda.grid(1)
    if i < n:
        da[i] = dout[i] * {b_value}


@portkit.op(reference={reference}, cases=[{case}]{options})
class Mul:
    def forward(k, a, b):
        out = k.empty_like(a)
        n = a.numel()
        k.{name}_fwd[portkit.cdiv(n, 32), 32](a, b, out, n)
        return out, (a, b)

    def backward(k, saved, dout):
        a, b = saved
        da = k.empty_like(a)
        n = a.numel()
        k.{name}_bwd[portkit.cdiv(n, 32), 32](b, dout, da, n)
        return da, None
"""
FLOAT_CASE = 'portkit.cases.custom("float32-n33", [(33,), (33,)])'


def mul_op(name: str, **fields: str) -> str:
    values = dict(b_value="b[i]", reference="torch.mul", case=FLOAT_CASE, options="")
    return MUL.format(name=name, **{**values, **fields})


def test_a_gradient_the_backward_drops_fails_naming_the_input(make_project, cli):
    root = make_project({"mk_drop": (mul_op("mk_drop"), None)})
    result = cli(root, "check", "mk_drop", "--backend", "sim", "--no-compile", "--json")
    assert result.exit_code == 1, result.output
    rows = {r["check"]: r for r in json.loads(result.stdout)["results"]}
    assert rows["forward"]["status"] == "pass"
    assert rows["backward"]["status"] == "fail"
    assert (
        "grad of input 1 (b): the backward returns None but the reference gives this input "
        "a gradient; return it, or declare the input with no_grad=" in rows["backward"]["detail"]
    )


@pytest.mark.parametrize(
    "fields",
    [
        # declared: the author says b carries none
        dict(options=', no_grad=("b",)'),
        # the reference gives b no gradient either
        dict(reference="lambda a, b: a * b.detach()"),
        # an integer input has none to give
        dict(
            b_value="float(b[i])",
            reference="lambda a, b: a * b",
            case='portkit.cases.custom("mixed-n33", [(33,), (33,)], '
            'input_dtypes=("float32", "int64"))',
            options=', input_dtypes=(None, "int64")',
        ),
    ],
    ids=["declared", "reference-has-none", "integer"],
)
def test_inputs_without_a_gradient_still_pass(make_project, cli, fields):
    root = make_project({"mk_keep": (mul_op("mk_keep", **fields), None)})
    result = cli(root, "check", "mk_keep", "--backend", "sim", "--no-compile", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["check"]: r["status"] for r in json.loads(result.stdout)["results"]}
    assert rows["backward"] == "pass"


# -- launches over the device's limits ------------------------------------------------------

SHARED = """\
import torch
from numba import cuda, float32

import portkit


@cuda.jit
def {name}_fwd(x, out, n):
    buf = cuda.shared.array({size}, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    if i < n:
        buf[t] = x[i]
    cuda.syncthreads()
    if i < n:
        out[i] = buf[t] * 2


@portkit.op(reference=lambda x: x * 2, cases=[portkit.cases.custom("float32-n33", [(33,)])])
class Shared:
    def forward(k, x):
        out = k.empty_like(x)
        n = x.numel()
        k.{name}_fwd[portkit.cdiv(n, {threads}), {threads}](x, out, n)
        return out, ()
"""


@pytest.mark.parametrize(
    "size, words",
    [
        ("100000", "400000 bytes of static shared memory per block; a GPU allows 49152"),
        # 4 GiB: said before any allocation (it was killed for memory, rc 137, no message)
        ("1 << 30", "4294967296 bytes of static shared memory per block; a GPU allows 49152"),
    ],
)
def test_shared_memory_over_the_limit_fails_sim_and_check(make_project, cli, size, words):
    name = "mk_shared"
    root = make_project({name: (SHARED.format(name=name, size=size, threads=32), None)})
    out = assert_clean(cli(root, "sim", name), 1)
    assert f"kernel {name}_fwd: raised LaunchError: {words}" in out
    assert "ptxas rejects the kernel (`portkit lint` reports it)" in out
    assert f"{name}.py:9: buf = cuda.shared.array({size}, float32)" in out
    out = assert_clean(cli(root, "check", name, "--backend", "sim", "--no-compile"), 1)
    assert words in out and "0 passed, 1 failed" in out


def test_shared_memory_within_the_limit_passes(make_project, cli):
    # 12288 float32 = 48 KiB exactly: the most a block may declare statically
    root = make_project({"mk_fits": (SHARED.format(name="mk_fits", size=12288, threads=32), None)})
    assert_clean(cli(root, "check", "mk_fits", "--backend", "sim", "--no-compile"), 0)


def test_threads_per_block_over_1024_fail_sim(make_project, cli):
    root = make_project({"mk_wide": (SHARED.format(name="mk_wide", size=32, threads=2048), None)})
    out = assert_clean(cli(root, "sim", "mk_wide"), 1)
    assert "asks for 2048 threads per block; a GPU allows at most 1024" in out


# -- configured folders that do not exist ---------------------------------------------------


@pytest.mark.parametrize("key", ["cuda-src", "prototypes"])
def test_a_configured_folder_that_does_not_exist_is_an_error(make_project, sources, cli, key):
    folders = {"prototypes": "prototypes", "cuda-src": "cuda_src"}
    folders[key] = folders[key] + "-typo"
    table = "".join(f'{k} = "{v}"\n' for k, v in folders.items())
    op = sources.unary_op("mk_typo", cases=sources.ONE_CASE)
    root = make_project({"mk_typo": (op, sources.unary_twin("mk_typo"))}, portkit_table=table)
    for command in (["check", "--all"], ["list"], ["compile"]):
        out = assert_clean(cli(root, *command), 2)
        line = one_line_error(out)
        assert f"[tool.portkit] {key} names {root / folders[key]}: no such folder" in line


# -- requested backends and cases that did not run -----------------------------------------


@pytest.fixture
def with_twin(make_project, sources):
    op = sources.unary_op("mk_tw", cases=sources.ONE_CASE)
    bare = sources.unary_op("mk_bare", cases=sources.ONE_CASE)
    return make_project({"mk_tw": (op, sources.unary_twin("mk_tw")), "mk_bare": (bare, None)})


def test_check_with_a_requested_backend_that_cannot_run_exits_3(with_twin, cli):
    if not no_gpu():
        pytest.skip("the twin backend runs on this machine")
    args = ("check", "mk_tw", "--backend", "sim,twin", "--no-compile")
    out = assert_clean(cli(with_twin, *args), 3)
    assert f"not run: twin ({NO_GPU} on this machine); a requested backend" in out
    result = cli(with_twin, *args, "--json")
    assert result.exit_code == 3
    json.loads(result.stdout)
    # the backends this machine has still pass; twin-cpu of a twin-less op did not run
    assert_clean(cli(with_twin, "check", "mk_tw", "--backend", "sim,twin-cpu", "--no-compile"), 0)
    out = assert_clean(
        cli(with_twin, "check", "mk_bare", "--backend", "sim,twin-cpu", "--no-compile"), 3
    )
    assert "not run: twin-cpu (no twin" in out


def test_watch_that_ran_nothing_exits_3(with_twin, cli):
    out = assert_clean(cli(with_twin, "watch", "mk_tw", "--case", "nosuch", "--runs", "1"), 2)
    assert "op mk_tw has no case 'nosuch'; cases: float32-n129" in out
    out = assert_clean(cli(with_twin, "watch", "--case", "nosuch", "--runs", "1"), 3)
    assert "not run: mk_bare (no case named nosuch); mk_tw (no case named nosuch)" in out
    if no_gpu():
        args = ("watch", "mk_tw", "--backend", "sim,twin", "--runs", "1")
        out = assert_clean(cli(with_twin, *args), 3)
        assert f"not run: twin ({NO_GPU}" in out
    assert_clean(cli(with_twin, "watch", "mk_tw", "--backend", "sim", "--runs", "1"), 0)


def test_diff_of_an_op_without_a_twin_says_so_and_exits_3(with_twin, cli):
    result = cli(with_twin, "diff", "mk_bare")
    out = assert_clean(result, 3)
    twin = with_twin / "cuda_src" / "mk_bare.cu"
    assert f"not run: the twin (no twin: {twin} does not exist)" in out
    assert "no GPU" not in out  # the reason is the missing file, not the machine
    assert_clean(cli(with_twin, "diff", "mk_bare", "--sim"), 0)  # asked for: a pass


# -- export of a twin that compile fails ----------------------------------------------------


def test_export_refuses_a_twin_whose_parameters_do_not_match(make_project, sources, cli, tmp_path):
    twin = sources.unary_twin("mk_sig").replace("long long n)", "long long n, int extra)")
    root = make_project({"mk_sig": (sources.unary_op("mk_sig", cases=sources.ONE_CASE), twin)})
    out = assert_clean(cli(root, "compile", "mk_sig"), 1)
    assert "takes 4 parameter(s) (x, out, n, extra); the launcher passes 3" in out
    target = tmp_path / "exported"
    out = assert_clean(cli(root, "export", "mk_sig", "--out", str(target)), 2)
    line = one_line_error(out)
    assert "op mk_sig: not exported, its twin does not match its launches" in line
    assert "takes 4 parameter(s)" in line and "`portkit compile mk_sig`" in line
    assert not target.exists()


@pytest.mark.parametrize(
    "name, words",
    [
        ("_x", "is not a name pip installs (PEP 508"),
        ("__init__", "is not a name pip installs (PEP 508"),
        ("café", "is not a name pip installs (PEP 508"),
        ("k" * 300, "package name of 300 characters; at most 100"),
        ("my-kernels", "is not a Python identifier"),
    ],
)
def test_export_refuses_names_pip_cannot_install(make_project, sources, cli, tmp_path, name, words):
    op = sources.unary_op("mk_name", cases=sources.ONE_CASE)
    root = make_project({"mk_name": (op, sources.unary_twin("mk_name"))})
    target = tmp_path / "exported"
    out = assert_clean(cli(root, "export", "mk_name", "--out", str(target), "--name", name), 2)
    assert words in one_line_error(out)
    assert not target.exists()


# -- port --force --out writes only a regular file of its own -------------------------------


@pytest.fixture
def port_project(make_project, sources):
    op = sources.unary_op("mk_port", cases=sources.ONE_CASE)
    return make_project({"mk_port": (op, None)})


def device_file(folder: Path) -> Path:
    """A character device like /dev/null, made in ``folder`` (never the real one: a
    regression would replace it), else /dev/null's kind cannot be tested here."""
    import stat

    path = folder / "null.cu"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:
        pytest.skip("cannot make a device file here (mknod needs CAP_MKNOD)")
    return path


def test_port_force_never_replaces_a_fifo_device_link_or_prototype(port_project, cli, tmp_path):
    fifo = tmp_path / "fifo.cu"
    os.mkfifo(fifo)
    device = device_file(tmp_path)
    prototype = port_project / "prototypes" / "mk_port.py"
    before = prototype.read_text()
    link = tmp_path / "link.cu"
    link.symlink_to(prototype)
    cases = {
        str(fifo): "is not a regular file (a FIFO, socket or device); not replaced",
        str(device): "is not a regular file (a FIFO, socket or device); not replaced",
        str(prototype): "is a Python file (a prototype or module)",
        str(link): "is a Python file (a prototype or module)",
    }
    for target, words in cases.items():
        out = assert_clean(cli(port_project, "port", "mk_port", "--force", "--out", target), 2)
        assert words in one_line_error(out)
    assert prototype.read_text() == before
    assert device.is_char_device() and fifo.is_fifo() and link.is_symlink()
    other = tmp_path / "other.cu"
    other.symlink_to(tmp_path / "elsewhere.cu")
    out = assert_clean(cli(port_project, "port", "mk_port", "--force", "--out", str(other)), 2)
    assert "is a symbolic link; --out names the file itself" in one_line_error(out)


def test_port_force_replaces_a_regular_file_whole(port_project, cli, tmp_path):
    target = tmp_path / "draft.cu"
    target.write_text("// old\n")
    out = assert_clean(cli(port_project, "port", "mk_port", "--out", str(target)), 2)
    assert "exists; pass --force" in out
    assert_clean(cli(port_project, "port", "mk_port", "--force", "--out", str(target)), 0)
    assert "mk_port_fwd" in target.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".draft.cu")] == []


def test_port_into_a_folder_that_cannot_be_written_is_one_line(port_project, cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = assert_clean(cli(port_project, "port", "mk_port", "--out", str(blocker / "x.cu")), 2)
    assert f"cannot write {blocker / 'x.cu'}: Not a directory" in one_line_error(out)
    if os.geteuid() == 0:
        return  # root writes into a read-only folder
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    out = assert_clean(cli(port_project, "port", "mk_port", "--out", str(locked / "x.cu")), 2)
    assert f"cannot write {locked / 'x.cu'}: Permission denied" in one_line_error(out)


# -- tolerances and budgets that are no bound -----------------------------------------------


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", "-1e-3"])
def test_a_tolerance_of_nan_inf_or_below_zero_is_one_line(make_project, sources, cli, value):
    options = f'tolerances=[portkit.Tolerance(rtol=0, atol={value}, reason="r")]'
    op = sources.unary_op("mk_tol", cases=sources.ONE_CASE, op_options=options)
    root = make_project({"mk_tol": (op, None)})
    out = assert_clean(cli(root, "check", "mk_tol", "--backend", "sim", "--no-compile"), 2)
    assert "atol must be a number >= 0 and finite" in one_line_error(out)


def test_a_budget_of_a_microsecond_stops_with_one_line(make_project, sources, cli):
    # Big enough that the launch outlasts the watchdog thread's first turn on a loaded
    # 2-core machine: 129 elements could finish before it ran, and a launch that ends
    # is not stopped (simt/watchdog.py), so the budget was not seen (CI, 2026-11-27).
    many = '[portkit.cases.custom("float32-n262144", [(262144,)])]'
    root = make_project({"mk_bud": (sources.unary_op("mk_bud", cases=many), None)})
    sim = ["sim", "mk_bud", "--case", "float32-n262144"]
    for command in (sim, ["check", "mk_bud", "--backend", "sim", "--no-compile"]):
        out = assert_clean(cli(root, *command, "--budget", "0.000001"), 1)
        assert "kernel mk_bud_fwd: still running after 1e-06 s" in out


# -- cache subfolders that cannot be used ---------------------------------------------------


def test_an_unusable_twins_cpu_cache_folder_is_skipped_with_one_line(make_project, sources, cli):
    op = sources.unary_op("mk_cache", cases=sources.ONE_CASE)
    root = make_project({"mk_cache": (op, sources.unary_twin("mk_cache"))})
    folder = root / ".portkit-cache" / "twins-cpu"
    folder.parent.mkdir(parents=True)
    folder.write_text("not a folder")
    result = cli(root, "check", "mk_cache", "--backend", "twin-cpu", "--no-compile")
    out = assert_clean(result, 0)
    assert "1 passed, 0 failed" in out
    notices = [x for x in result.stderr.splitlines() if x.startswith("portkit: ")]
    assert notices == [
        f"portkit: cache folder {folder} is not usable (a file, not a folder); "
        f"skipping it for this run"
    ]


# -- helpers a prototype imports ------------------------------------------------------------

HELPER = "from numba import cuda\n\n\n@cuda.jit(device=True)\ndef scale(v):\n    return v * 3.0\n"


@pytest.mark.parametrize("where", ["prototypes/_mk_help_beside.py", "_mk_help_root.py"])
def test_a_prototype_imports_a_helper_as_the_portkit_command(make_project, sources, cli, where):
    module = Path(where).stem
    body = f"out[i] = {module}.scale(x[i])"
    py = sources.unary_op(
        "mk_helped", body, cases=sources.ONE_CASE, reference="lambda x: x * 3"
    ).replace("import portkit\n", f"import portkit\nimport {module}\n")
    root = make_project({"mk_helped": (py, None)}, files={where: HELPER})
    # as the console script: neither the project nor the working directory on sys.path
    assert not {"", str(root)} & set(sys.path)
    try:
        out = assert_clean(cli(root, "check", "mk_helped", "--backend", "sim", "--no-compile"), 0)
    finally:
        sys.modules.pop(module, None)
    assert "1 passed, 0 failed" in out
    assert str(root) not in sys.path  # taken off again after the import


# -- raw writes to file descriptor 1 and --json ---------------------------------------------


def test_a_raw_write_to_fd_1_at_import_keeps_json_parseable(make_project, sources, tmp_path):
    text = 'import os\nos.write(1, b"raw bytes from mk_raw\\n")\n'
    op = text + sources.unary_op("mk_raw", cases=sources.ONE_CASE)
    root = make_project({"mk_raw": (op, None)})
    # the console script's sys.path: its own folder, not the working directory
    script = tmp_path / "bin" / "portkit"
    script.parent.mkdir()
    script.write_text(
        f"import sys\nsys.path.insert(1, {str(WORKTREE)!r})\n"
        "from portkit.cli import main\nsys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, str(script), "list", "--json"]
    proc = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)  # the JSON and nothing else
    assert [r["op"] for r in rows] == ["mk_raw"]
    assert "raw bytes from mk_raw" in proc.stderr
