// Softmax and matmul-epilogue kernels built for scalar (flags set per file in CMakeLists.txt).
#define FB_ISA_NS fused_scalar
#define FB_KERNELS_FN fused_kernels_scalar
#include "fused_simd.hpp"
