"""``portkit bench`` and the fast twins on a real GPU (skipped without one). No timing is
asserted: these check that the benchmark runs, checks what it times, and catches a
kernel that is fast because it is wrong; and that the twins' scalar path (a tensor
that is not 16-byte aligned) computes what the vector path does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to PyTorch"),
]


@pytest.mark.parametrize("name", ["sigmoid", "vector_add", "elementwise_mul"])
def test_twin_elementwise_on_views_not_16_byte_aligned(name, load_op):
    from portkit.backends import create
    from portkit.launch.compose import compose_kernels
    from portkit.launch.op_inputs import as_tuple
    from portkit.torch_op.load import registered_callable

    config, op = load_op(REPO, name)
    kernels = compose_kernels(create("twin", config), op, poison=True)
    f = registered_callable(op, kernels, config.namespace, define_now=False)
    inputs = op.definition.cases[0].shapes
    n = 1003
    tensors = [torch.randn(n + 1, device="cuda")[1:] for _ in inputs]  # offset 4 bytes
    assert all(t.data_ptr() % 16 for t in tensors)
    got = as_tuple(f(*tensors))
    want = as_tuple(op.definition.reference(*tensors))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("name", ["softmax", "softmax_warp"])
def test_twin_softmax_rows_not_16_byte_aligned(name, load_op):
    from portkit.backends import create
    from portkit.launch.compose import compose_kernels
    from portkit.torch_op.load import registered_callable

    config, op = load_op(REPO, name)
    kernels = compose_kernels(create("twin", config), op, poison=True)
    f = registered_callable(op, kernels, config.namespace, define_now=False)
    x = torch.randn(5 * 1029 + 1, device="cuda")[1:].view(5, 1029).requires_grad_()
    y = f(x)
    torch.testing.assert_close(y, torch.softmax(x, -1))
    dy = torch.randn_like(y)
    (dx,) = torch.autograd.grad(y, x, dy)
    (want,) = torch.autograd.grad(torch.softmax(x, -1), x, dy)
    torch.testing.assert_close(dx, want)


def test_bench_cli_json_save_compare_plot(cli, tmp_path):
    saved, plot = tmp_path / "base.json", tmp_path / "bench.png"
    args = ("bench", "sigmoid", "--reps", "5", "--warmup", "1")
    first = cli(REPO, *args, "--save", str(saved), "--plot", str(plot))
    assert first.exit_code == 0, first.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads(saved.read_text())
    rows = report["results"]
    impls = {"torch", "baseline", "torch.compile", "numba", "twin"}
    assert {r["implementation"] for r in rows} == impls
    assert all(r["status"] == "pass" and r["time_us"]["median"] > 0 for r in rows), rows
    # the twin against the fastest torch row, named (sigmoid's baseline: torch.sigmoid)
    for r in rows:
        assert r["best_torch"] in ("baseline", "reference", "compiled"), r
        assert r["x_best"] > 0 and r["x_best"] <= r["x_torch"] + 1e-9, r
    assert report["copy"]["gbps"] > 100
    again = cli(REPO, *args, "--compare", str(saved), "--json", "--threshold", "5")
    assert again.exit_code == 0, again.output
    statuses = {v["status"] for v in json.loads(again.stdout)["comparison"]}
    assert statuses <= {"same", "within noise", "faster"}


def test_bench_times_a_torch_call_that_waits_for_the_gpu(cli):
    """histogram's torch reference indexes by a mask, which reads a size back to the
    host: no spin covers such a call. It is timed with plain events, not failed."""
    args = ("bench", "histogram", "--reps", "5", "--warmup", "1", "--json")
    result = cli(REPO, *args, "--impl", "torch", "--direction", "forward")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["results"]
    assert (row["status"], row["timing"]) == ("pass", "events"), row
    assert row["time_us"]["median"] > 0


WRITES_HALF = """\
template <typename T>
__global__ void {name}_fwd(const T* __restrict__ x, T* __restrict__ out, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 2) out[i] = x[i] * T(2);
}}
"""


def test_bench_fails_a_fast_twin_that_writes_half_the_output(make_project, cli, sources):
    name = "bench_half"
    prototype = sources.unary_op(
        name, cases="[portkit.cases.custom('float32-n1048576', [(1 << 20,)])]"
    )
    root = make_project({name: (prototype, WRITES_HALF.format(name=name))})
    result = cli(root, "bench", name, "--reps", "5", "--impl", "torch", "--impl", "twin")
    assert result.exit_code == 1, result.output
    assert "FAIL bench_half / twin / forward" in " ".join(result.output.split())


def test_bench_times_a_user_op_with_an_int64_input_at_a_gpu_size(make_project, cli):
    """The cross entropy written from the docs (int64 targets, no bench cases): timed at
    its largest case grown to 256 MiB, the targets following the rows, every
    implementation's output checked, the float input's gradient alone."""
    from tests.user_ops.op_files import sources

    name = "cross_entropy"
    root = make_project({name: sources(name)})
    result = cli(root, "bench", name, "--reps", "5", "--warmup", "2", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    assert {(r["direction"], r["implementation"]) for r in rows} == {
        (d, i)
        for d in ("forward", "backward")
        for i in ("torch", "baseline", "torch.compile", "numba", "twin")
    }
    # no baseline= declared: a skipped row that says so, not a failure
    for r in [r for r in rows if r["implementation"] == "baseline"]:
        assert r["status"] == "skip" and "declares no baseline=" in r["detail"], r
    for r in [r for r in rows if r["implementation"] != "baseline"]:
        assert r["status"] == "pass" and r["time_us"]["median"] > 0, r
        assert r["scaled_from"] == "rows5x129", r
        (rows_, cols), (targets,) = r["shapes"]
        assert cols == 129 and targets == rows_ and rows_ * cols * 4 >= 256 << 20, r
    shaped = cli(root, "bench", name, "--shape", "4096x32000", "--reps", "5", "--json",
                 "--impl", "torch", "--impl", "twin")  # fmt: skip
    assert shaped.exit_code == 0, shaped.output
    assert {tuple(map(tuple, r["shapes"])) for r in json.loads(shaped.stdout)["results"]} == {
        ((4096, 32000), (4096,))
    }


def test_bench_all_exits_0_on_the_projects_ops(cli, tmp_path):
    """Every op of the project benches: rows that are not failures (a call timed with
    plain events, a latency-bound row, a torch.compile that fails) do not fail the run.
    Every example op's baseline= agrees with its reference at the bench shapes."""
    saved = tmp_path / "all.json"
    quick = ("--reps", "5", "--warmup", "1", "--impl", "torch", "--impl", "baseline")
    quick += ("--impl", "twin")
    result = cli(REPO, "bench", "--all", *quick, "--save", str(saved))
    assert result.exit_code == 0, result.output
    rows = json.loads(saved.read_text())["results"]
    failed = [r for r in rows if r["status"] in ("fail", "error") and r["role"] != "compiled"]
    assert not failed, failed
    baselines = [r for r in rows if r["implementation"] == "baseline"]
    assert baselines and all(r["status"] == "pass" for r in baselines), baselines
    assert all(r["teaching"] for r in rows if r["op"] == "matmul")


