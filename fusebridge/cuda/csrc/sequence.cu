// Sequence kernels on the GPU (in progress).
#include "common.cuh"
