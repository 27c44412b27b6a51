// GRU step kernels built for scalar (flags set per file in CMakeLists.txt).
#define FB_ISA_NS gru_scalar
#define FB_GRU_KERNELS_FN gru_kernels_scalar
#include "gru_simd.hpp"
