"""twin-cpu compiles against the declarations NVRTC sees: a twin using a glibc macro or
std:: (undeclared under NVRTC, checked with NVRTC 13) fails here too, with one line
saying what to write instead."""

from __future__ import annotations

import pytest

from portkit.backends.twin_cpu.build import compile_twin_cpu, find_compiler
from portkit.errors import TwinCompileError

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler on this machine")

TWIN = """#include <cuda_runtime.h>
#include <math_constants.h>

extern "C" __global__ void k(float* out) {{
    out[threadIdx.x] = {expression};
}}
"""


@pytest.mark.parametrize(
    ("expression", "name", "instead"),
    [
        ("INFINITY", "INFINITY", "CUDART_INF_F"),
        ("NAN", "NAN", "CUDART_NAN_F"),
        ("M_PI", "M_PI", "CUDART_PI_F"),
        ("FLT_MAX", "FLT_MAX", "CUDART_MAX_NORMAL_F"),
        ("std::tanh(out[0])", "std::", "without std::"),
        ("(float)(uint32_t)out[0]", "uint32_t", "unsigned"),
    ],
)
def test_names_nvrtc_lacks_fail_on_the_cpu(tmp_path, expression, name, instead):
    source = tmp_path / "uses_glibc.cu"
    source.write_text(TWIN.format(expression=expression))
    with pytest.raises(TwinCompileError) as raised:
        compile_twin_cpu(source, ["k"], tmp_path / "cache", "plain")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"twin {source}:5: {name} is not declared by NVRTC")
    assert instead in message


@pytest.mark.parametrize(
    "expression",
    ["CUDART_INF_F", "CUDART_NAN_F", "tanhf(out[0]) + tanh(out[1]) + (isnan(out[2]) ? 1 : 0)",
     "fminf(out[0], __int_as_float(0x7f800000))", "min(1.0f, max(out[0], 0.0f))"],
)  # fmt: skip
def test_what_nvrtc_declares_still_compiles(tmp_path, expression):
    source = tmp_path / "cuda_names.cu"
    source.write_text(TWIN.format(expression=expression))
    compile_twin_cpu(source, ["k"], tmp_path / "cache", "plain")
