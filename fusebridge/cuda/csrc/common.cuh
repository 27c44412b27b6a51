// What the CUDA kernels share: index maps, 16-bit float conversions, the dropout decision and
// the packing of keep bits into the LSB-first mask. NVRTC compiles it for the GPU; the tests'
// CPU emulation compiles it unchanged with g++, so nothing here may depend on either.
#pragma once
#include "philox.hpp"  // the CPU build's own header: the same bits on both engines

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
#endif

// A kernel's dynamic shared memory (the launch's shared_bytes), as a pointer `name` to T. The
// emulator defines its own before this header: there each block has a buffer of its own.
#ifndef FB_DYNAMIC_SHARED
#define FB_DYNAMIC_SHARED(T, name) \
    extern __shared__ __align__(16) unsigned char fb_dynamic_shared_[]; \
    T* name = reinterpret_cast<T*>(fb_dynamic_shared_)
#endif

namespace fusebridge {
namespace cuda {

constexpr int kMaxDims = 8;
// Keep rules of a dropout (the CPU primitive's Keep): draw bits, keep all, keep none.
enum KeepRule { kKeepSome = 0, kKeepAll = 1, kKeepNone = 2 };
// Data types by the codes of fusebridge.kernels.arguments.FLOAT_DTYPES.
enum DataType { kF32 = 0, kF16 = 2, kBF16 = 3 };

// Maps a local linear index i (row-major over `len`) to base + sum(coord_d * stride_d).
// nd == 0 is the identity plus base, the common case, with no division at all. The map lives
// in device memory (len[0..nd), then stride[0..nd), innermost dimension first), written once
// when the primitive is created.
struct IndexMap {
    int64_t base;
    int nd;
    const int64_t* dims;
};

__device__ __forceinline__ int64_t map_index(const IndexMap& m, int64_t i) {
    if (m.nd == 0) return m.base + i;
    int64_t t = m.base;
    for (int d = 0; d < m.nd; ++d) {
        const int64_t len = m.dims[d];
        const int64_t q = i / len;
        t += (i - q * len) * m.dims[kMaxDims + d];
        i = q;
    }
    return t;
}

// ---- 16-bit floats, converted in software so that the emulation runs the same arithmetic ---

__device__ __forceinline__ float bits_to_float(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } v;
    v.u = u;
    return v.f;
}

__device__ __forceinline__ uint32_t float_to_bits(float f) {
    union {
        uint32_t u;
        float f;
    } v;
    v.f = f;
    return v.u;
}

__device__ __forceinline__ float half_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    if (exp == 0x1Fu) return bits_to_float(sign | 0x7F800000u | (man << 13));  // inf, NaN
    if (exp != 0) return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0) return bits_to_float(sign);
    // Subnormal: man * 2^-24, exact in float.
    const float f = float(man) * 5.9604644775390625e-8f;
    return sign ? -f : f;
}

// Round to nearest even, as numpy's astype(float16) and the CPU kernels' _Float16.
__device__ __forceinline__ uint16_t float_to_half(float f) {
    const uint32_t u = float_to_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
    if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds to or beyond infinity
    if (a >= 0x38800000u) {  // normal half
        const uint32_t r = a + 0xC8000FFFu + ((a >> 13) & 1u);  // rebias -112 << 23, round
        return uint16_t(sign | (r >> 13));
    }
    if (a < 0x33000001u) return uint16_t(sign);  // below half the smallest subnormal: 0
    // Subnormal half: shift the 24-bit significand right, rounding to nearest even.
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14 .. 24
    const uint32_t half_ulp = 1u << (shift - 1);
    const uint32_t rest = m & ((1u << shift) - 1u);
    uint32_t r = m >> shift;
    if (rest > half_ulp || (rest == half_ulp && (r & 1u))) ++r;
    return uint16_t(sign | r);
}

__device__ __forceinline__ float bf16_to_float(uint16_t h) {
    return bits_to_float(uint32_t(h) << 16);
}

