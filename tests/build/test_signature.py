"""Twin kernels are checked against what the launcher passes, without a GPU: at
`portkit compile`, `portkit lint` and `portkit check`."""

from __future__ import annotations

import json

from portkit.build.finding import Severity

TWO_PARAMS = """\
template <typename T>
__global__ void sig_count_fwd(const T* __restrict__ x, T* __restrict__ out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = x[i];
}
"""
INT_N = """\
template <typename T>
__global__ void sig_int_fwd(const T* __restrict__ x, T* __restrict__ out,
                            int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i];
}
"""


def project(make_project, sources, name: str, twin: str, **options):
    py = sources.unary_op(name, "out[i] = x[i]", reference="lambda x: x.clone()", **options)
    return make_project({name: (py, twin)})


def test_a_twin_with_fewer_parameters_fails_compile_lint_and_check(make_project, sources, cli):
    root = project(make_project, sources, "sig_count", TWO_PARAMS)
    expected = (
        f"{root / 'cuda_src' / 'sig_count.cu'}:2 twin kernel sig_count_fwd takes 2 parameter(s) "
        f"(x, out); the launcher passes 3 (case float32-n1)"
    )
    compiled = cli(root, "compile", "sig_count")
    assert compiled.exit_code == 1
    assert "signature" in compiled.output and "Traceback" not in compiled.output

    linted = cli(root, "lint", "sig_count", "--json", "--no-resources")
    assert linted.exit_code == 1
    (finding,) = json.loads(linted.output)["findings"]
    assert (finding["severity"], finding["kind"]) == ("error", "signature")
    assert f"{finding['where']} {finding['message']}" == expected

    checked = cli(root, "check", "sig_count", "--backend", "torch", "--json")
    assert checked.exit_code == 1
    report = json.loads(checked.output[checked.output.index('{\n "results"') :])
    (row,) = [r for r in report["results"] if r["check"] == "signature"]
    assert (row["status"], row["detail"]) == ("fail", expected)


def test_an_int_parameter_given_the_element_count_is_an_error(make_project, sources, load_op):
    from portkit.build.compile_checks import check_signature
    from portkit.build.signature import signature_findings

    root = project(make_project, sources, "sig_int", INT_N)
    _, op = load_op(root, "sig_int")
    (finding,) = signature_findings(op)
    assert finding.severity is Severity.ERROR
    assert finding.where == f"{op.twin_path}:2"
    sizes = ", ".join(str(n) for n in sorted({c.numel for c in op.definition.cases if c.numel}))
    assert finding.message == (
        f"twin kernel sig_int_fwd: parameter `int n` receives a tensor size ({sizes}) that "
        f"the prototype sees as int64; past 2^31 elements the twin truncates it"
    )
    assert check_signature(op).failed


def test_an_int_parameter_given_another_python_int_is_a_warning(make_project, sources, load_op):
    from portkit.build.signature import signature_findings

    # the launcher passes a constant 7 as `n`: not a size of any tensor it launches with
    py = sources.unary_op("sig_int7", "out[i] = x[i]", reference="lambda x: x.clone()")
    py = py.replace("](x, out, n)", "](x, out, 7)")
    root = make_project({"sig_int7": (py, INT_N.replace("sig_int_fwd", "sig_int7_fwd"))})
    _, op = load_op(root, "sig_int7")
    (finding,) = signature_findings(op)
    assert finding.severity is Severity.WARNING
    assert "receives a 64-bit Python int (7)" in finding.message


def test_a_tensor_passed_to_a_scalar_parameter_is_an_error(make_project, sources, load_op):
    from portkit.build.signature import signature_findings

    twin = sources.unary_twin("sig_kind").replace("long long n", "long long n, float scale")
    py = sources.unary_op("sig_kind", "out[i] = x[i]", reference="lambda x: x.clone()")
    py = py.replace("def sig_kind_fwd(x, out, n)", "def sig_kind_fwd(x, out, n, s)")
    py = py.replace("](x, out, n)", "](x, out, n, x)")
    root = make_project({"sig_kind": (py, twin)})
    _, op = load_op(root, "sig_kind")
    (finding,) = signature_findings(op)
    assert finding.severity is Severity.ERROR
    assert "parameter `float scale` is a scalar; the launcher passes a float32 tensor" in (
        finding.message
    )


def test_the_projects_own_ops_have_no_signature_findings():
    from pathlib import Path

    from portkit.build.signature import signature_findings
    from portkit.project.config import load_config
    from portkit.project.discovery import discover

    catalog = discover(load_config(Path(__file__).resolve().parents[2]))
    for name in ("sigmoid", "histogram", "layernorm"):
        assert signature_findings(catalog.get(name)) == [], name
