// crf_decoding's Viterbi built for scalar (flags set per file in CMakeLists.txt).
#define FB_ISA_NS crf_scalar
#define FB_CRF_KERNELS_FN crf_kernels_scalar
#include "crf_viterbi.hpp"
