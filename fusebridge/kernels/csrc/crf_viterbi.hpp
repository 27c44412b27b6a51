// Viterbi over one sentence, compiled once per ISA: crf_{scalar,avx2,avx512}.cpp include this
// with their own -m flags and FB_ISA_NS. Its arithmetic is adds and compares only, each exact
// or rounded once whatever the vector width, so every ISA gives the same path; wider vectors
// only take more to-tags per instruction (LAC's 57 tags: 4 zmm against 15 xmm a from-tag).
#include <algorithm>
#include <cfloat>
#include <utility>

#include "crf_kernels.hpp"

namespace fusebridge {
namespace FB_ISA_NS {

// One sentence of len >= 1 words. Scores start at -FLT_MAX and only a strictly greater score
// replaces the best, as in Paddle's kernel: the first maximum wins, and a step where every
// score is -inf keeps tag 0.
static void viterbi(const float* x, const float* trans, int64_t len, int64_t tags, float* alpha,
                    int32_t* track, int64_t* path) {
    const float* start = trans;
    const float* end = trans + tags;
    const float* w = trans + 2 * tags;
    float* prev = alpha;
    float* cur = alpha + tags;

    for (int64_t j = 0; j < tags; ++j) prev[j] = start[j] + x[j];
    for (int64_t k = 1; k < len; ++k) {
        int32_t* __restrict back = track + k * tags;
        float* __restrict best = cur;
        std::fill(best, best + tags, -FLT_MAX);
        std::fill(back, back + tags, 0);
        // From-tag outer, to-tag inner: each row of w is read once, contiguously, and the inner
        // loop is a branch-free add, compare and blend across to-tags that vectorizes.
        for (int64_t i = 0; i < tags; ++i) {
            const float a = prev[i];
            const int32_t from = int32_t(i);
            const float* __restrict wi = w + i * tags;
            for (int64_t j = 0; j < tags; ++j) {
                const float s = a + wi[j], b = best[j];
                // A mask, not `better ? from : back[j]`: GCC's vectorizer gives up on the
                // latter as a conditional store.
                const int32_t better = -int32_t(s > b);
                best[j] = s > b ? s : b;
                back[j] = (from & better) | (back[j] & ~better);
            }
        }
        const float* xk = x + k * tags;
        for (int64_t j = 0; j < tags; ++j) best[j] += xk[j];
        std::swap(prev, cur);
    }

    float top = -FLT_MAX;
    int32_t tag = 0;
    for (int64_t j = 0; j < tags; ++j) {
        const float s = prev[j] + end[j];
        if (s > top) top = s, tag = int32_t(j);
    }
    path[len - 1] = tag;
    for (int64_t k = len - 1; k > 0; --k) path[k - 1] = tag = track[k * tags + tag];
}

}  // namespace FB_ISA_NS

const CrfKernels& FB_CRF_KERNELS_FN() {
    static const CrfKernels k{FB_ISA_NS::viterbi};
    return k;
}

}  // namespace fusebridge
