// Dropout kernels built for scalar (flags set per file in CMakeLists.txt).
#define FB_ISA_NS isa_scalar
#define FB_KERNELS_FN kernels_scalar
#include "dropout_simd.hpp"
