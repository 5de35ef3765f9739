"""The one op-level input check (portkit/runtime/op_inputs.py), which portkit.load, check
and an exported package all run: an exported package used to ignore ``input_dtypes``."""

from __future__ import annotations

import pytest
import torch

from portkit.errors import InputError
from portkit.runtime.op_inputs import InputRule, input_check


def test_fixed_input_dtypes_are_honoured_and_named() -> None:
    rule = InputRule("gather", ("float32", "float64"), (None, "int64"), False, "cpu")
    seen = []
    check = input_check(rule, lambda *inputs: seen.append(len(inputs)))
    check([torch.ones(3), torch.zeros(3, dtype=torch.int64)])
    check([torch.ones(3, dtype=torch.float64), torch.zeros(3, dtype=torch.int64)])
    assert seen == [2, 2]  # the author's check ran once per call
    with pytest.raises(InputError, match="^op gather: input 1 is int32; the op takes int64 there$"):
        check([torch.ones(3), torch.zeros(3, dtype=torch.int32)])
    with pytest.raises(InputError, match="input 0 is int64, a dtype the op does not accept"):
        check([torch.zeros(3, dtype=torch.int64), torch.zeros(3, dtype=torch.int64)])


def test_the_fast_pass_and_the_messages() -> None:
    rule = InputRule("add", ("float32",), (), True, "cpu")
    check = input_check(rule, None)
    x = torch.ones(4, 4)
    check([x, x, 2.0])
    with pytest.raises(InputError, match=r"input 1 has shape \(4,\) but input 0 has \(4, 4\)"):
        check([x, torch.ones(4)])
    with pytest.raises(InputError, match=r"input 0: tensor with strides \(1, 4\) is not contig"):
        check([x.t(), x])
    with pytest.raises(InputError, match="^op add: no tensor among the inputs$"):
        check([1.0])
    on_gpu = input_check(InputRule("add", ("float32",), (), True, "cuda"), None)
    with pytest.raises(InputError, match="tensor is on cpu, but this implementation runs on cuda"):
        on_gpu([x, x])
