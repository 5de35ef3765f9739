// portkit CPU twin: the CUDA header device_launch_parameters.h maps to portkit_cuda_cpu.h.
#pragma once
#include "portkit_cuda_cpu.h"
