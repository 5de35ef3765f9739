"""Every bad input gets a clear error naming what was wrong, a nonzero exit code
(2 for a user's mistake, 1 for a failed check) and no traceback."""

from __future__ import annotations

import json

import pytest
import torch

from portkit.backends import create
from portkit.build.compile_checks import check_twin
from portkit.errors import ConfigError, InputError, LaunchError, OpDefinitionError, OpNotFound
from portkit.launch.kernel_set import check_kernel_args, launch_config
from portkit.launch.op_inputs import check_inputs
from portkit.torch_op.load import registered_callable

BINARY = """\
import torch
from numba import cuda

import portkit

THREADS = 32


@cuda.jit
def {name}_fwd(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]


@portkit.op(reference=torch.add, cases=[portkit.cases.custom("float32-n5", [(5,), (5,)])])
class Add:
    def forward(k, a, b):
        out = k.empty_like(a)
        n = a.numel()
        if n:
            k.{name}_fwd[portkit.cdiv(n, THREADS), THREADS](a, b, out, n)
        return out, ()
"""


def flat(text: str) -> str:
    """Output with rich's line wrapping undone, for substring checks."""
    return " ".join(text.split())


def assert_clean(result, exit_code: int) -> str:
    output = result.output
    assert result.exit_code == exit_code, output
    assert "Traceback" not in output
    return flat(output)


@pytest.fixture
def add_op(make_project, load_op):
    """A two-input, same-shape op running on the simulator backend."""
    root = make_project({"err_add": (BINARY.format(name="err_add"), None)})
    config, op = load_op(root, "err_add")
    kernels = create("sim", config).kernels(op)
    return op, registered_callable(op, kernels, config.namespace, define_now=False)


# -- unknown op --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["sim", "check", "compile"])
def test_unknown_op_lists_known_ops(command, make_project, sources, cli):
    root = make_project(
        {
            "err_known_a": (sources.unary_op("err_known_a", cases=sources.ONE_CASE), None),
            "err_known_b": (sources.unary_op("err_known_b", cases=sources.ONE_CASE), None),
        }
    )
    result = cli(root, command, "nope")
    out = assert_clean(result, 2)
    assert "unknown op 'nope'" in out
    assert "known ops: err_known_a, err_known_b" in out


def test_op_not_found_error_lists_known():
    exc = OpNotFound("nope", ["a", "b"])
    assert "unknown op 'nope'; known ops: a, b" == str(exc)
    assert "none were found" in str(OpNotFound("nope", []))


# -- tensors on the wrong device ---------------------------------------------------------


def test_cpu_tensor_for_gpu_implementation_op_level(add_op):
    op, _ = add_op
    with pytest.raises(InputError) as info:
        check_inputs(op, [torch.ones(5), torch.ones(5)], "cuda")
    message = str(info.value)
    assert "input 0" in message
    assert "tensor is on cpu" in message
    assert "runs on cuda" in message
    assert ".to('cuda')" in message


def test_cpu_tensor_for_gpu_implementation_kernel_level():
    with pytest.raises(InputError) as info:
        check_kernel_args("k", [torch.ones(3)], "cuda")
    message = str(info.value)
    assert "kernel k, argument 0" in message
    assert "tensor is on cpu" in message
    assert "runs on cuda" in message


def test_kernel_args_reject_non_contiguous_and_non_numbers():
    with pytest.raises(InputError, match="argument 1: tensor of shape .* is not contiguous"):
        check_kernel_args("k", [torch.ones(4), torch.ones(8)[::2]], "cpu")
    with pytest.raises(InputError, match="argument 2: str is neither a tensor nor a number"):
        check_kernel_args("k", [torch.ones(4), 3, "4"], "cpu")
    checked = check_kernel_args("k", [torch.ones(2, requires_grad=True), 3, 2.5], "cpu")
    assert not checked[0].requires_grad
    assert checked[1:] == [3, 2.5]


def test_op_without_tensor_inputs(add_op):
    op, _ = add_op
    with pytest.raises(InputError, match="no tensor among the inputs"):
        check_inputs(op, [1.0, 2.0], "cpu")


# -- dtype, contiguity, shape ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int32, torch.float16])
def test_wrong_dtype(add_op, dtype):
    _, f = add_op
    x = torch.ones(5, dtype=dtype)
    with pytest.raises(InputError) as info:
        f(x, x)
    message = str(info.value)
    name = str(dtype).removeprefix("torch.")
    assert f"input 0 is {name}, a dtype the op does not accept" in message
    assert "float32" in message and "float64" in message


