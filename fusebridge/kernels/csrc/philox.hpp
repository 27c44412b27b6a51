// Philox4x32 (Random123), shared by the C++ and CUDA engines so both give the same bits.
// The (seed, offset, idx) -> word mapping is the contract of docs/dropout.md ("The bit contract").
// NVRTC compiles this file unchanged for the CUDA engine (fusebridge/cuda): it has no
// <cstdint>, so the fixed-width types are declared here under it.
#pragma once
#if defined(__CUDACC_RTC__)
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
#else
#include <cstdint>
#endif

#if defined(__CUDACC__)
#define FB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FB_HOST_DEVICE static inline  // internal linkage: compiled once per ISA
#endif

namespace fusebridge {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

struct Philox4 {
    uint32_t v[4];
};

FB_HOST_DEVICE Philox4 philox4x32(Philox4 c, uint32_t k0, uint32_t k1, int rounds = 10) {
    for (int r = 0; r < rounds; ++r) {
        if (r > 0) {
            k0 += kPhiloxW0;
            k1 += kPhiloxW1;
        }
        const uint64_t p0 = uint64_t(kPhiloxM0) * c.v[0];
        const uint64_t p1 = uint64_t(kPhiloxM1) * c.v[2];
        c = Philox4{{uint32_t(p1 >> 32) ^ c.v[1] ^ k0, uint32_t(p1),
                     uint32_t(p0 >> 32) ^ c.v[3] ^ k1, uint32_t(p0)}};
    }
    return c;
}

// The four words for elements idx & ~3 .. (idx & ~3) + 3 of stream (seed, offset).
FB_HOST_DEVICE Philox4 dropout_block(uint64_t seed, uint64_t offset, uint64_t group) {
    Philox4 c{{uint32_t(offset), uint32_t(offset >> 32), uint32_t(group), uint32_t(group >> 32)}};
    return philox4x32(c, uint32_t(seed), uint32_t(seed >> 32));
}

// keep iff r > (2^32 - 1) * p in double; the integer form r > floor(that) decides identically.
FB_HOST_DEVICE uint32_t keep_threshold(float p) {
    return uint32_t(4294967295.0 * double(p));
}

}  // namespace fusebridge
