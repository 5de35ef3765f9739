"""``portkit bench`` logic on a CPU, with fake timings: statistics, byte counting, the
regression decision, the JSON round trip, the plot, the runner (on the simulator, so
that its checking of every timed output is exercised), the bench cases, and the CLI's
errors. Nothing here measures or asserts a time."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
import torch

from portkit.bench.model import CopyBandwidth, Machine, Measurement, Report
from portkit.bench.regression import (
    FASTER,
    MISSING,
    NEW,
    NOISY,
    REGRESSED,
    SAME,
    WRONG,
    compare_reports,
    judge,
)
from portkit.bench.stats import Summary
from portkit.bench.traffic import declared, default_bytes, tensor_bytes
from portkit.errors import OpDefinitionError, PortkitError
from portkit.results import Outcome

REPO = Path(__file__).resolve().parents[2]


# -- statistics ----------------------------------------------------------------------------


def test_summary_matches_numpy_percentiles():
    import numpy as np

    rng = random.Random(3)
    for n in (1, 2, 5, 30, 101):
        samples = [rng.lognormvariate(3, 0.2) for _ in range(n)]
        s = Summary.of(samples)
        q1, median, q3 = np.percentile(samples, [25, 50, 75])
        assert (s.q1, s.median, s.q3) == pytest.approx((q1, median, q3))
        assert (s.min, s.max, s.n) == (min(samples), max(samples), n)
        assert s.iqr == pytest.approx(q3 - q1)


def test_summary_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="at least one sample"):
        Summary.of([])


# -- bytes and FLOPs -----------------------------------------------------------------------


def test_default_bytes_count_inputs_outputs_and_the_backward_tensors():
    x, y = torch.zeros(10), torch.zeros(10, dtype=torch.float64)
    assert tensor_bytes([x, None, 3, y]) == 40 + 80
    assert default_bytes("forward", (x, x), (x,)) == 120
    # backward: saved + upstream gradients + input gradients (None counts nothing)
    assert default_bytes("backward", (), (), (x,), (x,), (x, None)) == 120


def test_declared_cost_models():
    x = torch.zeros(4, 8)

    def fwd(t):
        return 2 * t.numel()

    assert declared(None, "forward", (x,)) is None
    assert declared(fwd, "forward", (x,)) == 64
    assert declared(fwd, "backward", (x,)) is None  # a plain function is the forward's
    both = {"forward": fwd, "backward": lambda t: 3 * t.numel()}
    assert declared(both, "backward", (x,)) == 96
    with pytest.raises(OpDefinitionError, match="returned -1"):
        declared(lambda t: -1, "forward", (x,), "neg")


def test_op_decorator_validates_bench_bytes_and_flops():
    import portkit

    def forward(k, x):
        return x, ()

    def decorate(**options):
        cases = [portkit.cases.custom("float32-n4", [(4,)])]
        return portkit.op(reference=torch.neg, cases=cases, dtypes=("float32",), **options)(
            type("Neg", (), {"forward": staticmethod(forward)})
        )

    one = portkit.cases.custom("float32-n8", [(8,)])
    definition = decorate(bench=[one], bytes=lambda x: 1, flops={"forward": lambda x: 2})
    spec = definition.__portkit_op__
    assert spec.bench == (one,) and spec.ideal_bytes(None) == 1
    with pytest.raises(OpDefinitionError, match="bench holds"):
        decorate(bench=["float32-n8"])
    with pytest.raises(
        OpDefinitionError,
        match="bench case 'x': input 0 is float64, a dtype the op does not accept",
    ):
        decorate(bench=[portkit.cases.custom("x", [(8,)], "float64")])
    with pytest.raises(OpDefinitionError, match="bench case names repeat"):
        decorate(bench=[one, one])
    with pytest.raises(OpDefinitionError, match=r"bytes= keys \['sideways'\] unknown"):
        decorate(bytes={"sideways": len})
    with pytest.raises(OpDefinitionError, match="flops= takes"):
        decorate(flops=12)


# -- the regression decision ---------------------------------------------------------------


def measurement(median, q1=None, q3=None, status=Outcome.PASS, detail="", impl="twin"):
    time = None
    if median is not None:
        q1 = median if q1 is None else q1
        q3 = median if q3 is None else q3
        time = Summary(median, q1, q3, q1, q3, 30)
    return Measurement(
        "op", "case", ((8,),), "float32", "forward", impl, "twin", time, 10.0, 64,
        status=status, detail=detail,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "status"),
    [
        ((100, 99, 101), (112, 111, 113), REGRESSED),  # 12% slower, spreads apart
        ((100, 90, 110), (112, 105, 120), NOISY),  # 12% slower, inside the spread
        ((100, 99, 101), (108, 107, 109), SAME),  # 8%: under the threshold
        ((100, 99, 101), (80, 79, 81), FASTER),
        ((100, 80, 120), (85, 84, 86), SAME),  # faster, but inside the old spread
    ],
)
def test_judge_needs_threshold_and_spread(old, new, status):
    verdict = judge(measurement(*old), measurement(*new), threshold=0.10)
    assert verdict.status == status
    assert verdict.ratio == pytest.approx(new[0] / old[0])
    assert verdict.failed == (status == REGRESSED)


def test_judge_wrong_new_and_missing():
    assert (
        judge(measurement(100), measurement(None, status=Outcome.FAIL, detail="x"), 0.1).status
        == WRONG
    )
    assert judge(measurement(100), measurement(None, status=Outcome.FAIL, detail="x"), 0.1).failed
    assert judge(None, measurement(100), 0.1).status == NEW
    assert judge(measurement(100), None, 0.1).status == MISSING
    assert not judge(
        measurement(100), measurement(None, status=Outcome.SKIP, detail="no GPU"), 0.1
    ).failed


def report(*measurements, gbps_us=100.0):
    machine = Machine("FakeGPU", 132, 50 << 20, "2026-11-23T00:00:00+00:00", {"torch": "x"})
    return Report(machine, CopyBandwidth(300_000, Summary.of([gbps_us])), 30, 3, measurements)


def test_compare_reports_pairs_by_key_and_rejects_a_bad_threshold():
    old = report(measurement(100, 99, 101), measurement(50, 49, 51, impl="numba"))
    new = report(measurement(130, 129, 131), measurement(50, 49, 51, impl="torch"))
    verdicts = {v.key[3]: v.status for v in compare_reports(old, new, 0.10)}
    assert verdicts == {"twin": REGRESSED, "torch": NEW, "numba": MISSING}
    with pytest.raises(ValueError):
        compare_reports(old, new, 0)


# -- the report: figures and JSON ----------------------------------------------------------


def role_row(impl, role, median):
    """One forward row of op "c" in ``role``, its median ``median`` us."""
    return Measurement(
        "op", "c", ((8,),), "float32", "forward", impl, role,
        Summary.of([median] * 5), 5.0, 3_000_000, 6_000_000,
    )  # fmt: skip


def roles_report():
    m = role_row
    return report(
        m("torch", "reference", 1.0), m("numba", "prototype", 4.0), m("twin", "twin", 2.0)
    )


def test_figures_against_copy_torch_and_prototype():
    r = roles_report()
    twin = r.find("op", "c", "forward", "twin")
    f = r.figures(twin)
    assert f["gbps"] == pytest.approx(3_000_000 / 2e-6 / 1e9)  # 1500 GB/s
    assert r.copy.gbps == pytest.approx(3.0)  # 300 kB in 100 us
    assert f["copy"] == pytest.approx(500.0)
    assert f["x_torch"] == pytest.approx(0.5) and f["x_proto"] == pytest.approx(2.0)
    assert f["tflops"] == pytest.approx(6_000_000 / 2e-6 / 1e12)
    assert r.figures(r.find("op", "c", "forward", "numba"))["x_proto"] is None


def test_json_save_load_round_trip(tmp_path):
    r = roles_report()
    data = r.to_dict()
    assert data["best_torch_untimed"] == ["baseline", "compiled"]  # the table's note, as data
    assert Report.from_dict(json.loads(json.dumps(data))) == r
    path = tmp_path / "base.json"
    r.save(path)
    assert Report.load(path) == r
    assert [p.name for p in tmp_path.iterdir()] == ["base.json"]  # no temporary left


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "is not JSON"),
        ('{"schema": "other"}', "not a portkit bench report"),
        ('{"schema": "portkit-bench/1", "machine": {}}', "damaged portkit bench report"),
    ],
)
def test_damaged_reports_are_user_errors(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PortkitError, match=message):
        Report.load(path)
    with pytest.raises(PortkitError, match="cannot read bench report"):
        Report.load(tmp_path / "missing.json")


def test_plot_writes_a_png_and_nothing_else(tmp_path):
    from portkit.bench.plot import write_plot

    r = roles_report()
    wrong = measurement(None, status=Outcome.FAIL, detail="timed call 1: output 0 differs")
    r = report(*r.measurements, wrong)
    path = tmp_path / "bench.png"
    write_plot(r, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["bench.png"]
    # torch here runs at 1000x copy bandwidth: the image stays a page wide, not as wide
    # as a bar of 100,000% would need (it was 700,000 pixels, 14 s to encode)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width < 2500 and height < 2500, (width, height)


def test_results_table_shows_every_measurement():
    from rich.console import Console

    from portkit.bench.table import results_table

    console = Console(width=250, record=True)
    console.print(results_table(roles_report()))
    text = console.export_text()
    assert "FakeGPU" in text and text.count(" op ") >= 3
    assert "0.50" in text and "2.00" in text  # x torch of the twin, x proto
    # x best here is the reference's alone: the table says what best torch left out
    flat = " ".join(text.split())
    left_out = "no row of it timed in this run: the op's baseline=, torch.compile"
    assert f"NOT in best torch, {left_out}" in flat


def test_results_table_says_nothing_is_left_out_when_every_torch_row_ran():
    from rich.console import Console

    from portkit.bench.model import BASELINE, COMPILED
    from portkit.bench.table import results_table

    m = role_row
    full = report(
        m("torch", "reference", 3.0), m("baseline", BASELINE, 1.5),
        m("torch.compile", COMPILED, 1.0), m("twin", "twin", 2.0),
    )  # fmt: skip
    console = Console(width=250, record=True)
    console.print(results_table(full))
    assert "NOT in best torch" not in console.export_text()


# -- the runner, on the simulator with a fake clock ----------------------------------------


class FakeClock:
    """Every mark is 10 us after the previous; the runner needs nothing else."""

    cover_us = 0.0

    def __init__(self):
        self.ticks = itertools.count()
        self.prepared = 0

    def prepare(self, spin=True):
        self.prepared += 1

    def mark(self):
        return next(self.ticks) * 10.0

    def elapsed_us(self, start, end):
        return end - start

    def covers(self, host_us):
        return True


def run_sim_bench(make_project, load_op, sources, name, body, reps=4, **options):
    from portkit.backends import create
    from portkit.bench.runner import Bench
    from portkit.project.cases import Case

    options.setdefault("backward", "dx[i] = dy[i] * 2.0")
    prototype = sources.unary_op(name, body, **options)
    root = make_project({name: (prototype, None)})
    config, op = load_op(root, name)
    clock = FakeClock()
    backends = [create("torch", config), create("sim", config)]
    twin = create("twin", config)
    if twin.unavailable_reason:  # on a GPU machine the twin would run on another device
        backends.append(twin)
    result = Bench(clock, reps=reps, warmup=1).run_op(op, [Case("n40", ((40,),))], backends)
    return result, clock


def test_runner_times_every_implementation_and_direction(make_project, load_op, sources):
    result, clock = run_sim_bench(make_project, load_op, sources, "bench_ok", "out[i] = x[i] * 2.0")
    rows = {(m.direction, m.implementation): m for m in result}
    impls = {"torch", "sim", "twin"} if "twin" in {m.implementation for m in result} else None
    assert set(rows) == {(d, i) for d in ("forward", "backward") for i in impls or ("torch", "sim")}
    for direction in ("forward", "backward"):
        for impl in ("torch", "sim"):
            m = rows[(direction, impl)]
            assert m.status is Outcome.PASS and m.time is not None and m.time.n == 4, m
            # forward: x in, out; backward: saved x, upstream dy, dx (40 float32 each)
            assert m.bytes == (320 if direction == "forward" else 480), m
        if impls:  # no GPU here: the twin is reported as skipped, with the reason
            twin = rows[(direction, "twin")]
            assert twin.status is Outcome.SKIP and twin.detail.startswith("no CUDA GPU")
    # every timed call was prepared (L2 flush and spin): 4 reps x 2 impls x 2 directions
    assert clock.prepared == 16


def test_runner_fails_a_kernel_that_writes_half_its_output(make_project, load_op, sources):
    result, _ = run_sim_bench(
        make_project, load_op, sources, "bench_half", "out[i] = x[i] * 2.0", reps=3
    )
    # the same op with a kernel that leaves the upper half unwritten (poisoned NaN)
    bad, _ = run_sim_bench(
        make_project,
        load_op,
        sources,
        "bench_half_bad",
        "if i < n // 2:\n    out[i] = x[i] * 2.0",
    )
    sim = next(m for m in bad if m.implementation == "sim" and m.direction == "forward")
    assert sim.status is Outcome.FAIL and "20 of 40 elements differ" in sim.detail
    assert sim.time is None
    assert all(m.status is Outcome.PASS for m in result if m.implementation != "twin")


def test_torch_is_checked_against_itself_where_the_reference_is_wider(
    make_project, load_op, sources
):
    """reference_in="float64": the kernel is judged against float64, torch's own float32
    row (which rounds on its own: x + 1e8 - 1e8 loses x in float32) against torch."""
    result, _ = run_sim_bench(
        make_project,
        load_op,
        sources,
        "bench_wide",
        "out[i] = x[i]",
        reference="lambda x: x + 1e8 - 1e8",
        backward="dx[i] = dy[i]",
        op_options='reference_in="float64"',
    )
    rows = {(m.direction, m.implementation): m.status.value for m in result}
    for direction in ("forward", "backward"):
        assert rows[(direction, "torch")] == "pass", rows
        assert rows[(direction, "sim")] == "pass", rows
    # Without reference_in the kernel is judged as `portkit check` judges it: against the
    # reference in float64 within twice torch's own float32 error (here all of x): it
    # passes, where the float32 reference alone called it wrong (tests/user_ops/
    # test_diff_bench_control.py: bench and check agree both ways)
    narrow, _ = run_sim_bench(
        make_project,
        load_op,
        sources,
        "bench_narrow",
        "out[i] = x[i]",
        reference="lambda x: x + 1e8 - 1e8",
        backward="dx[i] = dy[i]",
    )
    sim = next(m for m in narrow if m.implementation == "sim" and m.direction == "forward")
    assert sim.status is Outcome.PASS, sim


# -- bench cases ---------------------------------------------------------------------------


def test_bench_cases_default_to_gpu_only_then_largest(make_project, load_op, sources):
    from portkit.bench.cases import bench_cases
    from portkit.bench.scaling import AUTO_BYTES, case_bytes, case_origin

    _, sigmoid = load_op(REPO, "sigmoid")
    assert [c.name for c in bench_cases(sigmoid)] == ["float32-n67108864"]
    root = make_project({"bench_cases_a": (sources.unary_op("bench_cases_a"), None)})
    _, op = load_op(root, "bench_cases_a")
    # no GPU-only case: the largest, its length doubled until it is 256 MiB
    (scaled,) = bench_cases(op)
    assert (scaled.name, scaled.shapes, case_origin(scaled)) == (
        "float32-n67633152",
        ((129 << 19,),),
        "float32-n129",
    )
    assert case_bytes(scaled) >= AUTO_BYTES > case_bytes(scaled) // 2
    assert [c.name for c in bench_cases(op, ["float32-n1"])] == ["float32-n1"]
    with pytest.raises(
        PortkitError, match="has no case .float32-n7.; bench cases: float32-n67633152"
    ):
        bench_cases(op, ["float32-n7"])


# -- the command ---------------------------------------------------------------------------


def test_matmul_is_timed_with_edge_tiles_and_full_tiles_in_flops(load_op):
    from portkit.bench.cases import bench_cases

    _, matmul = load_op(REPO, "matmul")
    # 1000 = 7 * 128 + 104 leaves edge tiles; 4096 fills every tile of the twin
    names = [c.name for c in bench_cases(matmul)]
    assert names == ["float32-1000x1000x1000", "float32-4096x4096x4096"]
    a, b = torch.zeros(3, 5), torch.zeros(5, 7)
    flops = matmul.definition.ideal_flops
    assert declared(flops, "forward", (a, b)) == 2 * 3 * 5 * 7
    assert declared(flops, "backward", (a, b)) == 4 * 3 * 5 * 7  # two products of that size


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name one or more OPs, or pass --all"),
        (("sigmoid", "--all"), "name one or more OPs, or pass --all"),
        (("sigmoid", "--impl", "sim"), "'sim' is not timed"),
        (("sigmoid", "--reps", "2"), "2 is not in the range x>=5"),
        (("sigmoid", "--threshold", "0"), "0.0 is not in the range"),
        (("sigmoid", "--plot", "chart.svg"), "must end in .png"),
        (("sigmoid", "--save", "no/such/folder/b.json"), "does not exist"),
        (("sigmoid", "--direction", "up"), "'up' is not one of"),
        (("no_such_op",), "no_such_op"),
        (("sigmoid", "softmax", "--case", "float32-4096x4096"), "name exactly one OP"),
        (("sigmoid", "--case", "float32-n3"), "has no case 'float32-n3'"),
        (("sigmoid", "--compare", "missing.json"), "cannot read bench report"),
    ],
)
def test_bad_options_are_one_line_errors(cli, args, message):
    result = cli(REPO, "bench", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_is_one_line_and_exit_2(cli):
    result = cli(REPO, "bench", "sigmoid")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "error: portkit bench needs an NVIDIA GPU: no CUDA GPU visible to PyTorch on this machine"
    ]


def test_help_teaches_with_examples(cli):
    result = cli(REPO, "bench", "--help")
    assert result.exit_code == 0
    assert "portkit bench --all --compare baseline.json" in result.output


def test_runner_refuses_implementations_on_two_devices(load_op, monkeypatch):
    from portkit.backends import create
    from portkit.bench.runner import Bench
    from portkit.project.cases import Case

    config, op = load_op(REPO, "sigmoid")
    twin = create("twin", config)
    monkeypatch.setattr(type(twin), "unavailable_reason", None)
    with pytest.raises(PortkitError, match=r"one device, got sim \(cpu\), twin \(cuda\)"):
        Bench(FakeClock(), reps=5).run_case(op, Case("n8", ((8,),)), [create("sim", config), twin])
