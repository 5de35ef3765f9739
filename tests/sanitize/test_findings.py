"""The compute-sanitizer log parser, on sample logs of each tool (CPU).

``logs/*.log`` are written in the formats compute-sanitizer prints (new and old location
styles, racecheck's hazard and analysis reports); ``logs/gpu-*.log`` were captured on
the H100 machine by the sanitizer run (now `scripts/gpu.sh sanitizer`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.sanitize.findings import attribute, error_summary, kernel_name, parse_log

LOGS = Path(__file__).resolve().parent / "logs"
KERNELS = {
    "wt_vector_add_bound_off_by_one": ["vector_add"],
    "vector_add": ["vector_add"],
    "wt_softmax_missing_syncthreads": ["softmax_bwd", "softmax_fwd"],
    "softmax": ["softmax_bwd", "softmax_fwd"],
    "wt_sigmoid_accumulates_gradient": ["sigmoid_bwd", "sigmoid_fwd"],
    "wt_softmax_barrier_skipped_past_width": ["softmax_bwd", "softmax_fwd"],
    "exp_divergent_alive": ["softmax_bwd", "softmax_fwd"],
}


def parsed(name: str, tool: str):
    return attribute(parse_log((LOGS / name).read_text(), tool), KERNELS)


def test_memcheck_twin_write_past_the_end():
    twin, proto = parsed("memcheck_new.log", "memcheck")
    assert (twin.kind, twin.size) == ("Invalid __global__ write", 4)
    assert (twin.op, twin.implementation, twin.kernel) == (
        "wt_vector_add_bound_off_by_one",
        "twin",
        "vector_add",
    )
    assert twin.where == "cuda_src/wt_vector_add_bound_off_by_one.cu:9"
    assert (twin.block, twin.thread) == ("(0,0,0)", "(1,0,0)")
    # numba's mangled name and the prototype's .py line (compiled with lineinfo)
    assert (proto.kind, proto.implementation, proto.kernel) == (
        "Invalid __global__ read",
        "numba",
        "vector_add",
    )
    assert proto.op == "vector_add" and proto.where.endswith("prototypes/vector_add.py:14")
    assert proto.thread == "(129,0,0)"


def test_memcheck_old_location_style():
    (finding,) = parsed("memcheck_old.log", "memcheck")
    assert finding.where == "/work/examples/vector_add.cu:14"
    assert finding.kernel == "vector_add" and finding.op == "vector_add"
    assert (finding.thread, finding.block, finding.size) == ("(1,0,0)", "(0,0,0)", 4)


def test_racecheck_hazards_name_both_threads_and_lines():
    raw, war = parsed("racecheck_hazard.log", "racecheck")
    assert raw.kind == "RAW hazard (write)" and raw.block == "(2,0,0)"
    assert raw.thread == "(2,0,0)" and raw.line == 24
    assert raw.other == "Read thread (0,0,0) at cuda_src/wt_softmax_missing_syncthreads.cu:26"
    assert (raw.op, raw.implementation, raw.kernel) == (
        "wt_softmax_missing_syncthreads",
        "twin",
        "softmax_fwd",
    )
    # a device function: the file names the op
    assert war.kernel == "block_reduce" and war.op == "softmax" and war.thread == "(31,0,0)"


def test_racecheck_analysis_report():
    (race,) = parsed("racecheck_analysis.log", "racecheck")
    assert race.kind == "Race reported: Write-Read"
    assert race.where == "cuda_src/softmax.cu:24" and race.kernel == "softmax_fwd"
    assert race.other == "Read at cuda_src/softmax.cu:26"


def test_initcheck_keeps_torch_kernels_apart():
    ours, torchs = parsed("initcheck.log", "initcheck")
    assert ours.kind == "Uninitialized __global__ read" and ours.size == 4
    assert (ours.op, ours.kernel, ours.line, ours.thread) == (
        "wt_sigmoid_accumulates_gradient",
        "sigmoid_bwd",
        20,
        "(3,0,0)",
    )
    assert torchs.op == "" and torchs.implementation == ""
    assert torchs.kernel == "vectorized_elementwise_kernel" and torchs.file == ""


def test_synccheck_divergent_barrier():
    block, warp = parsed("synccheck.log", "synccheck")
    assert block.kind == "Barrier error detected. Divergent thread(s) in block"
    assert (block.op, block.kernel, block.block, block.thread) == (
        "wt_softmax_barrier_skipped_past_width",
        "softmax_fwd",
        "(1,0,0)",
        "(100,0,0)",
    )
    assert warp.kind.endswith("in warp") and warp.kernel == "myKernel" and warp.op == ""


def test_clean_log_and_summary():
    assert parsed("clean.log", "memcheck") == []
    assert error_summary((LOGS / "clean.log").read_text()) == 0
    assert error_summary((LOGS / "memcheck_new.log").read_text()) == 2


def test_log_file_lines_without_prefix_parse_the_same():
    text = (LOGS / "memcheck_old.log").read_text().replace("========= ", "")
    (finding,) = parse_log(text, "memcheck")
    assert finding.where == "/work/examples/vector_add.cu:14"


def test_other_tools_reports_are_not_mixed_in():
    assert parse_log((LOGS / "synccheck.log").read_text(), "memcheck") == []


@pytest.mark.parametrize(
    "signature, name",
    [
        ("void vector_add<float>(const T1 *, const T1 *, T1 *, long long)", "vector_add"),
        ("void ns::softmax_fwd<double, 128>(const T1 *, T1 *, long long)", "softmax_fwd"),
        ("cudapy::portkit_ops::sigmoid::sigmoid_fwd[abi:v1,cw5](Array<float, 1>)", "sigmoid_fwd"),
        ("block_reduce(double*, int, bool)", "block_reduce"),
        ("myKernel", "myKernel"),
    ],
)
def test_kernel_name(signature, name):
    assert kernel_name(signature) == name


def test_real_synccheck_log_from_the_h100():
    """The sanitizer run on the H100, 2026-11-23: the softmax twin with `if (tid < cols)
    __syncthreads();` (now the bank's softmax/barrier_skipped_past_width) on float32-3x127;
    the log is cut at 64 KiB and its host frames dropped."""
    findings = parsed("gpu-synccheck-divergent_alive.log", "synccheck")
    assert len(findings) == 19
    first = findings[0]
    assert first.kind == "Barrier error detected. Divergent thread(s) in warp"
    assert (first.op, first.implementation, first.kernel) == (
        "exp_divergent_alive",
        "twin",
        "softmax_fwd",
    )
    assert (first.where, first.block, first.thread) == (
        "exp_divergent_alive.cu:25",
        "(0,0,0)",
        "(96,0,0)",
    )
    assert [f.thread for f in findings[:3]] == ["(96,0,0)", "(97,0,0)", "(98,0,0)"]


@pytest.mark.parametrize("path", sorted(LOGS.glob("gpu-*.log")), ids=lambda p: p.name)
def test_captured_gpu_logs_parse_into_located_rows(path):
    """Logs captured on the GPU: every error the summary counts becomes a row, and each
    row in the project's kernels has a file:line, a block and a thread."""
    tool = path.stem.split("-")[1]
    text = path.read_text()
    findings = parse_log(text, tool)
    count = error_summary(text)
    if count is not None and count <= 100:
        assert len(findings) == count
    for finding in findings:
        if finding.file:
            assert finding.line > 0 and finding.kernel


def test_racecheck_hazards_in_the_newer_location_style():
    raw, unknown = parsed("racecheck_hazard_new.log", "racecheck")
    assert (raw.kind, raw.block, raw.thread) == ("RAW hazard (write)", "(1,0,0)", "(2,0,0)")
    assert (raw.kernel, raw.where) == ("block_reduce", "wt_softmax_missing_syncthreads.cu:22")
    assert raw.other == "Read thread (0,0,0) at wt_softmax_missing_syncthreads.cu:22"
    assert (raw.op, raw.implementation) == ("wt_softmax_missing_syncthreads", "twin")
    # a detail line of an unknown shape still yields the file and line
    assert unknown.where == "wt_softmax_missing_syncthreads.cu:30"
    assert unknown.op == "wt_softmax_missing_syncthreads"


def test_a_finding_portkit_cannot_place_is_never_waved_through(tmp_path):
    from portkit.sanitize.findings import Finding
    from portkit.sanitize.runner import FOUND, ToolRun

    run = ToolRun("memcheck", [], 86, 1.0, tmp_path, tmp_path, [Finding("memcheck", "odd")])
    assert run.status == FOUND
    torch_only = Finding("memcheck", "Invalid __global__ read", kernel="elementwise_kernel")
    assert ToolRun("memcheck", [], 86, 1.0, tmp_path, tmp_path, [torch_only]).status == "clean"


def test_a_check_that_fails_under_the_tool_is_named_in_the_summary(tmp_path):
    """A child check that failed with no finding (a compile error under line info) is
    named: op, backend, check, case and its first line, not only a count."""
    import io

    from rich.console import Console

    from portkit.sanitize.report import print_sanitizer
    from portkit.sanitize.runner import CHECKS_FAILED, ToolRun

    output = tmp_path / "memcheck.check.txt"
    output.write_text("111 passed, 1 failed\n")
    results = [
        {
            "op": "gelu",
            "backend": "numba",
            "check": "forward",
            "case": "bfloat16-n129",
            "status": "fail",
            "detail": "nvJitLinkError: ERROR_NVVM_COMPILE\nmore",
        },
        {
            "op": "gelu",
            "backend": "twin",
            "check": "forward",
            "case": "float32-n1",
            "status": "pass",
            "detail": "",
        },
    ]
    run = ToolRun("memcheck", [], 1, 1.0, tmp_path / "m.log", output, [], "", results)
    assert run.status == CHECKS_FAILED
    buffer = io.StringIO()
    assert print_sanitizer([run], Console(file=buffer, width=200)) is True
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith("FAIL under")]
    assert lines == [
        "FAIL under memcheck: gelu / numba / forward / bfloat16-n129: "
        "nvJitLinkError: ERROR_NVVM_COMPILE"
    ]
