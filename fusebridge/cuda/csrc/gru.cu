// The fused GRU on the GPU (in progress).
#include "common.cuh"
