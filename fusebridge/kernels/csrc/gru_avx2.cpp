// GRU step kernels built for avx2 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS gru_avx2
#define FB_GRU_KERNELS_FN gru_kernels_avx2
#include "gru_simd.hpp"
