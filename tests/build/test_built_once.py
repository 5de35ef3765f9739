"""What `portkit check` and `portkit lint` build for an op is built once: the launchers run
once per case for the compile check, the signature check and lint alike, and lint's twin
resources come from one NVRTC compile, the program the twin backend runs."""

from __future__ import annotations

import portkit.backends.twin.build as twin_build
import portkit.launch.trace as trace
from portkit.backends.twin.instances import twin_expressions
from portkit.build.compile_checks import signatures_by_dtype
from portkit.build.signature import signature_findings
from portkit.lint.findings import resource_rows


def _op(make_project, sources, load_op, name):
    py = sources.unary_op(name, "out[i] = x[i] * x[i]", reference="lambda x: x * x")
    cu = sources.unary_twin(name, "out[i] = x[i] * x[i];")
    return load_op(make_project({name: (py, cu)}), name)[1]


def test_the_launchers_run_once_per_case(make_project, sources, load_op, monkeypatch):
    op = _op(make_project, sources, load_op, "once_trace")
    runs = []
    real = trace.record_launches

    def counting(op, case, *args, **kwargs):
        runs.append(case.name)
        return real(op, case, *args, **kwargs)

    monkeypatch.setattr(trace, "record_launches", counting)
    signatures = signatures_by_dtype(op)  # the compile check's and lint's signatures
    assert signature_findings(op) == []  # the signature check's launches
    signatures_by_dtype(op)
    traced = [c.name for c in op.definition.cases if not c.gpu_only]
    assert sorted(runs) == sorted(traced)  # each case once, not once per asker
    assert set(signatures) == set(op.definition.dtypes)
    assert all(signatures[d] for d in op.definition.dtypes)  # every dtype has its launch


def test_lint_compiles_the_twin_once_for_every_resource_row(
    make_project, sources, load_op, monkeypatch
):
    op = _op(make_project, sources, load_op, "once_nvrtc")
    compiled = []
    real = twin_build.nvrtc_compile

    def counting(path, expressions, *args, **kwargs):
        compiled.append(tuple(expressions))
        return real(path, expressions, *args, **kwargs)

    monkeypatch.setattr(twin_build, "nvrtc_compile", counting)
    rows = resource_rows(op, signatures_by_dtype(op))
    assert compiled == [tuple(twin_expressions(op))]  # the backend's program, once
    twin_rows = {(r.kernel, r.dtype) for r in rows if r.side == "twin"}
    proto_rows = {(r.kernel, r.dtype) for r in rows if r.side == "prototype"}
    assert twin_rows == proto_rows and len(twin_rows) == len(op.definition.dtypes) * len(op.kernels)
    assert all(r.usage.registers > 0 for r in rows if r.side == "twin")
