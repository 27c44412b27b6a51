#include "crf_decoding.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>
#include "aligned.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "parallel.hpp"
#include "runtime.hpp"

namespace fusebridge {

namespace {

// Below this many add-compares in all, waking a second thread costs more than it saves.
constexpr double kMinWorkPerThread = 1 << 16;

// Work memory, kept between calls on the calling thread and sized before the parallel_for
// (an exception, bad_alloc included, must not escape a part). Each thread's slot gets its own
// slices, in whole cache lines so that no two threads write the same line.
struct Scratch {
    AlignedVector<float> alpha;    // [threads, 2 * tags rounded up]: the previous and current step
    AlignedVector<int32_t> track;  // [threads, longest * tags rounded up]: the back pointers
};

constexpr int64_t kLine = 64 / sizeof(float);  // 4-byte elements (float, int32) per line

int64_t whole_lines(int64_t n) { return (n + kLine - 1) / kLine * kLine; }

void check(const CrfDecodingArgs& a) {
    const char* op = "crf_decoding";
    if (a.tags < 1 || a.tags > INT32_MAX) fail(op, "tags must lie in [1, 2**31)");
    if (a.transition_rows != a.tags + 2 || a.transition_cols != a.tags)
        fail(op, "transition must be [tags + 2, tags] for " + std::to_string(a.tags) + " tags");
    check_offsets(a.offsets, a.offsets_size, a.words, op);
    if (a.label && a.label_size != a.words) fail(op, "label must hold one entry per word");
    if (a.path_size != a.words) fail(op, "path must hold one entry per word");
}

}  // namespace

void crf_decoding(const CrfDecodingArgs& a) {
    check(a);
    const int64_t n = a.offsets_size - 1;
    const double work = double(a.words) * double(a.tags) * double(a.tags);
    const int nt = std::max(1, int(std::min<double>({double(max_threads()), double(n),
                                                     work / kMinWorkPerThread})));
    int64_t longest = 0;
    for (int64_t s = 0; s < n; ++s) longest = std::max(longest, a.offsets[s + 1] - a.offsets[s]);
    const int64_t alpha_stride = whole_lines(2 * a.tags);
    // longest * tags <= the emission's elements; the thread count multiplies it, so checked.
    const int64_t track_stride = whole_lines(longest * a.tags);
    thread_local Scratch sc;
    float* alpha =
        at_least(sc.alpha, size_t(mul_size(nt, alpha_stride, "crf_decoding", "scratch")));
    int32_t* track =
        at_least(sc.track, size_t(mul_size(nt, track_stride, "crf_decoding", "scratch")));

    // Sentences are independent and their lengths differ: each is a part of its own, taken by
    // whichever thread is free (dynamic scheduling balances them); t: that thread's scratch.
    const auto viterbi = crf_kernels_for(current_isa()).viterbi;
    parallel_for(n, nt, [&](int64_t s, int t) {
        const int64_t begin = a.offsets[s], len = a.offsets[s + 1] - begin;
        if (len == 0) return;
        int64_t* path = a.path + begin;
        viterbi(a.emission + begin * a.tags, a.transition, len, a.tags, alpha + t * alpha_stride,
                track + t * track_stride, path);
        if (a.label)
            for (int64_t k = 0; k < len; ++k) path[k] = path[k] == a.label[begin + k] ? 1 : 0;
    });
}

}  // namespace fusebridge