def test_mixed_float32_float64(add_op):
    _, f = add_op
    with pytest.raises(InputError) as info:
        f(torch.ones(5), torch.ones(5, dtype=torch.float64))
    message = str(info.value)
    assert "input 1" in message
    assert "input 1 is float64 but an earlier input is float32" in message


@pytest.mark.parametrize(
    "x", [torch.ones(10)[::2], torch.ones(5, 3).t()], ids=["slice", "transposed"]
)
def test_non_contiguous(add_op, x):
    _, f = add_op
    assert not x.is_contiguous()
    with pytest.raises(InputError) as info:
        f(x, torch.ones(x.shape))
    message = str(info.value)
    assert "input 0" in message
    assert "not contiguous" in message
    assert str(x.stride()) in message
    assert ".contiguous()" in message


def test_mismatched_shapes(add_op):
    _, f = add_op
    with pytest.raises(InputError) as info:
        f(torch.ones(4), torch.ones(3))
    message = str(info.value)
    assert "input 1 has shape (3,) but input 0 has (4,)" in message
    assert "equal shapes" in message


def test_good_inputs_run(add_op):
    _, f = add_op
    a, b = torch.arange(5.0), torch.full((5,), 0.5)
    assert torch.equal(f(a, b), a + b)


def test_op_check_inputs_rule_runs(make_project, sources, load_op):
    rule = (
        "    def check_inputs(x):\n"
        "        if x.dim() != 1:\n"
        "            raise portkit.InputError(f'err_rule takes a 1-D tensor, got {x.dim()}-D')\n\n"
        "    def forward(k, x):"
    )
    py = sources.unary_op("err_rule", cases=sources.ONE_CASE).replace(
        "    def forward(k, x):", rule
    )
    root = make_project({"err_rule": (py, None)})
    config, op = load_op(root, "err_rule")
    f = registered_callable(op, create("sim", config).kernels(op), config.namespace)
    with pytest.raises(InputError, match="err_rule takes a 1-D tensor, got 2-D"):
        f(torch.ones(2, 3))
    assert torch.equal(f(torch.ones(3)), torch.full((3,), 2.0))


# -- launch configuration ----------------------------------------------------------------


def test_launch_config_too_many_threads():
    with pytest.raises(LaunchError) as info:
        launch_config((1, 2048), "k")
    message = str(info.value)
    assert "kernel k" in message
    assert "2048 threads per block" in message
    assert "at most 1024" in message


def test_launch_config_too_many_threads_over_dims():
    with pytest.raises(LaunchError, match="1056 threads per block"):
        launch_config((1, (33, 32)), "k")


@pytest.mark.parametrize("grid", [0, (0,), (4, 0), (1, 1, 0)])
def test_launch_config_empty_grid(grid):
    with pytest.raises(LaunchError) as info:
        launch_config((grid, 32), "k")
    assert "has a dimension below 1" in str(info.value)
    assert "grid" in str(info.value)


@pytest.mark.parametrize(
    "config, words",
    [
        pytest.param(5, "launch as k.k[grid, block]", id="not-a-tuple"),
        pytest.param((1,), "launch as k.k[grid, block]", id="one-item"),
        pytest.param((1, 2, 3, 4), "launch as k.k[grid, block]", id="four-items"),
        pytest.param((1.5, 32), "grid must be an int or 1-3 ints", id="float-grid"),
        pytest.param((True, 32), "grid must be an int or 1-3 ints", id="bool-grid"),
        pytest.param((1, (32, True)), "block must be an int or 1-3 ints", id="bool-block"),
        pytest.param((1, "32"), "block must be an int or 1-3 ints", id="str-block"),
        pytest.param((1, (1, 2, 3, 4)), "block must be an int or 1-3 ints", id="four-dims"),
        pytest.param((1, 0), "has a dimension below 1", id="zero-block"),
        pytest.param((1, (1, 1, 65)), "block dimension z=65 > 64", id="z-over-64"),
        pytest.param((1, 32, 10**9), "bytes of dynamic shared memory", id="shared-too-big"),
        pytest.param((1, 32, -1), "bytes of dynamic shared memory", id="shared-negative"),
        pytest.param((2**31, 32), "grid dimension x=2147483648", id="grid-x-too-big"),
        pytest.param(((1, 65536), 32), "grid dimension y=65536", id="grid-y-too-big"),
    ],
)
def test_launch_config_rejects(config, words):
    with pytest.raises(LaunchError) as info:
        launch_config(config, "k")
    assert words in str(info.value)


