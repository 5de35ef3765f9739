# Source: numba-cuda 0.30.4, numba/cuda/tests/cudapy/test_blackscholes.py
#   https://github.com/NVIDIA/numba-cuda/blob/v0.30.4/numba_cuda/numba/cuda/tests/cudapy/test_blackscholes.py
# Licence: BSD-2-Clause (Copyright (c) 2012 Anaconda, Inc.; (c) 2024 NVIDIA Corporation).
# The kernel is copied verbatim; the driver run() is portkit's (small sizes).
import math

import numpy as np
from numba import cuda
from numba.cuda import double, void

RISKFREE = 0.02
VOLATILITY = 0.30

A1 = 0.31938153
A2 = -0.356563782
A3 = 1.781477937
A4 = -1.821255978
A5 = 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


@cuda.jit(double(double), device=True, inline="always")
def cnd_cuda(d):
    K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    ret_val = (
        RSQRT2PI
        * math.exp(-0.5 * d * d)
        * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))))
    )
    if d > 0:
        ret_val = 1.0 - ret_val
    return ret_val


@cuda.jit(
    void(
        double[:],
        double[:],
        double[:],
        double[:],
        double[:],
        double,
        double,
    )
)
def black_scholes_cuda(callResult, putResult, S, X, T, R, V):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= S.shape[0]:
        return
    sqrtT = math.sqrt(T[i])
    d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (
        V * sqrtT
    )
    d2 = d1 - V * sqrtT
    cndd1 = cnd_cuda(d1)
    cndd2 = cnd_cuda(d2)

    expRT = math.exp((-1.0 * R) * T[i])
    callResult[i] = S[i] * cndd1 - X[i] * expRT * cndd2
    putResult[i] = X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1)


def randfloat(rand_var, low, high):
    return (1.0 - rand_var) * low + rand_var * high


def run():
    OPT_N = 100
    rng = np.random.default_rng(0)
    stockPrice = randfloat(rng.random(OPT_N), 5.0, 30.0)
    optionStrike = randfloat(rng.random(OPT_N), 1.0, 100.0)
    optionYears = randfloat(rng.random(OPT_N), 0.25, 10.0)
    callResult = np.zeros(OPT_N)
    putResult = -np.ones(OPT_N)
    blockdim = 64, 1
    griddim = int(math.ceil(float(OPT_N) / blockdim[0])), 1
    black_scholes_cuda[griddim, blockdim](
        callResult, putResult, stockPrice, optionStrike, optionYears, RISKFREE, VOLATILITY
    )
    return {"call": callResult, "put": putResult}
