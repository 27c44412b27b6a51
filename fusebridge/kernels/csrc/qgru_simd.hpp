// Quantized GRU kernels, compiled once per ISA build: qgru_<build>.cpp include this with their own
// -m flags (CMakeLists.txt), FB_ISA_NS and FB_QGRU_KERNELS_FN. Where the build has VPDPBUSD
// (AVX512_VNNI, AVX-VNNI) or VDPBF16PS (AVX512_BF16) the dot products use it; elsewhere they are
// emulated with the base instructions to the same bits. Compiled with -ffp-contract=off: each
// float operation rounds once, as written, on every ISA (and in kernels/qgru_reference.py).
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "qgru_kernels.hpp"

namespace fusebridge {
namespace FB_ISA_NS {

#include "simd_math.hpp"

typedef uint32_t VUI __attribute__((vector_size(VW * 4)));
typedef int32_t VIU __attribute__((vector_size(VW * 4), aligned(4), may_alias));

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#define FB_NATIVE_VNNI 1
#elif defined(__AVXVNNI__)
#define FB_NATIVE_VNNI 1
#else
#define FB_NATIVE_VNNI 0
#endif
#if defined(__AVX512F__) && defined(__AVX512BF16__)
#define FB_NATIVE_BF16 1
#else
#define FB_NATIVE_BF16 0
#endif

// Rows of a register tile: R x G accumulators, G weight vectors and a broadcast fit 32 (16)
// registers for 3 gates; a row's sums never depend on its tile, so any R gives the same bits.
constexpr int kQRows = kRegs == 32 ? 8 : 4;

static inline VI loadi(const void* p) { return *reinterpret_cast<const VIU*>(p); }
static inline VI splati(int32_t x) { return VI{} + x; }
static inline V as_float(VI v) {
    V f;
    std::memcpy(&f, &v, sizeof f);
    return f;
}
static inline VI as_int(V v) {
    VI i;
    std::memcpy(&i, &v, sizeof i);
    return i;
}

// ---- int8: acc + sum over the 4 bytes of each lane of u8(x) * s8(w) (VPDPBUSD) ----
struct I8Weights {
    VI lo, hi;  // native: lo = the groups; emulated: bytes 0,1 and 2,3 as pairs of int16
};
static inline I8Weights prepare_i8(VI w) {
#if FB_NATIVE_VNNI
    return {w, w};
#else
    const VUI u = VUI(w);
    const VI lo = ((VI(u << 24) >> 24) & 0xFFFF) | ((VI(u << 16) >> 8) & int32_t(0xFFFF0000));
    const VI hi = ((VI(u << 8) >> 24) & 0xFFFF) | ((w >> 8) & int32_t(0xFFFF0000));
    return {lo, hi};
#endif
}
#if !FB_NATIVE_VNNI
// Per lane: lo16(a) * lo16(b) + hi16(a) * hi16(b), signed (PMADDWD): exact, no saturation.
static inline VI madd16(VI a, VI b) {
#if defined(__AVX512F__)
    return VI(_mm512_madd_epi16(__m512i(a), __m512i(b)));
#elif defined(__AVX2__)
    return VI(_mm256_madd_epi16(__m256i(a), __m256i(b)));
#else
    return VI(_mm_madd_epi16(__m128i(a), __m128i(b)));
#endif
}
#endif
static inline VI dot_i8(VI acc, uint32_t x, const I8Weights& w) {
#if FB_NATIVE_VNNI && defined(__AVX512F__)
    return VI(_mm512_dpbusd_epi32(__m512i(acc), _mm512_set1_epi32(int(x)), __m512i(w.lo)));
#elif FB_NATIVE_VNNI
    return VI(_mm256_dpbusd_avx_epi32(__m256i(acc), _mm256_set1_epi32(int(x)), __m256i(w.lo)));
#else
    // The u8 values zero-extended into int16 pairs: (x0, x1) and (x2, x3).
    const int32_t x01 = int32_t((x & 0xFF) | ((x & 0xFF00) << 8));
    const int32_t x23 = int32_t(((x >> 16) & 0xFF) | ((x >> 8) & 0xFF0000));
    return acc + madd16(w.lo, splati(x01)) + madd16(w.hi, splati(x23));
#endif
}

// ---- bf16: acc + x.odd * w.odd, then + x.even * w.even, each step one rounding (RNE), inputs
// that are denormal read as 0 and denormal results written as 0 (VDPBF16PS) ----
#if !FB_NATIVE_BF16
static inline V fma_v(V a, V b, V c) {
#if defined(__AVX512F__)
    return _mm512_fmadd_ps(a, b, c);
#elif defined(__AVX2__)
    return _mm256_fmadd_ps(a, b, c);
#else
    V r;
    for (int i = 0; i < VW; ++i) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    return r;
#endif
}
// A denormal result becomes a zero of its sign (the only denormals that can arise: the groups'
// values are bf16 of normal floats or zero, quantize() flushes denormal inputs).
static inline V flush_denormal(V v) {
    const VI bits = as_int(v);
    const VI tiny = (bits & 0x7FFFFFFF) < 0x00800000;  // |v| < FLT_MIN, NaN excluded
    return as_float(bits & ~(tiny & 0x7FFFFFFF));
}
#endif
static inline V dot_bf16(V acc, uint32_t x, VI w) {
#if FB_NATIVE_BF16
    return _mm512_dpbf16_ps(acc, __m512bh(w), __m512bh(_mm512_set1_epi32(int(x))));
#else
    const V w_odd = as_float(w & int32_t(0xFFFF0000)), w_even = as_float(VI(VUI(w) << 16));
    uint32_t odd = x & 0xFFFF0000u, even = x << 16;
    float x_odd, x_even;
    std::memcpy(&x_odd, &odd, 4), std::memcpy(&x_even, &even, 4);
    acc = flush_denormal(fma_v(w_odd, splat(x_odd), acc));
    return flush_denormal(fma_v(w_even, splat(x_even), acc));
#endif
}

// ---- rows into groups ----
typedef uint8_t VB __attribute__((vector_size(VW)));
static inline V vabs(V v) { return as_float(as_int(v) & 0x7FFFFFFF); }
// Round half to even (the default MXCSR rounding; the SSE2 build, without ROUNDPS, per lane).
static inline V vrint(V v) {
#if defined(__AVX512F__)
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#elif defined(__AVX2__)
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    for (int i = 0; i < VW; ++i) v[i] = std::nearbyint(v[i]);
    return v;
#endif
}

// The largest lane, and whether any lane of a mask is set (a row is a handful of vectors, so a
// lane-by-lane loop would cost as much as the row); exact in any order.
static inline float lane_max(V v) {
#if defined(__AVX512F__)
    return _mm512_reduce_max_ps(v);
#else
#if defined(__AVX2__)
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
#else
    __m128 m = v;
#endif
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
#endif
}
static inline bool any_lane(VI mask) {
#if defined(__AVX512F__)
    return _mm512_test_epi32_mask(__m512i(mask), __m512i(mask)) != 0;
#elif defined(__AVX2__)
    return _mm256_movemask_ps(__m256(mask)) != 0;
#else
    return _mm_movemask_ps(__m128(mask)) != 0;
#endif
}

static void quantize_i8(const float* x, int64_t k, uint32_t* out, float* scale) {
    V vmax = {};
    VI bad = {};
    for (int64_t i = 0; i < k; i += VW) {
        const V a = vabs(load_n(x + i, k - i));
        bad |= ~(a <= FLT_MAX);  // NaN or infinity
        vmax = a > vmax ? a : vmax;
    }
    const float amax = lane_max(vmax);
    const bool finite = !any_lane(bad);
    uint8_t* q = reinterpret_cast<uint8_t*>(out);
    const int64_t bytes = q_groups(GruPrecision::int8, k) * 4;
    if (!finite || amax == 0) {
        // No finite scale: the row's products read 0 and its scale carries a NaN on.
        std::memset(q, 128, size_t(bytes));
        *scale = finite ? 0.0f : NAN;
        return;
    }
    const V s = splat(127.0f / amax);
    // VPDPBUSD's unsigned operand: q + 128 (the packer's w_comp takes the 128 back out)
    auto bytes_of = [&](V v) {
        v = clamp_above(clamp_below(vrint(v * s), splat(-127.0f)), splat(127.0f));
        return __builtin_convertvector(__builtin_convertvector(v, VI) + 128, VB);
    };
    int64_t i = 0;
    for (; i + VW <= k; i += VW) {
        const VB b = bytes_of(load(x + i));
        std::memcpy(q + i, &b, VW);
    }
    if (i < k) {
        const VB b = bytes_of(load_n(x + i, k - i));
        std::memcpy(q + i, &b, size_t(k - i));
    }
    std::memset(q + k, 128, size_t(bytes - k));
    *scale = amax / 127.0f;
}

// float to bf16 bits (bf16_bits in qgru_kernels.hpp, VW lanes at a time), two per group.
static inline VI vbf16_bits(V f) {
    const VUI b = VUI(as_int(f));
    const VUI rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
    const VI nan = VI((b & 0x7FFFFFFFu) > 0x7F800000u), tiny = VI((b & 0x7F800000u) == 0u);
    const VUI special = ((b >> 16) & VUI(tiny ? 0x8000 : 0xFFFF)) | VUI(nan & 0x40);
    return VI((nan | tiny) ? special : rounded);
}
typedef uint16_t VH __attribute__((vector_size(VW * 2)));
static void quantize_bf16(const float* x, int64_t k, uint32_t* out, float*) {
    uint16_t* h = reinterpret_cast<uint16_t*>(out);
    for (int64_t i = 0; i < k; i += VW) {
        const VH bits = __builtin_convertvector(vbf16_bits(load_n(x + i, k - i)), VH);
        std::memcpy(h + i, &bits, size_t(std::min<int64_t>(VW, k - i)) * 2);
    }
    if (k % 2) h[k] = 0;
}

// ---- products ----
// For R rows a[i * a_stride] (groups) and G gates from gate0 of one block of a packed matrix:
// per vector of VW hidden units (j its first unit, n the units left in the row from j), the
// products as floats, h[i][g], handed to epilogue(j, n, h).
template <GruPrecision P, int R, int G, class Dequant, class Epilogue>
static inline void qblock(const uint32_t* a, int64_t a_stride, const uint32_t* packed,
                          int64_t groups, int64_t block, int gate0, int64_t oc,
                          Dequant&& dequant, Epilogue&& epilogue) {
    const uint32_t* panel = packed + block * groups * kQGroupStride + gate0 * kGruBlock;
    for (int sub = 0; sub < kGruBlock / VW; ++sub) {
        const int64_t j = block * kGruBlock + sub * VW;
        if (j >= oc) return;
        V h[R][G];
        if constexpr (P == GruPrecision::int8) {
            VI acc[R][G] = {};
            for (int64_t k = 0; k < groups; ++k) {
                const uint32_t* wk = panel + k * kQGroupStride + sub * VW;
                I8Weights w[G];
                for (int g = 0; g < G; ++g) w[g] = prepare_i8(loadi(wk + g * kGruBlock));
#pragma GCC unroll 8
                for (int i = 0; i < R; ++i) {
                    const uint32_t x = a[i * a_stride + k];
                    for (int g = 0; g < G; ++g) acc[i][g] = dot_i8(acc[i][g], x, w[g]);
                }
            }
            for (int i = 0; i < R; ++i)
                for (int g = 0; g < G; ++g) h[i][g] = dequant(i, gate0 + g, j, acc[i][g]);
        } else {
            V acc[R][G] = {};
            for (int64_t k = 0; k < groups; ++k) {
                const uint32_t* wk = panel + k * kQGroupStride + sub * VW;
                VI w[G];
                for (int g = 0; g < G; ++g) w[g] = loadi(wk + g * kGruBlock);
#pragma GCC unroll 8
                for (int i = 0; i < R; ++i) {
                    const uint32_t x = a[i * a_stride + k];
                    for (int g = 0; g < G; ++g) acc[i][g] = dot_bf16(acc[i][g], x, w[g]);
                }
            }
            for (int i = 0; i < R; ++i)
                for (int g = 0; g < G; ++g) h[i][g] = acc[i][g];
        }
        epilogue(j, oc - j, h);
    }
}

// int8 sums to floats: (float(acc - w_comp) * row scale) * column scale, in that order.
template <class Args>
static auto int8_dequant(const Args& s, int64_t row0, int64_t ocp) {
    return [&s, row0, ocp](int i, int gate, int64_t j, VI acc) {
        const VI exact = acc - loadi(s.w_comp + gate * ocp + j);
        return (__builtin_convertvector(exact, V) * splat(s.a_scale[row0 + i])) *
               load(s.w_scale + gate * ocp + j);
    };
}

template <GruPrecision P, int R>
static void project_tile(const QGruProjection& p, int64_t row0, int64_t block) {
    const int64_t ocp = (p.oc + kGruBlock - 1) / kGruBlock * kGruBlock;
    qblock<P, R, 3>(p.a + row0 * p.a_stride, p.a_stride, p.w, p.groups, block, 0, p.oc,
                    int8_dequant(p, row0, ocp), [&](int64_t j, int64_t n, V (&h)[R][3]) {
                        for (int i = 0; i < R; ++i) {
                            float* g = p.g + (row0 + i) * p.g_stride + j;
                            for (int gate = 0; gate < 3; ++gate)
                                store_n(g + gate * p.oc, h[i][gate], n);
                        }
                    });
}

template <GruPrecision P, int R>
static void lbr_tile(const QGruStep& s, int64_t row0, int64_t block) {
    qblock<P, R, 3>(s.a + row0 * s.a_stride, s.a_stride, s.w, s.groups, block, 0, s.oc,
                    int8_dequant(s, row0, s.ocp), [&](int64_t j, int64_t n, V (&h)[R][3]) {
        const V bu = load(s.bx + j), br = load(s.bx + s.ocp + j), bc = load(s.bx + 2 * s.ocp + j);
        const V bhc = load(s.bhc + j);
        for (int i = 0; i < R; ++i) {
            const float* g = s.g[row0 + i];
            const V u = activate(s.gate, (h[i][0] + load_n(g + j, n)) + bu);
            const V r = activate(s.gate, (h[i][1] + load_n(g + s.oc + j, n)) + br);
            const V c = activate(s.act, (load_n(g + 2 * s.oc + j, n) + bc) + r * (h[i][2] + bhc));
            const V hp = load_n(s.hprev[row0 + i] + j, n);
            store_n(s.hout[row0 + i] + j, blend(s.origin, u, hp, c), n);
        }
    });
}

template <GruPrecision P, int R>
static void update_reset_tile(const QGruStep& s, int64_t row0, int64_t block) {
    qblock<P, R, 2>(s.a + row0 * s.a_stride, s.a_stride, s.w, s.groups, block, 0, s.oc,
                    int8_dequant(s, row0, s.ocp), [&](int64_t j, int64_t n, V (&h)[R][2]) {
        const V bu = load(s.bx + j), br = load(s.bx + s.ocp + j);
        for (int i = 0; i < R; ++i) {
            const float* g = s.g[row0 + i];
            const int64_t row = (row0 + i) * s.ocp + j;
            store(s.u + row, activate(s.gate, (h[i][0] + load_n(g + j, n)) + bu));
            const V r = activate(s.gate, (h[i][1] + load_n(g + s.oc + j, n)) + br);
            store(s.rh + row, r * load_n(s.hprev[row0 + i] + j, n));
        }
    });
}

template <GruPrecision P, int R>
static void candidate_tile(const QGruStep& s, int64_t row0, int64_t block) {
    qblock<P, R, 1>(s.a + row0 * s.a_stride, s.a_stride, s.w, s.groups, block, 2, s.oc,
                    int8_dequant(s, row0, s.ocp), [&](int64_t j, int64_t n, V (&h)[R][1]) {
        const V bc = load(s.bx + 2 * s.ocp + j), bhc = load(s.bhc + j);
        for (int i = 0; i < R; ++i) {
            const float* g = s.g[row0 + i];
            const V c = activate(s.act, ((load_n(g + 2 * s.oc + j, n) + bc) + h[i][0]) + bhc);
            const V u = load(s.u + (row0 + i) * s.ocp + j);
            const V hp = load_n(s.hprev[row0 + i] + j, n);
            store_n(s.hout[row0 + i] + j, blend(s.origin, u, hp, c), n);
        }
    });
}

// nrows (1..kQRows) picks the tile compiled for exactly that many rows.
template <class Args, template <GruPrecision, int> class Tile, GruPrecision P>
static void by_rows(const Args& s, int64_t row0, int64_t nrows, int64_t block) {
    switch (nrows) {
#define FB_ROWS(r) \
    case r: return Tile<P, (r <= kQRows ? r : kQRows)>::run(s, row0, block);
        FB_ROWS(1) FB_ROWS(2) FB_ROWS(3) FB_ROWS(4) FB_ROWS(5) FB_ROWS(6) FB_ROWS(7) FB_ROWS(8)
#undef FB_ROWS
        default: return;
    }
}
template <GruPrecision P, int R>
struct Project {
    static void run(const QGruProjection& p, int64_t r0, int64_t b) {
        project_tile<P, R>(p, r0, b);
    }
};
template <GruPrecision P, int R>
struct Lbr {
    static void run(const QGruStep& s, int64_t r0, int64_t b) { lbr_tile<P, R>(s, r0, b); }
};
template <GruPrecision P, int R>
struct UpdateReset {
    static void run(const QGruStep& s, int64_t r0, int64_t b) { update_reset_tile<P, R>(s, r0, b); }
};
template <GruPrecision P, int R>
struct Candidate {
    static void run(const QGruStep& s, int64_t r0, int64_t b) { candidate_tile<P, R>(s, r0, b); }
};

template <GruPrecision P>
static QGruKernels table() {
    return {P == GruPrecision::int8 ? quantize_i8 : quantize_bf16,
            {kQRows, by_rows<QGruProjection, Project, P>},
            {kQRows, by_rows<QGruStep, Lbr, P>},
            {kQRows, by_rows<QGruStep, UpdateReset, P>},
            {kQRows, by_rows<QGruStep, Candidate, P>}};
}

}  // namespace FB_ISA_NS

const QGruKernels& FB_QGRU_KERNELS_FN(GruPrecision p) {
    static const QGruKernels int8 = FB_ISA_NS::table<GruPrecision::int8>();
    static const QGruKernels bf16 = FB_ISA_NS::table<GruPrecision::bf16>();
    return p == GruPrecision::int8 ? int8 : bf16;
}

}  // namespace fusebridge
