// Standalone dropout on the GPU, the bit contract of docs/dropout.md: local element i draws
// Philox word (seed, offset, idx) with idx = the map of i into the whole tensor's mask.
//
// Work is split by groups of 4 consecutive local elements (one Philox block when their
// indices are 4-aligned and contiguous, the common case), in a grid-stride loop whose
// iterations are whole warps: 8 lanes' nibbles make one 32-bit mask word. So any grid and any
// block of a multiple of 32 threads give the same bits.
#include "common.cuh"

using namespace fusebridge;
using namespace fusebridge::cuda;

namespace {

// Groups of 4 elements a lane has in flight, and the blocks of 256 threads an SM should hold
// (which caps the registers at 64); overridable at compile time to time variants
// (gpu_bench.tune). On an H100 (docs/cuda.md) 2 and 4 beat 1, 4 and 8 in flight with 2 or 3
// blocks: the Philox arithmetic needs the occupancy more than deeper loads do.
#ifndef FB_UNROLL
#define FB_UNROLL 2
#endif
#ifndef FB_MIN_BLOCKS
#define FB_MIN_BLOCKS 4
#endif
constexpr int kUnroll = FB_UNROLL;

template <int DT>
__device__ __forceinline__ void load4(const typename Storage<DT>::type* x, int64_t i, int64_t n,
                                      bool vec, float v[4]) {
    typedef typename Storage<DT>::type T;
    if (vec && i + 3 < n) {
        if (DT == kF32) {
            const float4 q = *reinterpret_cast<const float4*>(x + i);
            v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        } else {
            const uint2 q = *reinterpret_cast<const uint2*>(x + i);
            v[0] = Storage<DT>::load(T(q.x & 0xFFFFu)), v[1] = Storage<DT>::load(T(q.x >> 16));
            v[2] = Storage<DT>::load(T(q.y & 0xFFFFu)), v[3] = Storage<DT>::load(T(q.y >> 16));
        }
        return;
    }
    for (int j = 0; j < 4; ++j) v[j] = i + j < n ? Storage<DT>::load(x[i + j]) : 0.0f;
}

template <int DT>
__device__ __forceinline__ void store4(typename Storage<DT>::type* y, int64_t i, int64_t n,
                                       bool vec, const float v[4]) {
    typedef typename Storage<DT>::type T;
    if (vec && i + 3 < n) {
        if (DT == kF32) {
            *reinterpret_cast<float4*>(y + i) = make_float4(v[0], v[1], v[2], v[3]);
        } else {
            uint2 q;
            q.x = uint32_t(Storage<DT>::store(v[0])) | (uint32_t(Storage<DT>::store(v[1])) << 16);
            q.y = uint32_t(Storage<DT>::store(v[2])) | (uint32_t(Storage<DT>::store(v[3])) << 16);
            *reinterpret_cast<uint2*>(y + i) = q;
        }
        return;
    }
    for (int j = 0; j < 4; ++j)
        if (i + j < n) y[i + j] = Storage<DT>::store(v[j]);
}

// y = dropout(x (+ bias[i % bias_n])) over n local elements, keep bits to `mask` (32-bit words,
// may be null). x == y == null generates the mask alone (n counts mask elements then). `vec`:
// x and y start on 4-element boundaries, so a group loads and stores as one access.
//
// A warp's iteration covers kUnroll rows of 32 groups; a lane loads its kUnroll groups before
// it computes any, so that several 16-byte loads per thread are in flight: one would leave
// the memory system idle between a load and the stores that follow it.
template <int DT>
__device__ __forceinline__ void dropout_forward(const typename Storage<DT>::type* x,
                                                typename Storage<DT>::type* y, uint32_t* mask,
                                                int64_t n, IndexMap map, const float* bias,
                                                int64_t bias_n, Stream stream, uint32_t threshold,
                                                int rule, float scale, bool vec) {
    KeepBits bits = keep_bits(stream, threshold, rule);
    // The identity map from a 4-aligned base: a group's indices are one Philox block's.
    const bool aligned = map.nd == 0 && (map.base & 3) == 0;
    const int64_t groups = (n + 3) / 4, nwords = (n + 31) / 32;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
    const int lane = threadIdx.x & 31;
    for (int64_t w = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
         w * 32 * kUnroll < groups; w += warps) {
        float v[kUnroll][4];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t g = (w * kUnroll + u) * 32 + lane;
            if (x && g < groups) load4<DT>(x, 4 * g, n, vec, v[u]);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t g = (w * kUnroll + u) * 32 + lane, i = 4 * g;
            uint32_t nibble = 0;
            if (g < groups) {
                if (aligned) {
                    nibble = bits.nibble(uint64_t(map.base + i));
                } else {
                    for (int j = 0; j < 4 && i + j < n; ++j)
                        nibble |= uint32_t(bits.keep(uint64_t(map_index(map, i + j)))) << j;
                }
                nibble &= valid_nibble(i, n);
                if (x) {
                    int64_t col = bias ? i % bias_n : 0;  // one division a group
                    for (int j = 0; j < 4; ++j) {
                        float in = v[u][j];
                        if (bias && i + j < n) {
                            in += bias[col];
                            col = col + 1 == bias_n ? 0 : col + 1;
                        }
                        v[u][j] = (nibble >> j) & 1 ? in * scale : 0.0f;
                    }
                    store4<DT>(y, i, n, vec, v[u]);
                }
            }
            if (mask) store_nibbles(mask, nwords, g, nibble);
        }
    }
}