FLOPS_OP = """\
import torch
from numba import cuda

import portkit


@cuda.jit
def {name}_fwd(a, b, out, n, k):
    i, j = cuda.grid(2)
    if i < n and j < n:
        acc = 0.0
        for t in range(k):
            acc += a[i, t] * b[t, j]
        out[i, j] = acc


@portkit.op(
    reference=torch.matmul,
    cases=[portkit.cases.custom("small", [(8, 16), (16, 8)])],
    bench=[portkit.cases.custom("float32-512", [(512, 512), (512, 512)])],
    same_shape=False,
    reference_in="float64",  # the kernel sums in float64; torch's row is checked against torch
    flops=lambda a, b: 2 * a.shape[0] * a.shape[1] * b.shape[1],
)
class FlopsOp:
    def forward(k, a, b):
        n, depth = a.shape
        out = k.empty((n, n), a.dtype)
        k.{name}_fwd[(portkit.cdiv(n, 16), portkit.cdiv(n, 16)), (16, 16)](a, b, out, n, depth)
        return out, ()
"""


def test_bench_reports_percent_of_peak_flops_for_an_op_that_declares_flops(
    make_project, cli, monkeypatch
):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)  # float32 arithmetic
    name = "bench_flops"
    root = make_project({name: (FLOPS_OP.format(name=name), None)})
    result = cli(root, "bench", name, "--reps", "5", "--impl", "torch", "--impl", "numba",
                 "--direction", "forward", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for r in report["results"]:
        assert r["status"] == "pass" and r["flops"] == 2 * 512**3, r
        assert r["tflops"] > 0
        if any(g in report["machine"]["gpu"] for g in ("H100", "H200")):
            assert 0 < r["peak"] < 1.2, r  # above 100% of a datasheet peak: a harness bug
