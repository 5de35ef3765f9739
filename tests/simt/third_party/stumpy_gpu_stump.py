# Source: stumpy 1.14.1 (PyPI wheel), stumpy/gpu_stump.py (the kernel) and stumpy/core.py
#   (its device function)
#   https://github.com/TDAmeritrade/stumpy/blob/v1.14.1/stumpy/gpu_stump.py
# Licence: BSD-3-Clause (Copyright 2019 TD Ameritrade). The kernel and the device function
# are copied verbatim; `core` and `config` are stand-ins for stumpy's modules (this module
# and a module holding STUMPY_DENOM_THRESHOLD); the driver run() is portkit's: a self-join
# matrix profile (top-3) of a 40-point series, launched as stumpy's _gpu_stump launches it.
import math
import sys
import types

import numpy as np
from numba import cuda

core = sys.modules[__name__]
config = types.ModuleType("config")
config.STUMPY_DENOM_THRESHOLD = 1e-14


@cuda.jit(device=True)
def _gpu_searchsorted_right(a, v, bfs, nlevel):
    """
    A device function, equivalent to numpy.searchsorted(a, v, side='right')

    Parameters
    ----------
    a : numpy.ndarray
        1-dim array sorted in ascending order.

    v : float
        Value to insert into array `a`

    bfs : numpy.ndarray
        The breadth-first-search indices where the missing leaves of its corresponding
        binary search tree are filled with -1.

    nlevel : int
        The number of levels in the binary search tree from which the array
        `bfs` is obtained.

    Returns
    -------
    idx : int
        The index of the insertion point
    """
    n = a.shape[0]
    idx = 0
    for level in range(nlevel):
        if v < a[bfs[idx]]:
            next_idx = 2 * idx + 1
        else:
            next_idx = 2 * idx + 2

        if level == nlevel - 1 or bfs[next_idx] < 0:
            if v < a[bfs[idx]]:
                idx = max(bfs[idx], 0)
            else:
                idx = min(bfs[idx] + 1, n)
            break
        idx = next_idx

    return idx


