// Quantized GRU kernels built for avx2 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS qgru_avx2
#define FB_QGRU_KERNELS_FN qgru_kernels_avx2
#include "qgru_simd.hpp"
