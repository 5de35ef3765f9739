"""The twin: C CUDA kernels in ``cuda_src/OP.cu``. ``source`` reads their signatures,
``build`` compiles them with NVRTC (cached), ``backend`` launches them through the driver."""
