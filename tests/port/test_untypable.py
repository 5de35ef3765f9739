"""`portkit port` on kernels numba cannot type: one line each (kernel, file:line, reason),
exit code 1, never a traceback."""

from __future__ import annotations

import pytest

DEVICE = '''
@cuda.jit(device=True)
def twice(v, d):
    if d > 3:
        return v
    return twice(v, d + 1) * 0.0 + v * 2.0
'''
HALF = (
    'portkit.cases.elementwise(sizes=(129,), large=None, special=(), dtypes=("float16",), '
    "gradcheck=False)"
)

# name -> (kernel body, the line and reason `portkit port` gives)
CASES = {
    "pu_try": (
        "try:\n    out[i] = x[i] * 2.0\nexcept Exception:\n    out[i] = 0.0",
        "pu_try.py:15: kernel pu_try_fwd (numba cannot compile it: try/except)",
    ),
    "pu_slice": (
        "out[i] = x[i] * 2.0\nif i == 0:\n    out[0:1] = x[0:1] * 2.0",
        "pu_slice.py:17: kernel pu_slice_fwd (numba cannot compile it: assignment to a slice)",
    ),
    "pu_recursion": (
        "out[i] = twice(x[i], 1)",
        "pu_recursion.py:22: kernel pu_recursion_fwd (numba cannot compile it: recursion "
        "(twice calls itself; numba-cuda compiles it only with the same argument types in "
        "every call))",
    ),
    "pu_list": (
        "a = [1.0, 2.0]\nout[i] = x[i] * a[1]",
        "pu_list.py:15: kernel pu_list_fwd (numba cannot compile it: a Python list)",
    ),
    "pu_comprehension": (
        "out[i] = x[i] * 2.0 + sum([0.0 for _ in range(2)])",
        "pu_comprehension.py:15: kernel pu_comprehension_fwd (numba cannot compile it: a "
        "comprehension (a list, set or dict))",
    ),
    "pu_star": (
        "a, *b = (x[i], x[i], x[i])\nout[i] = a * 2.0",
        "pu_star.py:15: kernel pu_star_fwd (numba cannot compile it: numba failed on it "
        "(UnsupportedBytecodeError: Use of unsupported opcode (UNPACK_EX) found))",
    ),
    "pu_half": (
        "out[i] = x[i] * 2.0\ncuda.atomic.add(out, i, x[i] - x[i])",
        "pu_half.py:16: kernel pu_half_fwd (numba cannot compile it: no implementation of "
        "atomic.add for add(array(float16, 1d, C), int64, float16) (no match))",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_untypable_kernel_is_one_line_and_exit_1(make_project, sources, cli, name):
    body, expected = CASES[name]
    options = {"cases": sources.ONE_CASE}
    if name == "pu_half":
        options = {"cases": HALF, "op_options": 'dtypes=("float16",)'}
    prototype = sources.unary_op(name, body, extra_kernels=DEVICE, **options)
    root = make_project({name: (prototype, None)})
    result = cli(root, "port", name)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"{expected} is not translated",
        "1 constructs not translated: see the #error lines",
    ]
    text = (root / "cuda_src" / f"{name}.cu").read_text()
    assert f'#error "portkit port: kernel {name}_fwd (numba cannot compile it: ' in text


def test_a_statement_gap_names_its_device_function(make_project, sources, cli):
    device = '''
@cuda.jit(device=True)
def looped(v):
    while False:
        pass
    else:
        v = v * 2.0
    return v
'''
    prototype = sources.unary_op(
        "pu_device", "out[i] = looped(x[i])", cases=sources.ONE_CASE, extra_kernels=device
    )
    root = make_project({"pu_device": (prototype, None)})
    result = cli(root, "port", "pu_device")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        "pu_device.py:20: device function looped: while ... else is not translated"
    )
