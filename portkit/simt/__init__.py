"""portkit's own CUDA simulator: runs unmodified ``numba.cuda.jit`` kernels on the CPU with
every access checked (bounds, races, uninitialised memory, barriers, warp masks).
See docs/simulator.md for the map of its modules."""
