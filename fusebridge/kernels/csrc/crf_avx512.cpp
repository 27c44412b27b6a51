// crf_decoding's Viterbi built for avx512 (flags set per file in CMakeLists.txt).
#define FB_ISA_NS crf_avx512
#define FB_CRF_KERNELS_FN crf_kernels_avx512
#include "crf_viterbi.hpp"
