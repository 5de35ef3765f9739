// portkit CPU twin: the CUDA header cuda_bf16.h maps to portkit_cuda_cpu.h.
#pragma once
#include "portkit_cuda_cpu.h"
