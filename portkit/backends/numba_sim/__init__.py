"""numba's own CUDA simulator as a backend (``numba-sim``): ``backend`` registers it,
``functions`` swaps a prototype's kernels and device functions for simulated ones."""
