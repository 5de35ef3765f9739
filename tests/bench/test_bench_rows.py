"""What a bench row says and what the command does with it, on a CPU: the status and its
detail, the exit rule (fake rows handed to the CLI in place of a GPU run), the
latency-bound label, % of peak FLOP/s, and torch.compile's row with a fake compiler on
the simulator. Nothing here measures or asserts a time."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from portkit.bench.model import COMPILED, LATENCY_BOUND_US, Report
from portkit.bench.peaks import peak_tflops
from portkit.bench.stats import Summary
from portkit.results import Outcome
from tests.bench.test_bench import FakeClock, report, roles_report

REPO = Path(__file__).resolve().parents[2]


def rows_of(base: Report, **changes):
    """``base``'s rows with ``changes`` ({implementation: fields}) applied."""
    rows = []
    for m in base.measurements:
        rows.append(replace(m, **changes.get(m.implementation, {})))
    return report(*rows)


def compiled_row(**fields):
    base = roles_report().find("op", "c", "forward", "torch")
    return replace(base, implementation="torch.compile", role=COMPILED, **fields)


# -- status, detail, JSON ------------------------------------------------------------------


def test_a_report_of_the_first_schema_reads_its_check_strings():
    data = roles_report().to_dict()
    data["schema"] = "portkit-bench/1"
    checks = {"torch": "ok", "numba": "skip: no CUDA GPU", "twin": "wrong: timed call 2: x"}
    for row in data["results"]:
        del row["status"], row["detail"], row["scaled_from"]
        row["check"] = checks[row["implementation"]]
    got = {m.implementation: (m.status, m.detail) for m in Report.from_dict(data).measurements}
    assert got == {
        "torch": (Outcome.PASS, ""),
        "numba": (Outcome.SKIP, "no CUDA GPU"),
        "twin": (Outcome.FAIL, "timed call 2: x"),
    }


def test_a_report_of_the_second_schema_reads_its_status_words():
    """portkit-bench/2 wrote bench's own words; they read back as the one Outcome."""
    data = json.loads(json.dumps(roles_report().to_dict()))
    data["schema"] = "portkit-bench/2"
    words = {"torch": "ok", "numba": "skipped", "twin": "wrong"}
    for row in data["results"]:
        row["status"] = words[row["implementation"]]
    got = {m.implementation: m.status for m in Report.from_dict(data).measurements}
    assert got == {"torch": Outcome.PASS, "numba": Outcome.SKIP, "twin": Outcome.FAIL}
    assert all(type(status) is Outcome for status in got.values())


def test_status_detail_and_origin_survive_json():
    r = rows_of(
        roles_report(),
        twin={"status": Outcome.ERROR, "detail": "NVRTC: no", "time": None},
        numba={"scaled_from": "float32-64x1000"},
    )
    data = json.loads(json.dumps(r.to_dict()))
    assert Report.from_dict(data) == r
    twin = next(row for row in data["results"] if row["implementation"] == "twin")
    assert (twin["status"], twin["detail"]) == ("error", "NVRTC: no")


@pytest.mark.parametrize(
    ("status", "role", "failed"),
    [
        (Outcome.PASS, "twin", False),
        (Outcome.SKIP, "twin", False),
        (Outcome.FAIL, "twin", True),
        (Outcome.ERROR, "prototype", True),
        (Outcome.FAIL, "reference", True),
        (Outcome.ERROR, COMPILED, False),  # torch.compile is a comparison, not the op
        (Outcome.FAIL, COMPILED, False),
    ],
)
def test_which_rows_fail_the_run(status, role, failed):
    m = replace(roles_report().measurements[0], status=status, role=role)
    assert m.failed == failed
    assert (m in report(m).failures) == failed


def test_latency_bound_below_the_named_threshold():
    m = roles_report().measurements[0]
    below = replace(m, time=Summary.of([LATENCY_BOUND_US * 0.99] * 3))
    above = replace(m, time=Summary.of([LATENCY_BOUND_US] * 3))
    assert below.latency_bound and not above.latency_bound
    assert not replace(m, time=None).latency_bound
    assert report(below).figures(below)["latency_bound"]


