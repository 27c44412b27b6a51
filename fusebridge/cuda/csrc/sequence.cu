// LoD sequence kernels on the GPU: Viterbi decoding of a linear-chain CRF per sentence
// (Paddle's crf_decoding, bit for bit with the cpu kernel kernels/csrc/crf_decoding.cpp), and
// the reorders between LoD words and padded batches (kernels/sequence_layout.py).
//
// Every kernel loops grid-stride over whole warps, so any grid and any block of a multiple of
// 32 threads gives the same result. None uses shared memory: the scratch a sentence needs is
// device memory the caller allocates, sized by the arguments.
#include "common.cuh"

namespace fusebridge {
namespace cuda {
namespace sequence {

// -FLT_MAX (NVRTC has no <cfloat>): where the cpu kernel's maxima start.
constexpr float kLowest = -3.40282347e+38f;

// One sentence of len >= 1 words x [len, tags], by one warp: lane l takes to-tags l, l + 32, ...
// alpha [2, tags] holds the previous and the current step's scores, in device memory so that
// any number of tags fits (no register array or static shared buffer bounds them); track
// [len, tags] the back pointers (row 0 unused). With a label, path is 1 where the tag equals
// it and 0 elsewhere.
__device__ __forceinline__ void viterbi(const float* __restrict__ x,
                                        const float* __restrict__ trans, int64_t len,
                                        int64_t tags, float* alpha, int* track,
                                        const int64_t* label, int64_t* path) {
    const int lane = threadIdx.x & 31;
    const float* start = trans;
    const float* end = trans + tags;
    const float* w = trans + 2 * tags;
    float* prev = alpha;
    float* cur = alpha + tags;
    for (int64_t j = lane; j < tags; j += 32) prev[j] = start[j] + x[j];
    __syncwarp();  // every prev[j] written before any lane reads it
    for (int64_t k = 1; k < len; ++k) {
        const float* xk = x + k * tags;
        int* back = track + k * tags;
        for (int64_t j = lane; j < tags; j += 32) {
            // The cpu kernel's order for each to-tag: from-tags ascending, and only a strictly
            // greater score replaces the best, so the first maximum wins and a column of -inf
            // (or NaN) keeps tag 0 at -FLT_MAX. prev[i] is the same address in every lane (a
            // broadcast), w's row i is read across the lanes (coalesced).
            float best = kLowest;
            int from = 0;
            for (int64_t i = 0; i < tags; ++i) {
                const float s = prev[i] + w[i * tags + j];
                if (s > best) best = s, from = int(i);
            }
            cur[j] = best + xk[j];
            back[j] = from;
        }
        // cur whole before it is read as prev, and prev read by every lane before the next
        // step writes over it.
        __syncwarp();
        float* t = prev;
        prev = cur;
        cur = t;
    }
    // The best last tag and the walk back are one chain of dependent reads: one lane's.
    if (lane != 0) return;
    float top = kLowest;
    int tag = 0;
    for (int64_t j = 0; j < tags; ++j) {
        const float s = prev[j] + end[j];
        if (s > top) top = s, tag = int(j);
    }
    path[len - 1] = label ? int64_t(tag == label[len - 1]) : tag;
    for (int64_t k = len - 1; k > 0; --k) {
        tag = track[k * tags + tag];
        path[k - 1] = label ? int64_t(tag == label[k - 1]) : tag;
    }
}

// The reorders' shape: n sentences of offsets [n + 1], t steps; ntc: padded is [N, T, ...]
// (else [T, N, ...]); left: the padding comes before each sentence (else after it). A word is
// `row` units of the copy; `total` units are written.
struct Layout {
    const int64_t* offsets;
    int64_t n, t, row, total;
    bool ntc, left;
};

// Element e (in units of U) of dst: with kToLod, LoD word data from its step in the padded
// batch; else padded data from its word, or zero in the padding.
template <typename U, bool kToLod>
__device__ __forceinline__ void reorder(const U* __restrict__ src, U* __restrict__ dst,
                                        const Layout g) {
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
    const int lane = threadIdx.x & 31;
    for (int64_t w = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
         w * 32 < g.total; w += warps) {
        const int64_t e = w * 32 + lane;
        if (e >= g.total) break;
        const int64_t r = e / g.row, c = e - r * g.row;  // dst's row, and the unit in it
        if (kToLod) {
            // Word r's sentence: the last s with offsets[s] <= r, which then ends after r (so
            // it is not empty); offsets[0] = 0 <= r < offsets[n] = words bound the search.
            int64_t s = 0, hi = g.n;
            while (hi - s > 1) {
                const int64_t mid = s + (hi - s) / 2;
                if (g.offsets[mid] <= r) {
                    s = mid;
                } else {
                    hi = mid;
                }
            }
            const int64_t begin = g.offsets[s], len = g.offsets[s + 1] - begin;
            const int64_t step = r - begin + (g.left ? g.t - len : 0);
            const int64_t p = g.ntc ? s * g.t + step : step * g.n + s;
            dst[e] = src[p * g.row + c];
        } else {
            int64_t s, step;
            if (g.ntc) {
                s = r / g.t, step = r - s * g.t;
            } else {
                step = r / g.n, s = r - step * g.n;
            }
            const int64_t begin = g.offsets[s], len = g.offsets[s + 1] - begin;
            const int64_t k = g.left ? step - (g.t - len) : step;  // its word, if it has one
            dst[e] = k >= 0 && k < len ? src[(begin + k) * g.row + c] : U();
        }
    }
}

// The copy in units of `unit` bytes: 16, 8, 4, 2 or 1, the widest that divides a row and both
// arrays' alignment (the caller's choice), so that wide rows move as 16-byte accesses.
template <bool kToLod>
__device__ __forceinline__ void reorder_units(const void* src, void* dst, const Layout g,
                                              int unit) {
    switch (unit) {
    case 16:
        reorder<uint4, kToLod>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), g);
        break;
    case 8:
        reorder<uint2, kToLod>(static_cast<const uint2*>(src), static_cast<uint2*>(dst), g);
        break;
    case 4:
        reorder<uint32_t, kToLod>(static_cast<const uint32_t*>(src),
                                  static_cast<uint32_t*>(dst), g);
        break;
    case 2:
        reorder<uint16_t, kToLod>(static_cast<const uint16_t*>(src),
                                  static_cast<uint16_t*>(dst), g);
        break;
    default:
        reorder<uint8_t, kToLod>(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst),
                                 g);
    }
}

}  // namespace sequence
}  // namespace cuda
}  // namespace fusebridge