def test_launch_config_accepts_and_pads():
    config = launch_config((3, (32, 4), 256), "k")
    assert config.grid == (3, 1, 1)
    assert config.block == (32, 4, 1)
    assert config.shared_bytes == 256
    assert config.threads_per_block == 128
    assert launch_config(((2, 2), 1024), "k").threads_per_block == 1024


def test_block_over_1024_in_prototype_fails_check(make_project, sources, cli):
    py = sources.unary_op("err_bigblock", cases=sources.ONE_CASE, block="2048")
    root = make_project({"err_bigblock": (py, None)})
    result = cli(root, "check", "err_bigblock", "--backend", "sim", "--no-compile")
    out = assert_clean(result, 1)
    assert "block (2048, 1, 1) asks for 2048 threads per block" in out
    assert "at most 1024" in out
    assert "0 passed, 1 failed" in out


def test_unknown_kernel_name_in_launcher(make_project, sources, load_op):
    from portkit.checking.harness import run_case

    py = sources.unary_op("err_kname", cases=sources.ONE_CASE).replace(
        "k.err_kname_fwd[", "k.err_kname_fwdd["
    )
    root = make_project({"err_kname": (py, None)})
    config, op = load_op(root, "err_kname")
    results = run_case(op, op.definition.cases[0], [create("sim", config)])
    (forward,) = [r for r in results if r.check == "forward"]
    assert forward.status == "fail"
    assert "has no kernel 'err_kname_fwdd'" in forward.detail
    assert "kernels: err_kname_fwd" in forward.detail


# -- twins that do not compile -----------------------------------------------------------


def test_twin_with_typo_does_not_compile(make_project, sources, cli):
    cu = sources.unary_twin("err_typo", body="out[i] = x[i] * T(2);\n        int y = ;")
    root = make_project({"err_typo": (sources.unary_op("err_typo", cases=sources.ONE_CASE), cu)})
    line = cu.splitlines().index("        int y = ;") + 1
    result = cli(root, "compile", "err_typo")
    out = assert_clean(result, 1)
    assert "does not compile for sm_90" in out
    assert f"err_typo.cu({line}): error" in out
    assert "expected a" in out
    # nothing half-written lands in the cache
    twins = root / ".portkit-cache" / "twins"
    assert not twins.exists() or not list(twins.iterdir())


def test_twin_lacking_a_kernel(make_project, sources, cli, load_op):
    py = sources.unary_op("err_lack", cases=sources.ONE_CASE, backward="dx[i] = dy[i] * 2.0")
    cu = sources.unary_twin("err_lack")  # forward only
    root = make_project({"err_lack": (py, cu)})
    config, op = load_op(root, "err_lack")
    result = check_twin(op, config)
    assert result is not None and result.status == "fail"
    assert "lacks kernel(s) err_lack_bwd" in result.detail
    assert "err_lack.cu" in result.detail
    out = assert_clean(cli(root, "compile", "err_lack"), 1)
    assert "lacks kernel(s) err_lack_bwd" in out


# -- a kernel that raises in the simulator -----------------------------------------------


def out_of_bounds_at(index: int) -> str:
    """A kernel body in which thread ``index`` writes 1000 elements past the end."""
    return f"""
    if i == {index}:
        out[i + 1000] = 0.0
    out[i] = x[i] * 2.0
    """


def test_kernel_error_names_block_and_thread(make_project, sources, load_op, cli):
    from portkit.checking.harness import run_case

    body = out_of_bounds_at(35)
    root = make_project(
        {"err_oob": (sources.unary_op("err_oob", body, cases=sources.ONE_CASE), None)}
    )
    config, op = load_op(root, "err_oob")
    results = run_case(op, op.definition.cases[0], [create("sim", config)])
    (forward,) = [r for r in results if r.check == "forward"]
    assert forward.status == "fail"
    detail = forward.detail
    assert "kernel err_oob_fwd: out-of-bounds write of global array out[1035]" in detail
    assert "block (1, 0, 0), thread (3, 0, 0)" in detail  # i = 1 * 32 + 3
    assert "err_oob.py:" in detail and "out[i + 1000] = 0.0" in detail
    assert "seed 0" in detail

    out = assert_clean(cli(root, "check", "err_oob", "--backend", "sim", "--no-compile"), 1)
    assert "block (1, 0, 0), thread (3, 0, 0)" in out
    out = assert_clean(cli(root, "sim", "err_oob"), 1)
    assert "block (1, 0, 0), thread (3, 0, 0)" in out
    assert "FAIL" in out


