// crf_decoding's Viterbi built for avx2 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS crf_avx2
#define FB_CRF_KERNELS_FN crf_kernels_avx2
#include "crf_viterbi.hpp"
