// softmax along an axis with dropout in the same pass, and its backward; float32.
//
// The tensor is [outer, L, inner] around the softmax axis (L long); each warp takes whole rows
// (grid-stride, so any grid works), 4 consecutive elements of a row per lane. Rows of up to
// 512 elements (attention's rows) are read once into registers, all their loads in
// flight together, and written once: one pass over memory. Longer rows stream: the maximum
// and sum from one online pass (Milakov and Gimelshein, "Online normalizer calculation for
// softmax", 2018), then the output pass reads the row again. Element q (the local flat index)
// keeps by Philox word map(q), as `dropout` of the softmax would.
#include "common.cuh"

using namespace fusebridge;
using namespace fusebridge::cuda;

namespace {

// -infinity, without a math header NVRTC may lack.
#define FB_NEG_INF bits_to_float(0xFF800000u)

// Chunks of 128 elements a warp holds in registers: rows up to 512 (forward and backward,
// which holds two rows: dy and P).
// Overridable at compile time to time variants (gpu_bench.tune), as are the blocks of 256
// threads an SM should hold (which cap the registers). On an H100 (docs/cuda.md) rows of 512
// run fastest held whole with 3 blocks forward (80 registers) and 2 backward (two rows held):
// holding 1024 forward needs 128 registers, and the occupancy lost costs more than the
// second read of longer rows.
#ifndef FB_CACHED
#define FB_CACHED 4
#endif
#ifndef FB_CACHED_BACKWARD
#define FB_CACHED_BACKWARD 4
#endif
#ifndef FB_MIN_BLOCKS
#define FB_MIN_BLOCKS 3
#endif
#ifndef FB_MIN_BLOCKS_BACKWARD
#define FB_MIN_BLOCKS_BACKWARD 2
#endif
constexpr int kCached = FB_CACHED;
constexpr int kCachedBackward = FB_CACHED_BACKWARD;

// Elements l .. l + 3 of the row starting at `base` (stride `inner`), 0 past the row's end.
__device__ __forceinline__ void load_row4(const float* p, int64_t base, int64_t l, int64_t len,
                                          int64_t inner, bool vec, float v[4]) {
    if (vec && l + 3 < len) {
        const float4 q = *reinterpret_cast<const float4*>(p + base + l);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        return;
    }
    for (int j = 0; j < 4; ++j) v[j] = l + j < len ? p[base + (l + j) * inner] : 0.0f;
}

__device__ __forceinline__ void store_row4(float* p, int64_t base, int64_t l, int64_t len,
                                           int64_t inner, bool vec, const float v[4]) {
    if (vec && l + 3 < len) {
        *reinterpret_cast<float4*>(p + base + l) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
    for (int j = 0; j < 4; ++j)
        if (l + j < len) p[base + (l + j) * inner] = v[j];
}

// (max, sum of exp(x - max)) of a row, the same in every lane of the warp.
__device__ __forceinline__ void row_normalizer(const float* x, int64_t base, int64_t len,
                                               int64_t inner, bool vec, float& m, float& s) {
    const int lane = threadIdx.x & 31;
    m = FB_NEG_INF, s = 0.0f;
    for (int64_t l0 = 0; l0 < len; l0 += 128) {
        const int64_t l = l0 + 4 * lane;
        float v[4];
        load_row4(x, base, l, len, inner, vec, v);
        for (int j = 0; j < 4 && l + j < len; ++j) {
            if (v[j] == FB_NEG_INF) continue;  // adds exp(-inf) = 0, and -inf - -inf is NaN
            if (v[j] > m) {
                s = s * expf(m - v[j]) + 1.0f;
                m = v[j];
            } else {
                s += expf(v[j] - m);
            }
        }
    }
    for (int d = 16; d > 0; d /= 2) {
        const float m2 = __shfl_xor_sync(0xFFFFFFFFu, m, d);
        const float s2 = __shfl_xor_sync(0xFFFFFFFFu, s, d);
        const float mn = fmaxf(m, m2);
        s = (m == FB_NEG_INF ? 0.0f : s * expf(m - mn)) +
            (m2 == FB_NEG_INF ? 0.0f : s2 * expf(m2 - mn));
        m = mn;
    }
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, d);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, d));
    return v;
}

