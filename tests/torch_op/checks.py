"""opcheck for cases whose values make NaN.

opcheck's AOTAutograd comparison calls ``assert_close`` without ``equal_nan``, so a
case with inf - inf or sigmoid(nan) fails it although eager and compiled agree. For those
cases the three other opcheck tests run as usual and the AOTAutograd check runs here the
way opcheck calls it (cloned inputs, gradients where inputs require them), with
``equal_nan=True``.
"""

from __future__ import annotations

import functools
import math

import torch


def makes_nan(case) -> bool:
    return any(math.isnan(v) or math.isinf(v) for v in case.special)


def opcheck(op, inputs: list, nan: bool) -> None:
    if not nan:
        result = torch.library.opcheck(op, inputs)
        assert set(result.values()) == {"SUCCESS"}, result
        return
    tests = ("test_schema", "test_autograd_registration", "test_faketensor")
    result = torch.library.opcheck(op, inputs, test_utils=tests)
    assert set(result.values()) == {"SUCCESS"}, result
    from torch.testing._internal.optests import aot_autograd_check

    def cloned(*args):
        return op(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])

    aot_autograd_check(
        cloned,
        inputs,
        {},
        dynamic=True,
        check_gradients="auto",
        assert_equals_fn=functools.partial(torch.testing.assert_close, equal_nan=True),
    )