def test_peak_flops_by_gpu_name_and_dtype():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "float32") == 67.0
    assert peak_tflops("NVIDIA H100 PCIe", "bfloat16") == 756.0
    assert peak_tflops("NVIDIA H200", "float16") == 989.4
    assert peak_tflops("NVIDIA H100 80GB HBM3", "int32") is None
    assert peak_tflops("NVIDIA A10G", "float32") is None
    r = roles_report()  # FakeGPU: no peak
    twin = r.find("op", "c", "forward", "twin")
    assert r.figures(twin)["peak"] is None
    h100 = Report(replace(r.machine, gpu="NVIDIA H100 80GB HBM3"), r.copy, 30, 3, r.measurements)
    f = h100.figures(twin)
    assert f["peak"] == pytest.approx(f["tflops"] / 67.0)


# -- the command's exit code, with fake rows -----------------------------------------------


def bench_with_rows(cli, monkeypatch, fake: Report, *args: str):
    from portkit.bench import session

    monkeypatch.setattr(session, "require_gpu", lambda: None)
    monkeypatch.setattr(session, "run_bench", lambda *a, **k: fake)
    return cli(REPO, "bench", "sigmoid", *args)


def test_skips_events_latency_and_a_failed_compile_exit_0(cli, monkeypatch):
    from portkit.bench.timing import EVENTS

    fake = rows_of(
        roles_report(),
        numba={"status": Outcome.SKIP, "detail": "no CUDA GPU", "time": None},
        torch={"timing": EVENTS, "scaled_from": "float32-64x1000"},
    )
    failed_compile = compiled_row(status=Outcome.ERROR, detail="torch.compile failed: X", time=None)
    fake = report(*fake.measurements, failed_compile)
    result = bench_with_rows(cli, monkeypatch, fake)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "skip: no CUDA GPU" in text and "torch.compile failed: X" in text
    assert "scaled from float32-64x1000" in text and "latency-bound" in text
    assert "host included" in text and "FAIL" not in text


@pytest.mark.parametrize("status", [Outcome.FAIL, Outcome.ERROR])
def test_a_wrong_or_failed_twin_exits_1(cli, monkeypatch, status):
    fake = rows_of(roles_report(), twin={"status": status, "detail": "output 0 differs"})
    result = bench_with_rows(cli, monkeypatch, fake)
    assert result.exit_code == 1, result.output
    assert f"FAIL op / twin / forward / c: {status.value}: output 0 differs" in " ".join(
        result.output.split()
    )


def test_json_carries_status_and_the_exit_rule_holds(cli, monkeypatch):
    fake = rows_of(roles_report(), twin={"status": Outcome.FAIL, "detail": "d", "time": None})
    result = bench_with_rows(cli, monkeypatch, fake, "--json")
    assert result.exit_code == 1
    rows = {r["implementation"]: r for r in json.loads(result.stdout)["results"]}
    assert (rows["twin"]["status"], rows["twin"]["detail"]) == ("fail", "d")
    assert rows["torch"]["latency_bound"] is True and rows["twin"]["latency_bound"] is False


# -- torch.compile's row, on the simulator with a fake compiler ----------------------------


def run_with_compiler(make_project, load_op, sources, name, compiler):
    from portkit.backends import create
    from portkit.bench.runner import Bench
    from portkit.bench.tasks import CompiledReference
    from portkit.project.cases import Case

    prototype = sources.unary_op(name, "out[i] = x[i] * 2.0", backward="dx[i] = dy[i] * 2.0")
    config, op = load_op(make_project({name: (prototype, None)}), name)
    backends = [create("torch", config), CompiledReference(compiler), create("sim", config)]
    rows = Bench(FakeClock(), reps=3, warmup=1).run_op(op, [Case("n40", ((40,),))], backends)
    return {(m.direction, m.implementation): m for m in rows}


def test_a_compile_that_fails_is_a_row_saying_so(make_project, load_op, sources):
    def compiler(function):
        def compiled(*args):
            raise RuntimeError("inductor needs a C++ compiler\nand more lines")

        return compiled

    rows = run_with_compiler(make_project, load_op, sources, "bench_compile_fails", compiler)
    for direction in ("forward", "backward"):
        m = rows[(direction, "torch.compile")]
        assert m.status is Outcome.ERROR and m.time is None and not m.failed, m
        assert m.detail.startswith("torch.compile failed: RuntimeError: inductor needs a C++")
        assert "more lines" not in m.detail
        for impl in ("torch", "sim"):
            assert rows[(direction, impl)].status is Outcome.PASS, rows[(direction, impl)]


