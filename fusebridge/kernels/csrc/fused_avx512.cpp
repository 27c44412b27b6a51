// Softmax and matmul-epilogue kernels built for avx512 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS fused_avx512
#define FB_KERNELS_FN fused_kernels_avx512
#include "fused_simd.hpp"
