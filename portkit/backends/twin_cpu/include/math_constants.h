// portkit CPU twin: the constants of CUDA's math_constants.h that twins use.
#pragma once
#include "portkit_cuda_cpu.h"
#define CUDART_INF_F __builtin_inff()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_INF __builtin_inf()
#define CUDART_NAN __builtin_nan("")
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_SQRT_HALF_F 0.707106781f
#define CUDART_MAX_NORMAL_F 3.4028234663852886e+38f
#define CUDART_MIN_DENORM_F 1.4012984643e-45f