// The keep bits of a lane's 4 elements into the zeroed mask (32-bit words). Along a
// contiguous row (inner == 1) 8 lanes make 32 consecutive bits; strided rows set bit by bit.
// Every lane of the warp must call this.
__device__ __forceinline__ void store_row_bits(uint32_t* mask, int64_t base, int64_t l,
                                               int64_t inner, uint32_t nibble) {
    const int lane = threadIdx.x & 31;
    if (inner == 1) {
        uint32_t v = nibble << (4 * (lane & 7));
        v |= __shfl_xor_sync(0xFFFFFFFFu, v, 1);
        v |= __shfl_xor_sync(0xFFFFFFFFu, v, 2);
        v |= __shfl_xor_sync(0xFFFFFFFFu, v, 4);
        if ((lane & 7) == 0) or_bits32(mask, base + l, v);
        return;
    }
    for (int j = 0; j < 4; ++j)
        if ((nibble >> j) & 1) {
            const int64_t q = base + (l + j) * inner;
            atomicOr(&mask[q >> 5], 1u << (q & 31));
        }
}

// The keep bits of row elements l .. l + 3 (0 past the row's end): from the local packed
// mask when given, else drawn. `aligned`: the row is contiguous (inner == 1) and its indices,
// local and global, start on a multiple of 4, so the 4 are one mask nibble or one Philox
// block.
__device__ __forceinline__ uint32_t row_nibble(const uint8_t* mask, const KeepBits& bits,
                                               const IndexMap& map, int64_t base, int64_t l,
                                               int64_t len, int64_t inner, bool aligned) {
    if (l >= len) return 0u;  // a lane past the row's end reads no mask byte
    uint32_t nibble = 0;
    const int64_t q = base + l * inner;
    if (aligned) {
        nibble = mask ? (mask[q >> 3] >> (q & 4)) & 0xFu : bits.nibble(uint64_t(map.base + q));
    } else {
        KeepBits draw = bits;
        for (int j = 0; j < 4 && l + j < len; ++j) {
            const int64_t qj = q + j * inner;
            const bool keep = mask ? (mask[qj >> 3] >> (qj & 7)) & 1
                                   : draw.keep(uint64_t(map_index(map, qj)));
            nibble |= uint32_t(keep) << j;
        }
    }
    return nibble & valid_nibble(l, len);
}

// e[j] = exp(x - max) of row elements l .. l + 3 becomes dropout(e * inv); returns the keep
// bits.
__device__ __forceinline__ uint32_t drop_chunk(const KeepBits& bits, const IndexMap& map,
                                               int64_t base, int64_t l, int64_t len,
                                               int64_t inner, bool aligned, float inv,
                                               float scale, float e[4]) {
    const uint32_t nibble = row_nibble(nullptr, bits, map, base, l, len, inner, aligned);
    for (int j = 0; j < 4; ++j) e[j] = (nibble >> j) & 1 ? e[j] * inv * scale : 0.0f;
    return nibble;
}

// What both kernels derive from the arguments they share: the rows around the axis, the map
// of local to global indices, the keep bits, and the grid-stride walk of a warp over rows.
struct Rows {
    int64_t len, inner;
    IndexMap map;
    bool aligned;  // rows start on multiples of 4 (row_nibble): a chunk is one nibble or block
    KeepBits bits;

    __device__ __forceinline__ Rows(int64_t len_, int64_t inner_, int64_t map_base, int map_nd,
                                    const int64_t* map_dims, uint64_t seed, uint64_t offset,
                                    const uint64_t* seed_ptr, const uint64_t* offset_ptr,
                                    uint32_t threshold, int rule)
        : len(len_),
          inner(inner_),
          map{map_base, map_nd, map_dims},
          aligned(inner_ == 1 && len_ % 4 == 0 && map_nd == 0 && map_base % 4 == 0),
          bits(keep_bits(read_stream(seed, offset, seed_ptr, offset_ptr), threshold, rule)) {}