// y = x * scale where the local packed mask keeps, 0 elsewhere; element i reads mask bit
// map(i) (the identity, or 0 strides on the axes over which the mask is shared). Loads are
// issued kUnroll groups ahead, as in dropout_forward.
template <int DT>
__device__ __forceinline__ void dropout_apply(const typename Storage<DT>::type* x,
                                              typename Storage<DT>::type* y, const uint8_t* mask,
                                              int64_t n, IndexMap map, float scale, bool vec) {
    const int64_t groups = (n + 3) / 4;
    const int64_t threads = int64_t(gridDim.x) * blockDim.x;
    for (int64_t g0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g0 < groups;
         g0 += threads * kUnroll) {
        float v[kUnroll][4];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t g = g0 + u * threads;
            if (g < groups) load4<DT>(x, 4 * g, n, vec, v[u]);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int64_t g = g0 + u * threads, i = 4 * g;
            if (g >= groups) break;
            // The identity map reads the group's 4 bits with one byte load.
            const uint32_t nibble = map.nd == 0 ? (mask[i >> 3] >> (i & 4)) & 0xFu : 0u;
            for (int j = 0; j < 4 && i + j < n; ++j) {
                int64_t b = i + j;
                bool keep = (nibble >> j) & 1;
                if (map.nd != 0) {
                    b = map_index(map, i + j);
                    keep = (mask[b >> 3] >> (b & 7)) & 1;
                }
                v[u][j] = keep ? v[u][j] * scale : 0.0f;
            }
            store4<DT>(y, i, n, vec, v[u]);
        }
    }
}

}  // namespace

#define FB_KERNEL extern "C" __global__ void __launch_bounds__(256, FB_MIN_BLOCKS)
#define FB_DROPOUT_KERNELS(SUFFIX, DT)                                                         \
    FB_KERNEL dropout_forward_##SUFFIX(                                                        \
        const Storage<DT>::type* x, Storage<DT>::type* y, uint32_t* mask, int64_t n,           \
        int64_t map_base, int map_nd, const int64_t* map_dims, const float* bias,              \
        int64_t bias_n, uint64_t seed, uint64_t offset, const uint64_t* seed_ptr,              \
        const uint64_t* offset_ptr, uint32_t threshold, int rule, float scale, int vec) {      \
        dropout_forward<DT>(x, y, mask, n, IndexMap{map_base, map_nd, map_dims}, bias, bias_n, \
                            read_stream(seed, offset, seed_ptr, offset_ptr), threshold, rule,  \
                            scale, vec != 0);                                                  \
    }                                                                                          \
    FB_KERNEL dropout_apply_##SUFFIX(                                                          \
        const Storage<DT>::type* x, Storage<DT>::type* y, const uint8_t* mask, int64_t n,      \
        int map_nd, const int64_t* map_dims, float scale, int vec) {                           \
        dropout_apply<DT>(x, y, mask, n, IndexMap{0, map_nd, map_dims}, scale, vec != 0);      \
    }

FB_DROPOUT_KERNELS(f32, kF32)
FB_DROPOUT_KERNELS(f16, kF16)
FB_DROPOUT_KERNELS(bf16, kBF16)
