// GRU step kernels built for avx512 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS gru_avx512
#define FB_GRU_KERNELS_FN gru_kernels_avx512
#include "gru_simd.hpp"
