// Quantized GRU kernels built for scalar (flags set per file in CMakeLists.txt).
#define FB_ISA_NS qgru_scalar
#define FB_QGRU_KERNELS_FN qgru_kernels_scalar
#include "qgru_simd.hpp"
