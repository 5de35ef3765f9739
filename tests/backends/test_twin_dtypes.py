"""The twin side of the dtype contract: the signature parser reads half-precision,
integer and vector pointers and several template parameters; the binding picks one C
type per template parameter from the tensors; every combination is instantiated; the
CUDA headers are found by NVRTC on a CPU-only machine."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from portkit.backends.twin.backend import bind_arguments
from portkit.backends.twin.build import compile_twin
from portkit.backends.twin.source import parse_twin
from portkit.errors import InputError, OpDefinitionError
from portkit.project.dtypes import DTYPES
from portkit.runtime.launch_contract import C_SCALAR_OF_DTYPE

MIXED = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
template <typename T, typename U>
__global__ void k(const T* x, U* y, const __half* h, const __nv_bfloat16* b, int* counts,
                  unsigned* flags, long long* index, const float4* v, long long n, float s) {}
"""


def parse(tmp_path: Path, source: str):
    path = tmp_path / "k.cu"
    path.write_text(textwrap.dedent(source))
    return parse_twin(path)


def test_every_contract_dtype_has_a_c_type():
    assert set(C_SCALAR_OF_DTYPE) == set(DTYPES)


def test_parser_reads_fixed_and_template_types(tmp_path):
    k = parse(tmp_path, MIXED)["k"]
    assert k.template_params == ("T", "U")
    types = {p.name: (p.ctype, p.pointer) for p in k.params}
    assert types["h"] == ("__half", True) and types["b"] == ("__nv_bfloat16", True)
    assert types["flags"] == ("unsigned", True) and types["index"] == ("long long", True)
    assert types["v"] == ("float4", True) and types["n"] == ("long long", False)
    assert k.expression(("float", "int")) == "k<float, int>"
    assert k.expression("double") == "k<double, double>"


def test_parser_refuses_non_type_template_parameter(tmp_path):
    with pytest.raises(OpDefinitionError, match="template parameter 'int N'"):
        parse(tmp_path, "template <typename T, int N>\n__global__ void k(T* x) {}\n")


def test_parser_names_an_unknown_pointer_type(tmp_path):
    with pytest.raises(OpDefinitionError, match=r"parameter x is a my_t\*"):
        parse(tmp_path, "__global__ void k(my_t* x) {}\n")


def test_binding_one_c_type_per_template_parameter(tmp_path):
    k = parse(tmp_path, MIXED)["k"]
    args = [
        torch.zeros(2, dtype=torch.bfloat16),
        torch.zeros(2, dtype=torch.int32),
        torch.zeros(2, dtype=torch.float16),
        torch.zeros(2, dtype=torch.bfloat16),
        torch.zeros(2, dtype=torch.int32),
        torch.zeros(2, dtype=torch.int32).view(torch.uint32),
        torch.zeros(2, dtype=torch.int64),
        torch.zeros(8, dtype=torch.float32),
        2,
        0.5,
    ]
    scalar, values = bind_arguments(k, args)
    assert scalar == ("__nv_bfloat16", "int")
    assert len(values) == len(args)


def test_binding_refuses_a_wrong_fixed_pointer_dtype(tmp_path):
    k = parse(tmp_path, MIXED)["k"]
    args = [torch.zeros(2)] * 2 + [torch.zeros(2)] * 6 + [2, 0.5]
    with pytest.raises(InputError, match=r"parameter h is __half\*; got a float32 tensor"):
        bind_arguments(k, args)


@pytest.mark.compile
def test_nvrtc_instantiates_half_types_on_the_cpu(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(MIXED)
    expressions = ["k<__half, float>", "k<__nv_bfloat16, __nv_bfloat16>", "k<double, int>"]
    compiled = compile_twin(path, expressions, tmp_path / "cache")
    assert set(compiled.symbols) == set(expressions)
