"""Every failure is reported once, as its source's, in that source's words: a reference
that raises is the reference's row (not the prototype's), a backward returning the wrong
number of gradients is a backward failure, and a twin that does not compile shows its
compiler's message once per op (never once per case), with the cases it stopped counted
apart from the ones that differ."""

from __future__ import annotations

import pytest

from portkit.backends.twin_cpu.build import find_compiler
from tests.conftest import ONE_CASE, unary_op, unary_twin

needs_compiler = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler")
TWO_CASES = (
    '[portkit.cases.custom("float32-n129", [(129,)]), '
    'portkit.cases.custom("float32-n40", [(40,)], seed=3)]'
)


@pytest.fixture(autouse=True)
def _collect_garbage_first():
    """cuda.core objects left by earlier tests can print from ``__dealloc__``."""
    import gc

    gc.collect()


def clean(result, exit_code: int) -> str:
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output
    return result.output


def test_reference_that_raises_is_the_references(make_project, cli):
    py = unary_op("fa_ref", reference="lambda x: x.no_such_method()", cases=TWO_CASES)
    root = make_project({"fa_ref": (py, None)})
    path = root / "prototypes" / "fa_ref.py"
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if "no_such" in t)
    said = "the reference raised AttributeError: 'Tensor' object has no attribute 'no_such_method'"

    out = clean(cli(root, "sim", "fa_ref"), 1)
    assert "FAIL reference / forward" in out
    assert said in out and f"{path}:{line}" in " ".join(out.split()).replace(" ", "")
    assert "FAIL forward" not in out  # the prototype is not blamed

    out = clean(cli(root, "check", "fa_ref", "--backend", "sim", "--no-compile"), 1)
    assert "FAIL fa_ref / reference / forward / float32-n129" in out
    assert "/ sim / forward" not in out
    assert "not compared: the reference failed (see reference / forward)" in out
    assert "0 passed, 2 failed, 2 skipped" in out

    out = clean(cli(root, "diff", "fa_ref", "--sim"), 1)
    assert "2 cases could not run: the reference failed (see above)" in out
    assert "cases differ" not in out
    assert out.count(said) == 1  # one message for both cases


def test_backward_with_too_many_gradients_is_a_backward_failure(make_project, cli):
    py = unary_op("fa_bw", cases=ONE_CASE, backward="dx[i] = dy[i] * 2.0")
    py = py.replace("return (dx,)", "return (dx, dx)")
    root = make_project({"fa_bw": (py, None)})
    said = "op fa_bw: backward returned 2 gradient(s), expected 1"

    out = clean(cli(root, "check", "fa_bw", "--backend", "sim", "--no-compile"), 1)
    assert "FAIL fa_bw / sim / backward / float32-n129" in out
    assert said in out
    assert "/ sim / forward" not in out

    out = clean(cli(root, "sim", "fa_bw"), 1)
    assert "FAIL backward" in out and said in out
    assert "FAIL forward" not in out


def missing_semicolon() -> tuple[str, str]:
    return unary_op("fa_semi", cases=TWO_CASES), unary_twin("fa_semi", body="out[i] = x[i]")


@pytest.mark.compile
def test_twin_compile_error_once_per_op_in_check(make_project, cli):
    root = make_project({"fa_semi": missing_semicolon()})
    out = clean(cli(root, "check", "fa_semi", "--backend", "sim,twin-cpu"), 1)
    assert out.count('error: expected a ";"') == 1  # NVRTC's, in the compile check's row
    assert "FAIL fa_semi / twin / compile sm_90 / all" in out
    assert "not run: the twin does not compile (see twin / compile sm_90 above)" in out
    assert out.count("FAIL fa_semi") == 1


@needs_compiler
def test_twin_compile_error_once_per_op_on_the_cpu(make_project, cli):
    root = make_project({"fa_semi": missing_semicolon()})
    out = clean(cli(root, "check", "fa_semi", "--backend", "twin-cpu", "--no-compile"), 1)
    assert out.count("error: expected ‘;’ before ‘}’ token") == 1  # g++'s, once
    assert "FAIL fa_semi / twin-cpu / compile / all" in out
    assert "not run: twin-cpu does not compile (see twin-cpu / compile above)" in out
    assert out.count("FAIL fa_semi") == 1

    out = clean(cli(root, "diff", "fa_semi"), 1)
    # diff takes the GPU twin where there is a GPU (NVRTC's words), else the CPU twin's.
    from portkit.backends.base import cuda_unavailable_reason

    gpu = cuda_unavailable_reason() is None
    assert (
        out.count('error: expected a ";"' if gpu else "error: expected ‘;’ before ‘}’ token") == 1
    )
    assert "2 cases could not run: twin compile error (see above)" in out
    assert "cases differ" not in out


PARAMETER_LIST = unary_twin("fa_par").replace("long long n)", "long long n { int w = 4;")


@pytest.mark.compile
def test_parameter_list_syntax_error_is_the_compilers(make_project, cli):
    root = make_project({"fa_par": (unary_op("fa_par", cases=ONE_CASE), PARAMETER_LIST)})
    out = clean(cli(root, "compile", "fa_par"), 1)
    assert 'fa_par.cu(2): error: expected a ")"' in out
    assert "has type" not in out  # portkit's signature reader stays quiet


@needs_compiler
def test_parameter_list_syntax_error_on_the_cpu(make_project, cli):
    root = make_project({"fa_par": (unary_op("fa_par", cases=TWO_CASES), PARAMETER_LIST)})
    out = clean(cli(root, "check", "fa_par", "--backend", "twin-cpu", "--no-compile"), 1)
    assert out.count("error: expected ‘)’ before ‘{’ token") == 1
    assert "has type" not in out


@pytest.mark.compile
def test_signature_the_compiler_accepts_gets_the_readers_error(make_project, cli):
    twin = unary_twin("fa_nt").replace("template <typename T>", "template <typename T, int W>")
    root = make_project({"fa_nt": (unary_op("fa_nt", cases=ONE_CASE), twin)})
    out = " ".join(clean(cli(root, "compile", "fa_nt"), 1).split())
    assert "template parameter 'int W'; portkit instantiates type parameters only" in out


@pytest.mark.compile
def test_twin_failing_for_every_type_is_a_compile_error(make_project, cli):
    """`%` takes neither float nor __half: no dtype to drop, a bug to fix."""
    cases = '[portkit.cases.custom("float16-n5", [(5,)], "float16")]'
    py = unary_op("fa_all", cases=cases, op_options='dtypes=("float32", "float16")')
    twin = "#include <cuda_fp16.h>\n" + unary_twin("fa_all", body="out[i] = x[i] % T(2);")
    root = make_project({"fa_all": (py, twin)})
    out = clean(cli(root, "compile", "fa_all"), 1)
    assert "does not compile for sm_90" in out
    assert "expression must have integral or unscoped enum type" in out  # float's
    assert "cannot be instantiated" not in out and "drop its dtype" not in out