def test_sim_prints_kernel_error_verbatim(make_project, sources, cli):
    """`portkit sim` prints the failing kernel line and the seed as text, not rich markup."""
    body = out_of_bounds_at(35)
    py = sources.unary_op("err_vbk", body, cases=sources.ONE_CASE)
    root = make_project({"err_vbk": (py, None)})
    out = assert_clean(cli(root, "sim", "err_vbk"), 1)
    assert "block (1, 0, 0), thread (3, 0, 0)" in out
    assert "err_vbk.py:16: out[i + 1000] = 0.0" in out
    assert "[seed 0; reproduce: portkit" in out


def test_kernel_error_first_thread(make_project, sources, load_op):
    from portkit.checking.harness import run_case

    body = out_of_bounds_at(3)
    root = make_project(
        {"err_oob3": (sources.unary_op("err_oob3", body, cases=sources.ONE_CASE), None)}
    )
    config, op = load_op(root, "err_oob3")
    results = run_case(op, op.definition.cases[0], [create("sim", config)])
    assert any("block (0, 0, 0), thread (3, 0, 0)" in r.detail for r in results if r.failed)


# -- broken prototype files --------------------------------------------------------------


BROKEN = {
    "err_syntax": "def f(:\n    pass\n",
    "err_import": "import portkit_no_such_module_xyz\n",
}


def test_broken_prototypes_do_not_hide_others(make_project, sources, cli):
    ops = {name: (text, None) for name, text in BROKEN.items()}
    ops["err_fine"] = (sources.unary_op("err_fine", cases=sources.ONE_CASE), None)
    root = make_project(ops)

    rows = {row["op"]: row for row in json.loads(cli(root, "list", "--json").output)}
    assert set(rows) == {"err_syntax", "err_import", "err_fine"}
    assert rows["err_fine"]["kernels"] == ["err_fine_fwd"]
    assert "SyntaxError" in rows["err_syntax"]["error"]
    assert str(root / "prototypes" / "err_syntax.py") in rows["err_syntax"]["error"]
    assert "ModuleNotFoundError" in rows["err_import"]["error"]
    assert "portkit_no_such_module_xyz" in rows["err_import"]["error"]

    out = assert_clean(cli(root, "list"), 0)
    assert "err_fine" in out
    assert "err_syntax" in out and "err_import" in out
    assert out.count("broken:") == 2

    for name in BROKEN:
        out = assert_clean(cli(root, "sim", name), 2)
        assert f"op {name} cannot be loaded" in out
        assert str(root / "prototypes" / f"{name}.py") in out
        out = assert_clean(cli(root, "check", name), 2)
        assert f"op {name} cannot be loaded" in out

    assert_clean(cli(root, "sim", "err_fine"), 0)


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "x = 1\n",
            "must define exactly one @portkit.op class; found none (a helper module, not an "
            "op? name it _err_other.py)",
        ),
        ("raise RuntimeError('boom')\n", "failed to import: RuntimeError: boom"),
    ],
)
def test_other_broken_prototypes(make_project, text, words):
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    root = make_project({"err_other": (text, None)})
    catalog = discover(load_config(root))
    assert words in catalog.broken["err_other"]
    with pytest.raises(OpDefinitionError) as info:
        catalog.get("err_other")
    assert words in str(info.value)


# -- config --------------------------------------------------------------------------------