    __device__ __forceinline__ int64_t base(int64_t r) const {
        return (r / inner) * len * inner + r % inner;
    }
    __device__ __forceinline__ static int64_t first() {
        return int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    }
    __device__ __forceinline__ static int64_t step() {
        return int64_t(gridDim.x) * (blockDim.x / 32);
    }
};

}  // namespace

// y = dropout(softmax(x)); the keep bits also go to `mask` (zeroed 32-bit words) when given.
extern "C" __global__ void __launch_bounds__(256, FB_MIN_BLOCKS)
softmax_dropout_forward(
    const float* x, float* y, uint32_t* mask, int64_t rows, int64_t len, int64_t inner,
    int64_t map_base, int map_nd, const int64_t* map_dims, uint64_t seed, uint64_t offset,
    const uint64_t* seed_ptr, const uint64_t* offset_ptr, uint32_t threshold, int rule,
    float scale, int vec) {
    const Rows shape(len, inner, map_base, map_nd, map_dims, seed, offset, seed_ptr, offset_ptr,
                     threshold, rule);
    const IndexMap& map = shape.map;
    const KeepBits& bits = shape.bits;
    const bool aligned = shape.aligned;
    const int lane = threadIdx.x & 31;
    for (int64_t r = Rows::first(); r < rows; r += Rows::step()) {
        const int64_t base = shape.base(r);
        if (len <= kCached * 128) {
            float v[kCached][4];
#pragma unroll
            for (int c = 0; c < kCached; ++c)
                if (c * 128 < len)
                    load_row4(x, base, c * 128 + 4 * lane, len, inner, vec != 0, v[c]);
            float m = FB_NEG_INF, s = 0.0f;
#pragma unroll
            for (int c = 0; c < kCached; ++c)
                for (int j = 0; j < 4; ++j)
                    if (c * 128 + 4 * lane + j < len) m = fmaxf(m, v[c][j]);
            m = warp_max(m);
#pragma unroll
            for (int c = 0; c < kCached; ++c)
                for (int j = 0; j < 4; ++j) {
                    const bool in = c * 128 + 4 * lane + j < len;
                    v[c][j] = in ? expf(v[c][j] - m) : 0.0f;
                    s += v[c][j];
                }
            const float inv = 1.0f / warp_sum(s);
#pragma unroll
            for (int c = 0; c < kCached; ++c)
                if (c * 128 < len) {
                    const int64_t l = c * 128 + 4 * lane;
                    const uint32_t nibble =
                        drop_chunk(bits, map, base, l, len, inner, aligned, inv, scale, v[c]);
                    store_row4(y, base, l, len, inner, vec != 0, v[c]);
                    if (mask) store_row_bits(mask, base, l, inner, nibble);
                }
            continue;
        }
        float m, s;
        row_normalizer(x, base, len, inner, vec != 0, m, s);
        const float inv = 1.0f / s;
        for (int64_t l0 = 0; l0 < len; l0 += 128) {
            const int64_t l = l0 + 4 * lane;
            float v[4];
            load_row4(x, base, l, len, inner, vec != 0, v);
            for (int j = 0; j < 4; ++j) v[j] = expf(v[j] - m);
            const uint32_t nibble =
                drop_chunk(bits, map, base, l, len, inner, aligned, inv, scale, v);
            store_row4(y, base, l, len, inner, vec != 0, v);
            if (mask) store_row_bits(mask, base, l, inner, nibble);
        }
    }
}

