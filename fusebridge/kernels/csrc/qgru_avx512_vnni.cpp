// Quantized GRU kernels built for avx512_vnni (flags set per file in CMakeLists.txt).
#define FB_ISA_NS qgru_avx512_vnni
#define FB_QGRU_KERNELS_FN qgru_kernels_avx512_vnni
#include "qgru_simd.hpp"
