// Dropout inner loops, compiled once per ISA: dropout_{scalar,avx2,avx512}.cpp include this
// with their own -m flags and FB_ISA_NS. Everything lives in that namespace (or has internal
// linkage) so code built for one ISA can never be picked up by another.
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "bits.hpp"
#include "dropout_kernels.hpp"
#include "philox.hpp"

namespace fusebridge {
namespace FB_ISA_NS {

// ---- generation ---------------------------------------------------------------------------

struct RoundKeys {
    uint32_t k0[10], k1[10];
    explicit RoundKeys(uint64_t seed) {
        uint32_t a = uint32_t(seed), b = uint32_t(seed >> 32);
        for (int r = 0; r < 10; ++r, a += kPhiloxW0, b += kPhiloxW1) k0[r] = a, k1[r] = b;
    }
};

#if defined(__AVX512F__)
// 8 Philox blocks per vector: word w of block j in the low half of 64-bit lane j. vpmuludq
// multiplies those low halves into whole 64-bit products, so a product's low word is already
// in place and its high word one shift away; the lanes' high halves carry garbage that
// vpmuludq ignores and the compares mask off. A round is 2 multiplies, 2 shifts and 2
// three-way xors per 8 blocks, against 16 ops per 16 blocks with a block in every 32-bit lane.
constexpr int kWays = 4;  // vectors in flight: two output words
constexpr int kVecsPerWord = 2;
using vec = __m512i;

template <int N>
static inline void keep_words(uint64_t offset, const RoundKeys& keys, uint32_t threshold,
                              uint64_t group, uint64_t* out) {
    const vec step = _mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28);
    vec c[N][4];
    for (int j = 0; j < N; ++j) {
        const vec g = _mm512_add_epi64(_mm512_set1_epi64(int64_t(group + uint64_t(j) * 32)), step);
        c[j][0] = _mm512_set1_epi32(int(uint32_t(offset)));
        c[j][1] = _mm512_set1_epi32(int(uint32_t(offset >> 32)));
        c[j][2] = g;  // the high half is the counter's high word: garbage for vpmuludq
        c[j][3] = _mm512_srli_epi64(g, 32);
    }
    const vec m0 = _mm512_set1_epi64(kPhiloxM0), m1 = _mm512_set1_epi64(kPhiloxM1);
    for (int r = 0; r < 10; ++r) {
        const vec k0 = _mm512_set1_epi32(int(keys.k0[r])), k1 = _mm512_set1_epi32(int(keys.k1[r]));
        for (int j = 0; j < N; ++j) {
            const vec p0 = _mm512_mul_epu32(c[j][0], m0);
            const vec p1 = _mm512_mul_epu32(c[j][2], m1);
            c[j][0] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p1, 32), c[j][1], k0, 0x96);
            c[j][1] = p1;
            c[j][2] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p0, 32), c[j][3], k1, 0x96);
            c[j][3] = p0;
        }
    }
    const vec t = _mm512_set1_epi32(int(threshold));
    for (int j = 0; j < N; j += 2) {
        uint64_t word = 0;
        for (int h = 0; h < 2; ++h) {
            // Bit 2i of a compare is block i: words 0 and 1 interleave to bits 2i and 2i + 1,
            // which pdep moves to 4i and 4i + 1 (element order); words 2 and 3 follow them.
            uint32_t m[4];
            for (int w = 0; w < 4; ++w)
                m[w] = uint32_t(_mm512_mask_cmpgt_epu32_mask(0x5555, c[j + h][w], t));
            const uint32_t lo = _pdep_u32(m[0] | (m[1] << 1), 0x33333333u);
            const uint32_t hi = _pdep_u32(m[2] | (m[3] << 1), 0x33333333u);
            word |= uint64_t(lo | (hi << 2)) << (32 * h);
        }
        out[j / 2] = word;
    }
}
#elif defined(__AVX2__)
// One vector = 8 Philox blocks = 32 elements; two vectors make an output word.
constexpr int kWays = 4;
using vec = __m256i;

