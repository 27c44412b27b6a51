// Reading and writing runs of bits at any bit position in the LSB-first packed mask layout.
// Everything here has internal linkage: the header is compiled once per ISA and the
// copies must not be merged by the linker.
#pragma once
#include <cstdint>
#include <cstring>

namespace fusebridge {
namespace {

// 64 bits starting at bit `pos`; the caller guarantees bits pos .. pos+63 exist, so at most
// the bytes holding them are read.
inline uint64_t load_bits64(const uint8_t* bits, int64_t pos) {
    const uint8_t* p = bits + (pos >> 3);
    const int shift = int(pos & 7);
    uint64_t v;
    std::memcpy(&v, p, 8);
    if (shift) v = (v >> shift) | (uint64_t(p[8]) << (64 - shift));
    return v;
}

// n < 64 bits starting at `pos`, reading only the bytes that hold them.
inline uint64_t load_bits_tail(const uint8_t* bits, int64_t pos, int64_t n) {
    uint64_t v = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t q = pos + i;
        v |= uint64_t((bits[q >> 3] >> (q & 7)) & 1u) << i;
    }
    return v;
}

// Copies n bits from word array `src` (starting at bit s; one word of slack after the last
// bit) into byte array `dst` starting at bit d. Partial bytes are read-modify-written, full
// bytes overwritten, nothing outside dst bits d .. d+n-1 changes.
inline void copy_bits(const uint64_t* src, int64_t s, uint8_t* dst, int64_t d, int64_t n) {
    auto src_bits64 = [src](int64_t at) {
        const int shift = int(at & 63);
        const uint64_t* w = src + (at >> 6);
        return shift ? (w[0] >> shift) | (w[1] << (64 - shift)) : w[0];
    };
    auto put_bits = [dst](int64_t at, uint64_t v, int64_t count) {  // count <= 8 - (at & 7)
        const int shift = int(at & 7);
        const unsigned field = ((1u << count) - 1u) << shift;
        uint8_t& byte = dst[at >> 3];
        byte = uint8_t((byte & ~field) | ((unsigned(v) << shift) & field));
    };
    if (n > 0 && (d & 7)) {
        const int64_t head = n < 8 - (d & 7) ? n : 8 - (d & 7);
        put_bits(d, src_bits64(s), head);
        s += head, d += head, n -= head;
    }
    for (; n >= 64; s += 64, d += 64, n -= 64) {
        const uint64_t v = src_bits64(s);
        std::memcpy(dst + (d >> 3), &v, 8);
    }
    for (; n >= 8; s += 8, d += 8, n -= 8) dst[d >> 3] = uint8_t(src_bits64(s));
    if (n > 0) put_bits(d, src_bits64(s), n);
}

// copy_bits for ranges that other threads fill at the same time: `dst` starts zeroed, and a
// byte the range shares with a neighbour (its first or last, when partial) is OR-ed in
// atomically; bytes wholly inside the range are stored plainly.
inline void or_bits_shared(const uint64_t* src, int64_t s, uint8_t* dst, int64_t d, int64_t n) {
    auto src_bits64 = [src](int64_t at) {
        const int shift = int(at & 63);
        const uint64_t* w = src + (at >> 6);
        return shift ? (w[0] >> shift) | (w[1] << (64 - shift)) : w[0];
    };
    auto or_byte = [dst](int64_t at, uint64_t v, int64_t count) {  // count <= 8 - (at & 7)
        const int shift = int(at & 7);
        const unsigned field = ((1u << count) - 1u) << shift;
        __atomic_fetch_or(&dst[at >> 3], uint8_t((unsigned(v) << shift) & field),
                          __ATOMIC_RELAXED);
    };
    if (n > 0 && (d & 7)) {
        const int64_t head = n < 8 - (d & 7) ? n : 8 - (d & 7);
        or_byte(d, src_bits64(s), head);
        s += head, d += head, n -= head;
    }
    for (; n >= 64; s += 64, d += 64, n -= 64) {
        const uint64_t v = src_bits64(s);
        std::memcpy(dst + (d >> 3), &v, 8);
    }
    for (; n >= 8; s += 8, d += 8, n -= 8) dst[d >> 3] = uint8_t(src_bits64(s));
    if (n > 0) or_byte(d, src_bits64(s), n);
}

}  // namespace
}  // namespace fusebridge