// dx = P * (g - sum(g * P)) with g = dy * keep * scale and P = softmax(x) recomputed from x
// (from_x) or read from `src` = probs. The bits come from the local packed mask when given,
// else from Philox (seed, offset). dx may be dy itself: a row is read whole before written.
extern "C" __global__ void __launch_bounds__(256, FB_MIN_BLOCKS_BACKWARD)
softmax_dropout_backward(
    const float* dy, const float* src, int from_x, const uint8_t* mask, float* dx, int64_t rows,
    int64_t len, int64_t inner, int64_t map_base, int map_nd, const int64_t* map_dims,
    uint64_t seed, uint64_t offset, const uint64_t* seed_ptr, const uint64_t* offset_ptr,
    uint32_t threshold, int rule, float scale, int vec) {
    const Rows shape(len, inner, map_base, map_nd, map_dims, seed, offset, seed_ptr, offset_ptr,
                     threshold, rule);
    const IndexMap& map = shape.map;
    const KeepBits& bits = shape.bits;
    const bool aligned = shape.aligned;
    const int lane = threadIdx.x & 31;
    for (int64_t r = Rows::first(); r < rows; r += Rows::step()) {
        const int64_t base = shape.base(r);
        if (len <= kCachedBackward * 128) {
            float g[kCachedBackward][4], p[kCachedBackward][4];
#pragma unroll
            for (int c = 0; c < kCachedBackward; ++c)
                if (c * 128 < len) {
                    load_row4(dy, base, c * 128 + 4 * lane, len, inner, vec != 0, g[c]);
                    load_row4(src, base, c * 128 + 4 * lane, len, inner, vec != 0, p[c]);
                }
            if (from_x) {  // P = softmax(x), as the forward computes it
                float m = FB_NEG_INF, s = 0.0f;
#pragma unroll
                for (int c = 0; c < kCachedBackward; ++c)
                    for (int j = 0; j < 4; ++j)
                        if (c * 128 + 4 * lane + j < len) m = fmaxf(m, p[c][j]);
                m = warp_max(m);
#pragma unroll
                for (int c = 0; c < kCachedBackward; ++c)
                    for (int j = 0; j < 4; ++j) {
                        p[c][j] = c * 128 + 4 * lane + j < len ? expf(p[c][j] - m) : 0.0f;
                        s += p[c][j];
                    }
                const float inv = 1.0f / warp_sum(s);
#pragma unroll
                for (int c = 0; c < kCachedBackward; ++c)
                    for (int j = 0; j < 4; ++j) p[c][j] *= inv;
            }
            float dot = 0.0f;
#pragma unroll
            for (int c = 0; c < kCachedBackward; ++c) {
                const int64_t l = c * 128 + 4 * lane;
                const uint32_t nibble =
                    c * 128 < len ? row_nibble(mask, bits, map, base, l, len, inner, aligned) : 0u;
                for (int j = 0; j < 4; ++j) {
                    g[c][j] = (nibble >> j) & 1 ? g[c][j] * scale : 0.0f;
                    dot += g[c][j] * p[c][j];
                }
            }
            dot = warp_sum(dot);
#pragma unroll
            for (int c = 0; c < kCachedBackward; ++c)
                if (c * 128 < len) {
                    for (int j = 0; j < 4; ++j) g[c][j] = p[c][j] * (g[c][j] - dot);
                    store_row4(dx, base, c * 128 + 4 * lane, len, inner, vec != 0, g[c]);
                }
            continue;
        }
        float m = 0.0f, inv = 1.0f;
        if (from_x) {
            float s;
            row_normalizer(src, base, len, inner, vec != 0, m, s);
            inv = 1.0f / s;
        }
        // g and P of 4 elements; P from x or probs.
        auto grad = [&](int64_t l, float g[4], float p[4]) {
            load_row4(dy, base, l, len, inner, vec != 0, g);
            load_row4(src, base, l, len, inner, vec != 0, p);
            const uint32_t nibble = row_nibble(mask, bits, map, base, l, len, inner, aligned);
            for (int j = 0; j < 4; ++j) {
                g[j] = (nibble >> j) & 1 ? g[j] * scale : 0.0f;
                if (from_x) p[j] = expf(p[j] - m) * inv;
            }
        };
        float dot = 0.0f;
        for (int64_t l0 = 0; l0 < len; l0 += 128) {
            const int64_t l = l0 + 4 * lane;
            float g[4], p[4];
            grad(l, g, p);
            for (int j = 0; j < 4 && l + j < len; ++j) dot += g[j] * p[j];
        }
        dot = warp_sum(dot);
        for (int64_t l0 = 0; l0 < len; l0 += 128) {
            const int64_t l = l0 + 4 * lane;
            float g[4], p[4];
            grad(l, g, p);
            for (int j = 0; j < 4; ++j) g[j] = p[j] * (g[j] - dot);
            store_row4(dx, base, l, len, inner, vec != 0, g);
        }
    }
}
