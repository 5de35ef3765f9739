"""Peak arithmetic rate of the GPUs portkit is measured on, per dtype: what a compute-bound
op's FLOP/s is a fraction of, as a memory-bound op's GB/s is of the copy bandwidth.

Dense rates (no structured sparsity) at boost clock, from NVIDIA's datasheets, in
TFLOP/s, a fused multiply-add counting two. float32 is the CUDA cores' rate: the TF32
tensor cores round the inputs to 10 mantissa bits, which is not float32 arithmetic (the
bench compares with TF32 off). float64, float16 and bfloat16 are the tensor cores'
rates, the most that arithmetic in that dtype reaches on that GPU. A GPU not listed here
has no peak: the table says "-" rather than guess.
"""

from __future__ import annotations

# Matched in order against torch's device name (an H100 SXM is "NVIDIA H100 80GB HBM3"),
# so the variants come before the bare model name.
PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"float64": 51.0, "float32": 51.0, "float16": 756.0, "bfloat16": 756.0}),
    ("H100 NVL", {"float64": 60.0, "float32": 60.0, "float16": 835.0, "bfloat16": 835.0}),
    ("H200 NVL", {"float64": 60.0, "float32": 60.0, "float16": 835.0, "bfloat16": 835.0}),
    ("H100", {"float64": 67.0, "float32": 67.0, "float16": 989.4, "bfloat16": 989.4}),
    ("H200", {"float64": 67.0, "float32": 67.0, "float16": 989.4, "bfloat16": 989.4}),
)


def peak_tflops(gpu: str, dtype: str) -> float | None:
    """The peak TFLOP/s of ``gpu`` (torch's device name) in ``dtype``; None if unknown."""
    name = gpu.lower()
    for model, rates in PEAK_TFLOPS:
        if model.lower() in name:
            return rates.get(dtype)
    return None