// Round to nearest even, NaN kept quiet, as ml_dtypes and the CPU kernels.
__device__ __forceinline__ uint16_t float_to_bf16(float f) {
    uint32_t u = float_to_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

template <int DT>
struct Storage;
template <>
struct Storage<kF32> {
    typedef float type;
    __device__ __forceinline__ static float load(float v) { return v; }
    __device__ __forceinline__ static float store(float v) { return v; }
};
template <>
struct Storage<kF16> {
    typedef uint16_t type;
    __device__ __forceinline__ static float load(uint16_t v) { return half_to_float(v); }
    __device__ __forceinline__ static uint16_t store(float v) { return float_to_half(v); }
};
template <>
struct Storage<kBF16> {
    typedef uint16_t type;
    __device__ __forceinline__ static float load(uint16_t v) { return bf16_to_float(v); }
    __device__ __forceinline__ static uint16_t store(float v) { return float_to_bf16(v); }
};

// ---- the dropout decision -------------------------------------------------------------------

// Seed and offset: host scalars passed as arguments, or, where a pointer is given, a
// one-element device array read here (a captured CUDA graph then advances the offset by
// writing that array, without re-capture).
struct Stream {
    uint64_t seed, offset;
};

__device__ __forceinline__ Stream read_stream(uint64_t seed, uint64_t offset,
                                              const uint64_t* seed_ptr,
                                              const uint64_t* offset_ptr) {
    Stream s;
    s.seed = seed_ptr ? *seed_ptr : seed;
    s.offset = offset_ptr ? *offset_ptr : offset;
    return s;
}

// Word idx & 3 of the Philox block whose counter holds idx & ~3 (docs/dropout.md), computing
// a block only when that changes: consecutive indices share one block per four.
struct KeepBits {
    Stream stream;
    uint32_t threshold;
    int rule;
    uint64_t group;
    Philox4 block;

    __device__ __forceinline__ bool keep(uint64_t idx) {
        if (rule != kKeepSome) return rule == kKeepAll;
        const uint64_t g = idx & ~uint64_t(3);
        if (g != group) {
            group = g;
            block = dropout_block(stream.seed, stream.offset, g);
        }
        // Selected, not indexed: a run-time index would put the block in local memory.
        const uint32_t j = uint32_t(idx & 3);
        const uint32_t w = j == 0 ? block.v[0] : j == 1 ? block.v[1] : j == 2 ? block.v[2]
                                                                      : block.v[3];
        return w > threshold;
    }

    // The keep bits of the 4 indices idx0 .. idx0 + 3, idx0 a multiple of 4: one Philox block
    // and no state kept between calls, so a thread's calls for several groups are independent
    // chains the scheduler can interleave (the cached `keep` above serializes them).
    __device__ __forceinline__ uint32_t nibble(uint64_t idx0) const {
        if (rule != kKeepSome) return rule == kKeepAll ? 0xFu : 0u;
        const Philox4 b = dropout_block(stream.seed, stream.offset, idx0);
        return uint32_t(b.v[0] > threshold) | uint32_t(b.v[1] > threshold) << 1 |
               uint32_t(b.v[2] > threshold) << 2 | uint32_t(b.v[3] > threshold) << 3;
    }
};

// Bits 0 .. 3 set for the elements i .. i + 3 that lie below n.
__device__ __forceinline__ uint32_t valid_nibble(int64_t i, int64_t n) {
    return i + 4 <= n ? 0xFu : i >= n ? 0u : (1u << uint32_t(n - i)) - 1u;
}

__device__ __forceinline__ KeepBits keep_bits(Stream s, uint32_t threshold, int rule) {
    KeepBits k;
    k.stream = s;
    k.threshold = threshold;
    k.rule = rule;
    k.group = ~uint64_t(0);  // never idx & ~3, whose low bits are 0
    k.block = Philox4{{0u, 0u, 0u, 0u}};
    return k;
}

// ---- keep bits into the packed mask ---------------------------------------------------------

// Each lane of a full warp holds the 4 keep bits of local elements 4 * (base + lane) ..
// + 3 (base a multiple of 32): 8 lanes make one 32-bit word of the mask, which the first of
// them stores. Every lane of the warp must call this (it shuffles).
__device__ __forceinline__ void store_nibbles(uint32_t* words, int64_t nwords, int64_t group,
                                              uint32_t nibble) {
    const int lane = threadIdx.x & 31;
    uint32_t v = nibble << (4 * (lane & 7));
    v |= __shfl_xor_sync(0xFFFFFFFFu, v, 1);
    v |= __shfl_xor_sync(0xFFFFFFFFu, v, 2);
    v |= __shfl_xor_sync(0xFFFFFFFFu, v, 4);
    const int64_t w = group >> 3;
    if ((lane & 7) == 0 && w < nwords) words[w] = v;
}

// OR-s `bits` (bit k for position pos + k, k < 32) into the zeroed mask of 32-bit words, where
// other warps may write the neighbouring bits of the same words.
__device__ __forceinline__ void or_bits32(uint32_t* words, int64_t pos, uint32_t bits) {
    if (!bits) return;
    const int shift = int(pos & 31);
    atomicOr(&words[pos >> 5], bits << shift);
    if (shift && (bits >> (32 - shift))) atomicOr(&words[(pos >> 5) + 1], bits >> (32 - shift));
}

}  // namespace cuda
}  // namespace fusebridge