static inline void mulhilo(vec a, vec m, vec& hi, vec& lo) {
    const vec even = _mm256_mul_epu32(a, m);
    const vec odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
static inline vec xor3(vec a, vec b, vec c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
static inline vec splat(uint32_t v) { return _mm256_set1_epi32(int(v)); }

static inline void counters(uint64_t group, vec& lo, vec& hi) {
    const vec step = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const vec sign = splat(0x80000000u);
    const vec base = splat(uint32_t(group));
    lo = _mm256_add_epi32(base, step);
    // unsigned lo < base  <=>  signed (lo ^ sign) < (base ^ sign); the compare gives -1 there
    const vec carry = _mm256_cmpgt_epi32(_mm256_xor_si256(base, sign), _mm256_xor_si256(lo, sign));
    hi = _mm256_sub_epi32(splat(uint32_t(group >> 32)), carry);
}

// 32 keep bits of one vector in element order. packs + movemask give bit 4w + j per block
// quartet (j = lane within the quartet); the delta swaps transpose each 4x4 bit matrix.
static inline uint32_t keep_bits32(const vec c[4], vec threshold_flipped) {
    const vec sign = splat(0x80000000u);
    vec m[4];
    for (int w = 0; w < 4; ++w)
        m[w] = _mm256_cmpgt_epi32(_mm256_xor_si256(c[w], sign), threshold_flipped);
    const vec bytes = _mm256_packs_epi16(_mm256_packs_epi32(m[0], m[1]), _mm256_packs_epi32(m[2], m[3]));
    return uint32_t(_mm256_movemask_epi8(bytes));
}
static inline uint64_t transpose_quartets(uint64_t x) {
    uint64_t t = (x ^ (x >> 3)) & 0x0A0A0A0A0A0A0A0Aull;
    x ^= t ^ (t << 3);
    t = (x ^ (x >> 6)) & 0x00CC00CC00CC00CCull;
    return x ^ t ^ (t << 6);
}
#endif

#if defined(__AVX2__) && !defined(__AVX512F__)
template <int N>
static inline void philox_rounds(vec (&c)[N][4], const RoundKeys& keys) {
    const vec m0 = splat(kPhiloxM0), m1 = splat(kPhiloxM1);
    for (int r = 0; r < 10; ++r) {
        const vec k0 = splat(keys.k0[r]), k1 = splat(keys.k1[r]);
        for (int j = 0; j < N; ++j) {
            vec hi0, lo0, hi1, lo1;
            mulhilo(c[j][0], m0, hi0, lo0);
            mulhilo(c[j][2], m1, hi1, lo1);
            c[j][0] = xor3(hi1, c[j][1], k0);
            c[j][1] = lo1;
            c[j][2] = xor3(hi0, c[j][3], k1);
            c[j][3] = lo0;
        }
    }
}

constexpr int kLanes = int(sizeof(vec) / 4);
constexpr int kVecsPerWord = 16 / kLanes;

// N vectors of blocks starting at element `group`, turned into N / kVecsPerWord words.
template <int N>
static inline void keep_words(uint64_t offset, const RoundKeys& keys, uint32_t threshold,
                              uint64_t group, uint64_t* out) {
    vec c[N][4];
    for (int j = 0; j < N; ++j) {
        c[j][0] = splat(uint32_t(offset));
        c[j][1] = splat(uint32_t(offset >> 32));
        counters(group + uint64_t(j) * 4 * kLanes, c[j][2], c[j][3]);
    }
    philox_rounds<N>(c, keys);
    const vec t = splat(threshold ^ 0x80000000u);
    for (int j = 0; j < N; j += 2)
        out[j / 2] = transpose_quartets(uint64_t(keep_bits32(c[j], t)) |
                                        (uint64_t(keep_bits32(c[j + 1], t)) << 32));
}
#endif

static void keep_bits(uint64_t seed, uint64_t offset, uint32_t threshold, uint64_t group0,
                      int64_t nwords, uint64_t* out, const char* prefetch,
                      int64_t prefetch_stride) {
    int64_t w = 0;
#if defined(__AVX2__)
    const RoundKeys keys(seed);
    constexpr int kWordsPerIter = kWays / kVecsPerWord;
    for (; w + kWordsPerIter <= nwords; w += kWordsPerIter) {
        if (prefetch) {
            const char* from = prefetch + w * prefetch_stride;
            for (int64_t b = 0; b < kWordsPerIter * prefetch_stride; b += 64)
                _mm_prefetch(from + b, _MM_HINT_T0);
        }
        keep_words<kWays>(offset, keys, threshold, group0 + uint64_t(w) * 64, out + w);
    }
    for (; w < nwords; ++w)
        keep_words<kVecsPerWord>(offset, keys, threshold, group0 + uint64_t(w) * 64, out + w);
#else
    (void)prefetch, (void)prefetch_stride;
#endif
    for (; w < nwords; ++w) {
        uint64_t word = 0;
        for (int b = 0; b < 16; ++b) {
            const Philox4 r = dropout_block(seed, offset, group0 + uint64_t(w) * 64 + 4 * b);
            for (int k = 0; k < 4; ++k) word |= uint64_t(r.v[k] > threshold) << (4 * b + k);
        }
        out[w] = word;
    }
}

// ---- application --------------------------------------------------------------------------

static inline float half_to_float(half_bits h) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return float(v);
}
static inline half_bits float_to_half(float f) {
    const _Float16 v = _Float16(f);  // round to nearest even, as numpy's astype
    half_bits h;
    std::memcpy(&h, &v, 2);
    return h;
}
static inline float bf16_to_float(half_bits h) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline half_bits float_to_bf16(float f) {  // round to nearest even, as ml_dtypes
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return half_bits((u >> 16) | 0x40u);  // quiet NaN
    u += 0x7FFFu + ((u >> 16) & 1u);
    return half_bits(u >> 16);
}

// y[i] = bit ? op(x[i]) : 0 for a run, 64 elements per mask word.
template <class T, class Op>
static inline void apply_scalar(const T* x, T* y, int64_t n, const uint8_t* bits, int64_t pos, Op op) {
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const uint64_t m = load_bits64(bits, pos + i);
        for (int e = 0; e < 64; ++e) y[i + e] = ((m >> e) & 1u) ? op(x[i + e]) : T(0);
    }
    const uint64_t m = load_bits_tail(bits, pos + i, n - i);
    for (int64_t e = 0; i + e < n; ++e) y[i + e] = ((m >> e) & 1u) ? op(x[i + e]) : T(0);
}