def test_a_compiled_reference_is_timed_and_checked(make_project, load_op, sources):
    compiled = []

    def compiler(function):
        compiled.append(function)
        return function

    rows = run_with_compiler(make_project, load_op, sources, "bench_compile_ok", compiler)
    assert len(compiled) == 1  # once per op, for both directions
    for direction in ("forward", "backward"):
        m = rows[(direction, "torch.compile")]
        assert m.status is Outcome.PASS and m.time is not None and m.time.n == 3, m
    wrong = run_with_compiler(
        make_project, load_op, sources, "bench_compile_wrong", lambda f: lambda x: f(x) * 3
    )
    m = wrong[("forward", "torch.compile")]
    assert m.status is Outcome.FAIL and not m.failed, m


def test_a_timed_call_is_verified_with_the_ops_declared_tolerance() -> None:
    """Bench allows what `portkit check` allows: with a wider tolerance declared for the
    weight gradient at 16384x4096 (as add_rmsnorm did before the measured control
    covered it), an error the dtype table would refuse there passes, and the same error
    in another case does not."""
    from dataclasses import replace

    import torch

    import portkit
    from portkit.bench.tasks import tolerances_of, verify
    from portkit.project.session import Session

    op = Session.from_environment().op("add_rmsnorm")
    declared_w = portkit.Tolerance(
        rtol=1e-5,
        atol=5e-4,
        grad=True,
        output="w",
        case="float32-16384x4096",
        reason="16384 rows summed",
    )
    op = replace(op, definition=replace(op.definition, tolerances=(declared_w,)))
    big = next(c for c in op.definition.bench if c.name == "float32-16384x4096")
    small = next(c for c in op.definition.cases if c.dtype == "float32")
    expected = [torch.zeros(4), torch.zeros(4), torch.ones(8)]
    actual = [torch.zeros(4), torch.zeros(4), torch.ones(8) + 3e-4]
    declared = tolerances_of(op, big, "backward", expected)
    assert verify(actual, expected, declared, "backward output") is None
    table = tolerances_of(op, small, "backward", expected)
    problem = verify(actual, expected, table, "backward output")
    assert problem is not None and "backward output 2" in problem


def test_torch_compile_s_row_keeps_the_saved_buffers_its_repeated_backward_needs() -> None:
    """The bench repeats a backward on one graph; donated buffers would refuse that."""
    import torch._functorch.config as functorch_config

    from portkit.bench.tasks import CompiledReference

    # torch's own patch, not monkeypatch: pytest's undo deletes a name missing from the
    # module's __dict__, and deleting a torch config entry hides it for the process.
    op = SimpleNamespace(name="scaled", definition=SimpleNamespace(reference=lambda x: x * 2))
    with functorch_config.patch(donated_buffer=True):
        CompiledReference().function(op)
        assert functorch_config.donated_buffer is False


def test_torch_compile_s_row_compiles_each_shape_static(monkeypatch) -> None:
    """Each bench case is one shape: torch.compile must specialise on it, not recompile
    the second shape with symbolic sizes (slower kernels than a user compiling for that
    shape would get)."""
    import torch

    from portkit.bench.tasks import CompiledReference

    seen = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: seen.append(kw) or fn)
    op = SimpleNamespace(name="scaled", definition=SimpleNamespace(reference=lambda x: x * 2))
    assert CompiledReference().function(op)(3) == 6
    assert seen == [{"dynamic": False}]


def test_torch_compile_s_row_compiles_every_bench_shape_not_eager_past_eight() -> None:
    """Dynamo keeps 8 compiled entries a function and then runs it eagerly with only a
    warning: softmax's fifth bench shape (each shape with and without grad) was timed
    eager as "torch.compile". Every shape must reach the compiler."""
    import torch
    import torch._dynamo.config as dynamo_config

    from portkit.bench.tasks import CompiledReference

    compiled_shapes = []

    def recording_backend(graph, inputs):
        compiled_shapes.append(tuple(inputs[0].shape))
        return graph.forward

    real_compile = torch.compile
    op = SimpleNamespace(name="scaled", definition=SimpleNamespace(reference=lambda x: x * 2))
    with dynamo_config.patch(recompile_limit=8, fail_on_recompile_limit_hit=False):
        try:
            torch.compile = lambda fn, **kw: real_compile(fn, backend=recording_backend, **kw)
            function = CompiledReference().function(op)
            for n in range(1, 13):
                assert torch.equal(function(torch.ones(n)), torch.full((n,), 2.0))
        finally:
            torch.compile = real_compile
            torch._dynamo.reset()
    assert compiled_shapes == [(n,) for n in range(1, 13)]
