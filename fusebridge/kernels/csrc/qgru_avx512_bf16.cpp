// Quantized GRU kernels built for avx512_bf16 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS qgru_avx512_bf16
#define FB_QGRU_KERNELS_FN qgru_kernels_avx512_bf16
#include "qgru_simd.hpp"
