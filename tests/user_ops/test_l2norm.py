"""A row-wise L2 norm in the mixed-precision idiom of docs/authoring.md: the storage type
T and the compute type A (float for float16, bfloat16 and float32, double for float64)
are two template parameters of the twin, A decided by a float32 or float64 stats tensor.

`T=__half, A=__half` does not compile (two `operator/` match) and no launch makes it:
portkit instantiates the combinations the op's cases launch, so the op passes
`portkit check` on whatever the machine has; a twin with a wrong backward fails it; a
launch of a combination no case makes is one clear line.
"""

from __future__ import annotations

import json

import pytest
import torch

from portkit.backends.twin_cpu.build import find_compiler
from portkit.errors import InputError
from portkit.launch.compose import compose_kernels
from tests.user_ops.op_files import sources

PROTOTYPE, TWIN = sources("l2norm")
LAST_LINE = "dx[row * cols + c] = (T)((widen<A>(dy[row * cols + c]) - y * d) * r);"


@pytest.mark.compile
def test_l2norm_in_every_dtype_passes_check(check_op):
    result, rows = check_op("l2norm")
    failed = [r for r in rows if r["status"] == "fail"]
    assert result.exit_code == 0, failed
    ran = {(r["backend"], r["check"]) for r in rows if r["status"] == "pass"}
    assert {("sim", "backward"), ("sim", "gradcheck"), ("twin", "signature")} <= ran
    assert ran & {("twin-cpu", "gradcheck"), ("twin", "gradcheck")}, ran
    # Every dtype ran on a twin, the half types included.
    twin_cases = {r["case"] for r in rows if r["status"] == "pass" and r["check"] == "backward"}
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        assert any(c.startswith(dtype) for c in twin_cases), (dtype, twin_cases)


@pytest.mark.compile
def test_a_twin_with_a_wrong_backward_fails_check(check_op):
    assert LAST_LINE in TWIN
    wrong = TWIN.replace(LAST_LINE, LAST_LINE.replace(" * r);", ");"))
    result, rows = check_op("l2norm", wrong)
    assert result.exit_code == 1
    failed = {(r["backend"], r["check"]) for r in rows if r["status"] == "fail"}
    assert failed & {("twin-cpu", "backward"), ("twin", "backward")}, failed


def test_only_the_launched_combinations_are_instantiated(make_project, load_op):
    from portkit.backends.twin.instances import twin_expressions

    _, op = load_op(make_project({"l2norm": (PROTOTYPE, TWIN)}), "l2norm")
    compute = {"__half": "float", "__nv_bfloat16": "float", "float": "float", "double": "double"}
    expected = {f"{k}<{t}, {a}>" for k in ("l2norm_fwd", "l2norm_bwd") for t, a in compute.items()}
    assert set(twin_expressions(op)) == expected
    assert twin_expressions(op) == twin_expressions(op)  # one order, run after run


@pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")
@pytest.mark.parametrize("checked", [False, True])
def test_a_combination_no_case_launches_is_one_clear_line(make_project, load_op, checked):
    from portkit.backends import create

    config, op = load_op(make_project({"l2norm": (PROTOTYPE, TWIN)}), "l2norm")
    k = compose_kernels(create("twin-cpu", config), op, checked=checked, poison=checked)
    x = torch.ones(2, 4, dtype=torch.float16)
    norm = torch.ones(2, dtype=torch.float16)  # float16 stats: A=__half, never compiled
    message = (
        "twin kernel l2norm_bwd was not compiled with T=__half, A=__half: no case of the "
        "op launches it; add a case with those dtypes"
    )
    with pytest.raises(InputError) as raised:
        k.l2norm_bwd[2, 32](x, norm, x, torch.empty_like(x), 4, 1.0)
    assert str(raised.value) == message


@pytest.mark.compile
def test_the_exported_manifest_lists_the_launched_combinations(make_project, cli, tmp_path):
    root = make_project({"l2norm": (PROTOTYPE, TWIN)})
    out = tmp_path / "out"
    result = cli(root, "export", "l2norm", "--out", str(out), "--arch", "sm_90", "--name", "l2n")
    assert result.exit_code == 0, result.output
    kernels = json.loads((out / "l2n" / "manifest.json").read_text())["ops"]["l2norm"]["kernels"]
    combinations = {"__half, float", "__nv_bfloat16, float", "float, float", "double, double"}
    for name in ("l2norm_fwd", "l2norm_bwd"):
        assert kernels[name]["templates"] == ["T", "A"]
        assert set(kernels[name]["lowered"]) == combinations
        assert all(s.startswith("_Z") for s in kernels[name]["lowered"].values())
        assert set(kernels[name]["resources"]["sm_90"]) == combinations


@pytest.mark.gpu
def test_the_gpu_twin_refuses_a_combination_no_case_launches(make_project, load_op):
    from portkit.backends import create

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    config, op = load_op(make_project({"l2norm": (PROTOTYPE, TWIN)}), "l2norm")
    k = create("twin", config).kernels(op)
    x = torch.ones(2, 4, dtype=torch.float16, device="cuda")
    norm = torch.ones(2, dtype=torch.float16, device="cuda")
    with pytest.raises(InputError, match=r"^twin kernel l2norm_bwd was not compiled with "):
        k.l2norm_bwd[2, 32](x, norm, x, torch.empty_like(x), 4, 1.0)
    stats = torch.ones(2, dtype=torch.float32, device="cuda")
    dx = torch.empty_like(x)
    k.l2norm_bwd[2, 32](x, stats, x, dx, 4, 1.0)  # the compiled <__half, float> runs
    assert torch.isfinite(dx).all()
