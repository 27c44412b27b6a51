// Softmax and matmul-epilogue kernels built for avx2 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS fused_avx2
#define FB_KERNELS_FN fused_kernels_avx2
#include "fused_simd.hpp"