static void apply_f64(const double* x, double* y, int64_t n, const uint8_t* bits, int64_t pos,
                      double scale, bool) {
    if (scale == 1.0)
        apply_scalar(x, y, n, bits, pos, [](double v) { return v; });
    else
        apply_scalar(x, y, n, bits, pos, [scale](double v) { return v * scale; });
}
static void apply_f16(const half_bits* x, half_bits* y, int64_t n, const uint8_t* bits,
                      int64_t pos, float scale, bool) {
    if (scale == 1.0f)
        apply_scalar(x, y, n, bits, pos, [](half_bits v) { return v; });
    else
        apply_scalar(x, y, n, bits, pos,
                     [scale](half_bits v) { return float_to_half(half_to_float(v) * scale); });
}
static void apply_bf16(const half_bits* x, half_bits* y, int64_t n, const uint8_t* bits,
                       int64_t pos, float scale, bool) {
    if (scale == 1.0f)
        apply_scalar(x, y, n, bits, pos, [](half_bits v) { return v; });
    else
        apply_scalar(x, y, n, bits, pos,
                     [scale](half_bits v) { return float_to_bf16(bf16_to_float(v) * scale); });
}

template <bool kScaled, bool kStream>
static void apply_f32_simd(const float* x, float* y, int64_t n, const uint8_t* bits, int64_t pos,
                           float scale) {
    auto op = [scale](float v) { return kScaled ? v * scale : v; };
    int64_t i = 0;
#if defined(__AVX2__)
    constexpr int64_t kAlign = sizeof(vec);
    if (kStream)  // reach a vector-aligned y so the non-temporal stores are legal
        while (i < n && (reinterpret_cast<uintptr_t>(y + i) % kAlign) != 0) ++i;
    apply_scalar(x, y, i, bits, pos, op);
    for (; i + 64 <= n; i += 64) {
        const uint64_t m = load_bits64(bits, pos + i);
#if defined(__AVX512F__)
        const __m512 s = _mm512_set1_ps(scale);
        for (int q = 0; q < 4; ++q) {
            const __mmask16 k = __mmask16(m >> (16 * q));
            const __m512 v = _mm512_loadu_ps(x + i + 16 * q);
            const __m512 r = kScaled ? _mm512_maskz_mul_ps(k, v, s) : _mm512_maskz_mov_ps(k, v);
            if (kStream) _mm512_stream_ps(y + i + 16 * q, r);
            else _mm512_storeu_ps(y + i + 16 * q, r);
        }
#else
        const __m256 s = _mm256_set1_ps(scale);
        const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        for (int q = 0; q < 8; ++q) {
            const __m256i b = _mm256_and_si256(_mm256_set1_epi32(int((m >> (8 * q)) & 0xFF)), lane_bit);
            const __m256 keep = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, lane_bit));
            __m256 v = _mm256_loadu_ps(x + i + 8 * q);
            if (kScaled) v = _mm256_mul_ps(v, s);
            v = _mm256_and_ps(v, keep);
            if (kStream) _mm256_stream_ps(y + i + 8 * q, v);
            else _mm256_storeu_ps(y + i + 8 * q, v);
        }
#endif
    }
    if (kStream) _mm_sfence();
#endif
    apply_scalar(x + i, y + i, n - i, bits, pos + i, op);
}

static void apply_f32(const float* x, float* y, int64_t n, const uint8_t* bits, int64_t pos,
                      float scale, bool stream) {
    // Streaming needs 4-byte-aligned floats to ever reach vector alignment.
    stream = stream && (reinterpret_cast<uintptr_t>(y) % 4) == 0;
    if (scale == 1.0f) {
        if (stream) apply_f32_simd<false, true>(x, y, n, bits, pos, scale);
        else apply_f32_simd<false, false>(x, y, n, bits, pos, scale);
    } else {
        if (stream) apply_f32_simd<true, true>(x, y, n, bits, pos, scale);
        else apply_f32_simd<true, false>(x, y, n, bits, pos, scale);
    }
}

}  // namespace FB_ISA_NS

const DropoutKernels& FB_KERNELS_FN() {
    static const DropoutKernels table{FB_ISA_NS::keep_bits, FB_ISA_NS::apply_f32,
                                      FB_ISA_NS::apply_f64, FB_ISA_NS::apply_f16,
                                      FB_ISA_NS::apply_bf16};
    return table;
}

}  // namespace fusebridge
