// The per-ISA Viterbi of crf_decoding: one table per instruction set, chosen at run time
// (dispatch.hpp).
#pragma once
#include <cstdint>

namespace fusebridge {

struct CrfKernels {
    // The best path of one sentence of len >= 1 words (emission x [len, tags], transition
    // [tags + 2, tags]); alpha: 2 * tags floats, track: len * tags back pointers of scratch.
    void (*viterbi)(const float* x, const float* trans, int64_t len, int64_t tags, float* alpha,
                    int32_t* track, int64_t* path);
};

const CrfKernels& crf_kernels_scalar();
const CrfKernels& crf_kernels_avx2();
const CrfKernels& crf_kernels_avx512();

}  // namespace fusebridge