// Each sentence of offsets [sentences + 1] by one warp (grid-stride). alpha: [sentences, 2,
// tags] floats; track: [words, tags] ints; label null or [words].
extern "C" __global__ void __launch_bounds__(256)
    crf_decoding(const float* __restrict__ emission, const float* __restrict__ transition,
                 const int64_t* __restrict__ offsets, int64_t sentences, int64_t tags,
                 const int64_t* __restrict__ label, int64_t* __restrict__ path, float* alpha,
                 int* track) {
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
    for (int64_t s = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; s < sentences;
         s += warps) {
        const int64_t begin = offsets[s], len = offsets[s + 1] - begin;
        if (len == 0) continue;
        fusebridge::cuda::sequence::viterbi(emission + begin * tags, transition, len, tags,
                                            alpha + s * 2 * tags, track + begin * tags,
                                            label ? label + begin : nullptr, path + begin);
    }
}

// The reorders: see Layout for the arguments.
extern "C" __global__ void __launch_bounds__(256)
    lod_to_padded(const void* x, void* padded, const int64_t* offsets, int64_t n, int64_t t,
                  int64_t row, int64_t total, int ntc, int left, int unit) {
    const fusebridge::cuda::sequence::Layout g{offsets, n, t, row, total, ntc != 0, left != 0};
    fusebridge::cuda::sequence::reorder_units<false>(x, padded, g, unit);
}

extern "C" __global__ void __launch_bounds__(256)
    padded_to_lod(const void* padded, void* y, const int64_t* offsets, int64_t n, int64_t t,
                  int64_t row, int64_t total, int ntc, int left, int unit) {
    const fusebridge::cuda::sequence::Layout g{offsets, n, t, row, total, ntc != 0, left != 0};
    fusebridge::cuda::sequence::reorder_units<true>(padded, y, g, unit);
}
