// Quantized GRU kernels built for avx2_vnni (flags set per file in CMakeLists.txt).
#define FB_ISA_NS qgru_avx2_vnni
#define FB_QGRU_KERNELS_FN qgru_kernels_avx2_vnni
#include "qgru_simd.hpp"
