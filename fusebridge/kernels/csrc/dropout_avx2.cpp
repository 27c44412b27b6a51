// Dropout kernels built for avx2 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS isa_avx2
#define FB_KERNELS_FN kernels_avx2
#include "dropout_simd.hpp"
