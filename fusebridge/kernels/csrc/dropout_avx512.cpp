// Dropout kernels built for avx512 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS isa_avx512
#define FB_KERNELS_FN kernels_avx512
#include "dropout_simd.hpp"