def test_bad_config_key(make_project, cli):
    from portkit.project.config import load_config

    root = make_project({}, portkit_table='prototypes = "prototypes"\nprototype-dir = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_config(root)
    message = str(info.value)
    assert "unknown key(s) in [tool.portkit]: prototype-dir" in message
    known = (
        "known keys: archs, backends, cache-dir, cuda-src, lint-warnings, lockstep-fallback, "
        "namespace, prototypes, sim-budget"
    )
    assert known in message
    assert str(root / "pyproject.toml") in message
    for command in (["list"], ["sim", "anything"], ["check", "--all"], ["compile"]):
        out = assert_clean(cli(root, *command), 2)
        assert known in out


def test_config_namespace_must_be_an_identifier(make_project):
    from portkit.project.config import load_config

    root = make_project({}, portkit_table='namespace = "my-lib"\n')
    with pytest.raises(ConfigError, match=r"namespace 'my-lib' must be a Python identifier"):
        load_config(root)
    root = make_project({}, portkit_table='namespace = "mylib"\n')
    assert load_config(root).namespace == "mylib"


def test_config_value_not_a_string(make_project):
    from portkit.project.config import load_config

    root = make_project({}, portkit_table="prototypes = 3\n")
    with pytest.raises(ConfigError, match=r"\[tool.portkit\] prototypes must be a string path"):
        load_config(root)


def test_config_not_toml(tmp_path, cli):
    from portkit.project.config import load_config

    (tmp_path / "pyproject.toml").write_text("[tool.portkit\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path)
    out = assert_clean(cli(tmp_path, "list"), 2)
    assert "not valid TOML" in out


# -- command-line usage ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, words",
    [
        (["--block", "x"], "--block is X or X,Y or X,Y,Z with integers, got 'x'"),
        (["--thread", "1,2,3,4"], "--thread is 1 to 3 non-negative integers"),
        (["--block", "-1"], "--block is 1 to 3 non-negative integers"),
        (["--shape", "2xa"], "shape is like 129 or 4x129"),
        (["--size", "3", "--shape", "3"], "give --size or --shape, not both"),
        (["--kernel", "err_usage_fwd"], "--kernel chooses where --block/--thread stop"),
        (["--dtype", "float8"], "float8"),
        (["--size", "-1"], "--size"),
    ],
)
def test_sim_usage_errors(make_project, sources, cli, args, words):
    root = make_project(
        {"err_usage": (sources.unary_op("err_usage", cases=sources.ONE_CASE), None)}
    )
    out = assert_clean(cli(root, "sim", "err_usage", *args), 2)
    assert "Usage: portkit sim" in out
    assert words in out


def test_sim_dtype_the_op_does_not_accept(make_project, sources, cli):
    """A dtype portkit knows but the op does not take: one line naming what it takes."""
    root = make_project(
        {"err_dtype": (sources.unary_op("err_dtype", cases=sources.ONE_CASE), None)}
    )
    out = assert_clean(cli(root, "sim", "err_dtype", "--dtype", "float16"), 2)
    assert "op err_dtype does not accept float16; it takes float32, float64" in out


def test_sim_unknown_kernel_for_breakpoint(make_project, sources, cli):
    root = make_project({"err_bk": (sources.unary_op("err_bk", cases=sources.ONE_CASE), None)})
    out = assert_clean(cli(root, "sim", "err_bk", "--kernel", "nope", "--block", "0"), 2)
    assert "op err_bk has no kernel 'nope'; kernels: err_bk_fwd" in out


def test_check_needs_ops_or_all(make_project, sources, cli):
    root = make_project({"err_ca": (sources.unary_op("err_ca", cases=sources.ONE_CASE), None)})
    out = assert_clean(cli(root, "check"), 2)
    assert "name one or more OPs, or pass --all" in out
    out = assert_clean(cli(root, "check", "err_ca", "--all"), 2)
    assert "name one or more OPs, or pass --all" in out


def test_check_unknown_backend_and_case(make_project, sources, cli):
    root = make_project({"err_cb": (sources.unary_op("err_cb", cases=sources.ONE_CASE), None)})
    out = assert_clean(cli(root, "check", "err_cb", "--backend", "cupy"), 2)
    assert "unknown backend 'cupy'; backends: torch, sim, numba, twin" in out
    out = assert_clean(cli(root, "check", "err_cb", "--case", "nope"), 2)
    assert "op err_cb has no case 'nope'; cases: float32-n129" in out
    out = assert_clean(cli(root, "sim", "err_cb", "--case", "nope"), 2)
    assert "op err_cb has no case 'nope'; cases: float32-n129" in out


def test_list_shows_broken_op_verbatim(tmp_path, make_project, sources, cli):
    """Error text is printed as text: a project folder named ops[v2] is not rich markup."""
    root = make_project(
        {
            "err_vb_ok": (sources.unary_op("err_vb_ok", cases=sources.ONE_CASE), None),
            "err_vb_broken": ("import portkit_no_such_module_xyz\n", None),
        },
        at=tmp_path / "ops[v2]",
    )
    out = assert_clean(cli(root, "list"), 0)
    assert "err_vb_ok" in out
    assert "broken:" in out
    assert "ops[v2]" in out
