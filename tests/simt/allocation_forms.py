"""Kernels allocating shared and local arrays in the forms numba accepts and refuses
(tests/simt/test_numba_rules.py checks each against numba.cuda.compile_ptx too)."""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

TY, TX = 4, 8
SHAPE = (TY + 2, TX + 2)  # computed at module level: a tuple of Python ints
DTYPE = np.dtype("float32")
NP_SIZE = np.int32(16)
FLOAT_SIZE = 16.0


@cuda.jit
def literal(x, out):
    s = cuda.shared.array(16, float32)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit
def global_tuple(x, out):
    s = cuda.shared.array(SHAPE, dtype=x.dtype)
    s[0, 0] = x[0]
    out[0] = s[0, 0]


@cuda.jit
def global_names(x, out):
    s = cuda.shared.array((TY, TX), DTYPE)
    s[0, 0] = x[0]
    out[0] = s[0, 0]


@cuda.jit
def folded_literals(x, out):
    s = cuda.local.array(shape=4 * 4, dtype=np.float32)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit
def local_alias(x, out):
    n = (TY, 4)
    s = cuda.shared.array(n, "float32")
    s[0, 0] = x[0]
    out[0] = s[0, 0]


@cuda.jit
def computed_shape(x, out):
    s = cuda.shared.array((TY + 2, TX + 2), dtype=x.dtype)
    s[0, 0] = x[0]
    out[0] = s[0, 0]


@cuda.jit
def argument_shape(x, out):
    s = cuda.local.array(x.shape[0], float32)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit
def local_arithmetic(x, out):
    n = TX * 2
    s = cuda.local.array(n, float32)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit
def numpy_integer(x, out):
    s = cuda.shared.array(NP_SIZE, float32)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit
def float_size(x, out):
    s = cuda.shared.array(FLOAT_SIZE, float32)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit
def reassigned(x, out):
    n = 8
    if x[0] > 0:
        n = 16
    s = cuda.local.array(n, float32)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit
def python_type(x, out):
    s = cuda.local.array(4, float)
    s[0] = x[0]
    out[0] = s[0]


# A device function's parameter as the shape or dtype (numba-cuda's test_atomics): numba
# types each call with literal arguments first, so what counts is what the calls pass.
@cuda.jit(device=True)
def fill_shared(x, out, n, dtype):
    s = cuda.shared.array(n, dtype)
    s[0] = x[0]
    out[0] = s[0]


@cuda.jit(device=True)
def fill_local_2d(x, out, shape):
    m = shape
    s = cuda.local.array(m, float32)
    s[0, 0] = x[0]
    out[0] = s[0, 0]


@cuda.jit(device=True)
def fill_rows(x, out, rows):
    s = cuda.local.array((rows, 4), float32)
    s[0, 0] = x[0]
    out[0] = s[0, 0]


@cuda.jit(device=True)
def relay(x, out, n):
    fill_shared(x, out, n, float32)


@cuda.jit
def passes_literal(x, out):
    fill_shared(x, out, 16, float32)


@cuda.jit
def passes_global(x, out):
    fill_shared(x, out, TX, DTYPE)


@cuda.jit
def passes_tuple(x, out):
    fill_local_2d(x, out, (TY, 8))


@cuda.jit
def passes_local_by_keyword(x, out):
    n = 16
    fill_shared(x, out, dtype=float32, n=n)


@cuda.jit
def passes_through_relay(x, out):
    relay(x, out, 16)


@cuda.jit
def passes_rows(x, out):
    fill_rows(x, out, 4 * 2)


@cuda.jit
def passes_argument(x, out):
    fill_shared(x, out, x.shape[0], float32)


@cuda.jit
def passes_arithmetic(x, out):
    fill_shared(x, out, TX * 2, float32)


@cuda.jit
def relays_argument(x, out):
    relay(x, out, x.size)


@cuda.jit
def passes_float(x, out):
    fill_rows(x, out, FLOAT_SIZE)


@cuda.jit
def passes_python_type(x, out):
    fill_shared(x, out, 16, float)


ACCEPTED = [
    literal,
    global_tuple,
    global_names,
    folded_literals,
    local_alias,
    passes_literal,
    passes_global,
    passes_tuple,
    passes_local_by_keyword,
    passes_through_relay,
    passes_rows,
]
# kernel, what the one-line error says
REFUSED = [
    (computed_shape, "numba does not fold arithmetic on names (TY + 2)"),
    (argument_shape, "x.shape[0] is computed in the kernel"),
    (local_arithmetic, "numba does not fold arithmetic on names (TX * 2)"),
    (numpy_integer, "NP_SIZE is a int32, not a Python int"),
    (float_size, "FLOAT_SIZE is a float, not a Python int"),
    (reassigned, "n is assigned more than once in the kernel"),
    (python_type, "dtype float is a Python type"),
    (
        passes_argument,
        "fill_shared's parameter n is the shape of cuda.shared.array in fill_shared at line",
    ),
    (passes_arithmetic, "numba does not fold arithmetic on names (TX * 2)"),
    (relays_argument, "relay's parameter n is the shape of cuda.shared.array in fill_shared"),
    (passes_float, "FLOAT_SIZE is a float, not a Python int"),
    (passes_python_type, "fill_shared's parameter dtype is the dtype of cuda.shared.array"),
]