@cuda.jit(
    "(i8, f8[:], f8[:], i8,  f8[:], f8[:], f8[:], f8[:], f8[:],"
    "f8[:], f8[:], b1[:], b1[:], i8, b1, i8, f8[:, :], f8[:], "
    "f8[:], i8[:, :], i8[:], i8[:], b1, i8[:], i8, i8)"
)
def _compute_and_update_PI_kernel(
    idx,
    T_A,
    T_B,
    m,
    QT_even,
    QT_odd,
    QT_first,
    μ_Q,
    σ_Q,
    M_T,
    Σ_T,
    Q_subseq_isconstant,
    T_subseq_isconstant,
    w,
    ignore_trivial,
    excl_zone,
    profile,
    profile_L,
    profile_R,
    indices,
    indices_L,
    indices_R,
    compute_QT,
    bfs,
    nlevel,
    k,
):
    """
    A Numba CUDA kernel to update the matrix profile and matrix profile indices

    Parameters
    ----------
    idx : int
        The index for sliding window `j` (in  `T_B`)

    T_A : numpy.ndarray
        The time series or sequence for which to compute the dot product

    T_B : numpy.ndarray
        The time series or sequence that will be used to annotate T_A. For every
        subsequence in T_A, its nearest neighbor in T_B will be recorded.

    m : int
        Window size

    QT_even : numpy.ndarray
        The input QT array (dot product between the query sequence,`Q`, and
        time series, `T`) to use when `i` is even

    QT_odd : numpy.ndarray
        The input QT array (dot product between the query sequence,`Q`, and
        time series, `T`) to use when `i` is odd

    QT_first : numpy.ndarray
        Dot product between the first query sequence,`Q`, and time series, `T`

    μ_Q : numpy.ndarray
        Mean of the query sequence, `Q`

    σ_Q : numpy.ndarray
        Standard deviation of the query sequence, `Q`

    M_T : numpy.ndarray
        Sliding mean of time series, `T`

    Σ_T : numpy.ndarray
        Sliding standard deviation of time series, `T`

    Q_subseq_isconstant : numpy.ndarray
        A boolean array that indicates whether the subsequence in `Q` is constant (True)

    T_subseq_isconstant : numpy.ndarray
        A boolean array that indicates whether a subsequence in `T` is constant (True)

    w : int
        The total number of sliding windows to iterate over

    ignore_trivial : bool
        Set to `True` if this is a self-join. Otherwise, for AB-join, set this to
        `False`.

    excl_zone : int
        The half width for the exclusion zone relative to the current
        sliding window

    profile : numpy.ndarray
        The (top-k) matrix profile, sorted in ascending order per row

    profile_L : numpy.ndarray
        The (top-1) left matrix profile

    profile_R : numpy.ndarray
        The (top-1) right matrix profile

    indices : numpy.ndarray
        The (top-k) matrix profile indices

    indices_L : numpy.ndarray
        The (top-1) left matrix profile indices

    indices_R : numpy.ndarray
        The (top-1) right matrix profile indices

    compute_QT : bool
        A boolean flag for whether or not to compute QT

    bfs : numpy.ndarray
        The breadth-first-search indices where the missing leaves of its corresponding
        binary search tree are filled with -1.

    nlevel : int
        The number of levels in the binary search tree from which the array
        `bfs` is obtained.

    k : int
        The number of top `k` smallest distances used to construct the matrix profile.
        Note that this will increase the total computational time and memory usage
        when k > 1.

    Returns
    -------
    None

    Notes
    -----
    `DOI: 10.1109/ICDM.2016.0085 \
    <https://www.cs.ucr.edu/~eamonn/STOMP_GPU_final_submission_camera_ready.pdf>`__

    See Table II, Figure 5, and Figure 6
    """
    start = cuda.grid(1)
    stride = cuda.gridsize(1)

    j = idx
    # The name `i` is reserved to be used as an index for `T_A`

    if j % 2 == 0:
        QT_out = QT_even
        QT_in = QT_odd
    else:
        QT_out = QT_odd
        QT_in = QT_even

    for i in range(start, QT_out.shape[0], stride):
        zone_start = max(0, i - excl_zone)
        zone_stop = min(w, i + excl_zone)

        if compute_QT:
            QT_out[i] = (
                QT_in[i - 1] - T_A[i - 1] * T_B[j - 1] + T_A[i + m - 1] * T_B[j + m - 1]
            )

            QT_out[0] = QT_first[j]
        if math.isinf(μ_Q[i]) or math.isinf(M_T[j]):
            p_norm = np.inf
        elif Q_subseq_isconstant[i] and T_subseq_isconstant[j]:
            p_norm = 0
        elif Q_subseq_isconstant[i] or T_subseq_isconstant[j]:
            p_norm = m
        else:
            denom = (σ_Q[i] * Σ_T[j]) * m
            denom = max(denom, config.STUMPY_DENOM_THRESHOLD)
            ρ = (QT_out[i] - (μ_Q[i] * M_T[j]) * m) / denom
            ρ = min(ρ, 1.0)
            p_norm = 2 * m * (1.0 - ρ)

        if ignore_trivial:
            if j <= zone_stop and j >= zone_start:
                p_norm = np.inf
            if p_norm < profile_L[i] and j < i:
                profile_L[i] = p_norm
                indices_L[i] = j
            if p_norm < profile_R[i] and j > i:
                profile_R[i] = p_norm
                indices_R[i] = j

        if p_norm < profile[i, -1]:
            idx = core._gpu_searchsorted_right(profile[i], p_norm, bfs, nlevel)
            for g in range(k - 1, idx, -1):
                profile[i, g] = profile[i, g - 1]
                indices[i, g] = indices[i, g - 1]

            profile[i, idx] = p_norm
            indices[i, idx] = j


def run():
    T = np.random.default_rng(0).integers(-5, 6, 40).astype(np.float64)
    m, k = 4, 3
    windows = np.lib.stride_tricks.sliding_window_view(T, m)
    w = l = windows.shape[0]
    excl_zone = int(np.ceil(m / 4))
    μ_Q, σ_Q = windows.mean(axis=1), windows.std(axis=1)
    isconstant = np.zeros(l, dtype=np.bool_)
    QT_first = windows @ T[:m]
    QT_even, QT_odd = QT_first.copy(), np.zeros(l)
    profile = np.full((w, k), np.inf)
    indices = np.full((w, k), -1, dtype=np.int64)
    profile_L, profile_R = np.full(w, np.inf), np.full(w, np.inf)
    indices_L, indices_R = np.full(w, -1, dtype=np.int64), np.full(w, -1, dtype=np.int64)
    bfs = np.array([1, 0, 2], dtype=np.int64)  # core._bfs_indices(3, fill_value=-1)
    nlevel = 2
    arrays = [T, T, m, QT_even, QT_odd, QT_first, μ_Q, σ_Q, μ_Q, σ_Q, isconstant,
              isconstant, w, True, excl_zone, profile, profile_L, profile_R, indices,
              indices_L, indices_R]
    _compute_and_update_PI_kernel[2, 32](0, *arrays, False, bfs, nlevel, k)
    for i in range(1, l):
        _compute_and_update_PI_kernel[2, 32](i, *arrays, True, bfs, nlevel, k)
    return {"profile": profile, "indices": indices, "profile_L": profile_L,
            "indices_L": indices_L, "profile_R": profile_R, "indices_R": indices_R}
