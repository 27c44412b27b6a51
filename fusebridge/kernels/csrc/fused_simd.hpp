// Softmax rows and the matmul epilogue, compiled once per ISA: fused_{scalar,avx2,avx512}.cpp
// include this with their own -m flags and FB_ISA_NS. One source for every width: V is 16
// lanes on every ISA (one zmm, two ymm, four xmm) and each op works piece by piece, so every
// lane does the same IEEE operations in the same order on every ISA. FMAs are explicit (a
// correctly rounded fma where the ISA has none) and -ffp-contract=off keeps the compiler from
// adding others, so the three builds give the same bits.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "fused_kernels.hpp"

// GCC would keep some of these out of line, passing 16-lane values through memory.
#define FB_INLINE static inline __attribute__((always_inline))

namespace fusebridge {
namespace FB_ISA_NS {

// exp's t = n + 1.5 * 2^23 holds n in its low mantissa bits: (bits(t) + kExpBias) << 23 is the
// float 2^n for n in [-126, 127].
constexpr float kExpMagic = 12582912.0f;
constexpr int32_t kExpBias = 127 - 0x4B400000;

#if defined(__AVX512F__)
typedef __m512 N;
FB_INLINE N nload(const float* p) { return _mm512_loadu_ps(p); }
FB_INLINE void nstore(float* p, N v) { _mm512_storeu_ps(p, v); }
FB_INLINE N nset1(float x) { return _mm512_set1_ps(x); }
FB_INLINE N nadd(N a, N b) { return _mm512_add_ps(a, b); }
FB_INLINE N nsub(N a, N b) { return _mm512_sub_ps(a, b); }
FB_INLINE N nmul(N a, N b) { return _mm512_mul_ps(a, b); }
FB_INLINE N nmax(N a, N b) { return _mm512_max_ps(a, b); }
FB_INLINE N nfma(N a, N b, N c) { return _mm512_fmadd_ps(a, b, c); }
FB_INLINE N nzero_below(N x, N lo, N v) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), v);
}
// y * 2^n for integral n (t: n in its low mantissa bits, see exp_nonpos), exact while the
// result is normal and rounded once below: the same as multiplying by 2^n built from the bits.
FB_INLINE N nldexp(N y, N, N n) { return _mm512_scalef_ps(y, n); }
#elif defined(__AVX2__)
typedef __m256 N;
FB_INLINE N nload(const float* p) { return _mm256_loadu_ps(p); }
FB_INLINE void nstore(float* p, N v) { _mm256_storeu_ps(p, v); }
FB_INLINE N nset1(float x) { return _mm256_set1_ps(x); }
FB_INLINE N nadd(N a, N b) { return _mm256_add_ps(a, b); }
FB_INLINE N nsub(N a, N b) { return _mm256_sub_ps(a, b); }
FB_INLINE N nmul(N a, N b) { return _mm256_mul_ps(a, b); }
FB_INLINE N nmax(N a, N b) { return _mm256_max_ps(a, b); }
FB_INLINE N nfma(N a, N b, N c) { return _mm256_fmadd_ps(a, b, c); }
FB_INLINE N nzero_below(N x, N lo, N v) {
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), v);
}
FB_INLINE N nldexp(N y, N t, N) {
    const __m256i i = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(kExpBias));
    return _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(i, 23)));
}
#else
typedef __m128 N;  // the x86-64 baseline, SSE2
FB_INLINE N nload(const float* p) { return _mm_loadu_ps(p); }
FB_INLINE void nstore(float* p, N v) { _mm_storeu_ps(p, v); }
FB_INLINE N nset1(float x) { return _mm_set1_ps(x); }
FB_INLINE N nadd(N a, N b) { return _mm_add_ps(a, b); }
FB_INLINE N nsub(N a, N b) { return _mm_sub_ps(a, b); }
FB_INLINE N nmul(N a, N b) { return _mm_mul_ps(a, b); }
FB_INLINE N nmax(N a, N b) { return _mm_max_ps(a, b); }
FB_INLINE N nfma(N a, N b, N c) {
    float fa[4], fb[4], fc[4];
    _mm_storeu_ps(fa, a), _mm_storeu_ps(fb, b), _mm_storeu_ps(fc, c);
    for (int i = 0; i < 4; ++i) fa[i] = std::fma(fa[i], fb[i], fc[i]);
    return _mm_loadu_ps(fa);
}
FB_INLINE N nzero_below(N x, N lo, N v) { return _mm_andnot_ps(_mm_cmplt_ps(x, lo), v); }
FB_INLINE N nldexp(N y, N t, N) {
    const __m128i i = _mm_add_epi32(_mm_castps_si128(t), _mm_set1_epi32(kExpBias));
    return _mm_mul_ps(y, _mm_castsi128_ps(_mm_slli_epi32(i, 23)));
}
#endif

constexpr int64_t L = 16;
constexpr int kPieces = int(L * sizeof(float) / sizeof(N));
constexpr int kWidth = int(L) / kPieces;

struct V {
    N p[kPieces];
};
#define FB_EACH(expr)                                 \
    V r;                                              \
    for (int k = 0; k < kPieces; ++k) r.p[k] = expr; \
    return r

FB_INLINE V load(const float* p) { FB_EACH(nload(p + k * kWidth)); }
FB_INLINE void store(float* p, V v) {
    for (int k = 0; k < kPieces; ++k) nstore(p + k * kWidth, v.p[k]);
}
FB_INLINE V splat(float x) { FB_EACH(nset1(x)); }
FB_INLINE V operator+(V a, V b) { FB_EACH(nadd(a.p[k], b.p[k])); }
FB_INLINE V operator-(V a, V b) { FB_EACH(nsub(a.p[k], b.p[k])); }
FB_INLINE V operator*(V a, V b) { FB_EACH(nmul(a.p[k], b.p[k])); }
// x86's maxps: a > b ? a : b, so a NaN in b comes out.
FB_INLINE V vmax(V a, V b) { FB_EACH(nmax(a.p[k], b.p[k])); }
FB_INLINE V vfma(V a, V b, V c) { FB_EACH(nfma(a.p[k], b.p[k], c.p[k])); }
// x < lo ? 0 : v (a NaN x keeps v).
FB_INLINE V zero_below(V x, V lo, V v) { FB_EACH(nzero_below(x.p[k], lo.p[k], v.p[k])); }
FB_INLINE V ldexp_n(V y, V t, V n) { FB_EACH(nldexp(y.p[k], t.p[k], n.p[k])); }
#undef FB_EACH

// n < 16 elements, the other lanes `fill` (chosen so they drop out of sums and maxima).
FB_INLINE V load_part(const float* p, int64_t n, float fill) {
    float buf[L];
    for (int i = 0; i < L; ++i) buf[i] = fill;
    std::memcpy(buf, p, size_t(n) * sizeof(float));
    return load(buf);
}
FB_INLINE void store_part(float* p, V v, int64_t n) {
    float buf[L];
    store(buf, v);
    std::memcpy(p, buf, size_t(n) * sizeof(float));
}

// The fixed reduction tree: lane j + lane j + 8, then + 4, + 2, + 1.
FB_INLINE float hsum(V v) {
    float f[L];
    store(f, v);
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) f[j] = f[j] + f[j + w];
    return f[0];
}
FB_INLINE float hmax(V v) {
    float f[L];
    store(f, v);
    for (int w = 8; w >= 1; w /= 2)  // the same tree, with maxps's rule per lane
        for (int j = 0; j < w; ++j) f[j] = f[j] > f[j + w] ? f[j] : f[j + w];
    return f[0];
}

// exp(x) for x <= 0, the only arguments softmax makes (NaN passes through): x = n ln2 + r with
// |r| <= ln2 / 2, Cephes' expf polynomial (degree 7, within 2 ulp) by Horner, times 2^n. Below
// ln(FLT_MIN) it gives 0, so 2^n is always normal where it counts (no clamp needed: what is
// computed for smaller x, -inf included, is thrown away).
FB_INLINE V exp_nonpos(V x) {
    const V t = vfma(x, splat(1.44269504088896341f), splat(kExpMagic));  // rounds x / ln2
    const V n = t - splat(kExpMagic);
    V r = vfma(n, splat(-0.693359375f), x);  // ln2 in two parts: the first is exact times n
    r = vfma(n, splat(2.12194440e-4f), r);
    V p = splat(1.9875691500e-4f);
    p = vfma(p, r, splat(1.3981999507e-3f));
    p = vfma(p, r, splat(8.3334519073e-3f));
    p = vfma(p, r, splat(4.1665795894e-2f));
    p = vfma(p, r, splat(1.6666665459e-1f));
    p = vfma(p, r, splat(5.0000001201e-1f));
    p = vfma(p, r, splat(1.0f));
    p = vfma(p, r, splat(1.0f));
    return zero_below(x, splat(-87.33654475f), ldexp_n(p, t, n));
}

// ---- rows ---------------------------------------------------------------------------------

static float row_max(const float* x, int64_t n) {
    // Four chains, to overlap maxps's latency. The maximum is exact, so the bits do not depend
    // on how it is reduced (and a NaN anywhere makes the whole row NaN through the sum).
    const float ninf = -INFINITY;
    V m0 = splat(ninf), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 4 * L <= n; i += 4 * L) {
        m0 = vmax(m0, load(x + i));
        m1 = vmax(m1, load(x + i + L));
        m2 = vmax(m2, load(x + i + 2 * L));
        m3 = vmax(m3, load(x + i + 3 * L));
    }
    for (; i + L <= n; i += L) m0 = vmax(m0, load(x + i));
    if (i < n) m1 = vmax(m1, load_part(x + i, n - i, ninf));
    return hmax(vmax(vmax(m0, m1), vmax(m2, m3)));
}

static float exp_row(const float* x, int64_t n, float m, float* e) {
    const V mv = splat(m);
    V s = splat(0.0f);
    int64_t i = 0;
    for (; i + L <= n; i += L) {
        const V v = exp_nonpos(load(x + i) - mv);
        store(e + i, v);
        s = s + v;
    }
    if (i < n) {  // -inf lanes give exp 0, which adds nothing
        const V v = exp_nonpos(load_part(x + i, n - i, -INFINITY) - mv);
        store_part(e + i, v, n - i);
        s = s + v;
    }
    return hsum(s);
}

static void scale_row(const float* x, int64_t n, float s, float* y) {
    const V sv = splat(s);
    int64_t i = 0;
    for (; i + L <= n; i += L) store(y + i, load(x + i) * sv);
    if (i < n) store_part(y + i, load_part(x + i, n - i, 0.0f) * sv, n - i);
}

static float dot_row(const float* a, const float* b, int64_t n) {
    V s = splat(0.0f);
    int64_t i = 0;
    for (; i + L <= n; i += L) s = s + load(a + i) * load(b + i);
    if (i < n) s = s + load_part(a + i, n - i, 0.0f) * load_part(b + i, n - i, 0.0f);
    return hsum(s);
}

static void grad_row(const float* p, const float* g, int64_t n, float s, float* dx) {
    const V sv = splat(s);
    int64_t i = 0;
    for (; i + L <= n; i += L) store(dx + i, load(p + i) * (load(g + i) - sv));
    if (i < n)
        store_part(dx + i, load_part(p + i, n - i, 0.0f) * (load_part(g + i, n - i, 0.0f) - sv),
                   n - i);
}

// ---- columns ------------------------------------------------------------------------------

// out[0:n] = op(lanes of a, b, c) with full vectors and one partial one; op is lane-wise.
template <class Op>
FB_INLINE void each_lane(int64_t n, Op op) {
    int64_t i = 0;
    for (; i + L <= n; i += L) op(i, L);
    if (i < n) op(i, n - i);
}
FB_INLINE V get(const float* p, int64_t w) { return w == L ? load(p) : load_part(p, w, 0.0f); }
FB_INLINE void put(float* p, V v, int64_t w) {
    if (w == L) store(p, v);
    else store_part(p, v, w);
}

static void max_cols(float* m, const float* x, int64_t n) {
    each_lane(n, [&](int64_t i, int64_t w) { put(m + i, vmax(get(m + i, w), get(x + i, w)), w); });
}

static void exp_cols(const float* x, const float* m, int64_t n, float* e, float* s) {
    each_lane(n, [&](int64_t i, int64_t w) {
        const V v = exp_nonpos(get(x + i, w) - get(m + i, w));
        put(e + i, v, w);
        put(s + i, get(s + i, w) + v, w);
    });
}

static void scale_cols(const float* x, const float* s, int64_t n, float* y) {
    each_lane(n, [&](int64_t i, int64_t w) { put(y + i, get(x + i, w) * get(s + i, w), w); });
}

static void dot_cols(const float* a, const float* b, int64_t n, float* s) {
    each_lane(n, [&](int64_t i, int64_t w) {
        put(s + i, get(s + i, w) + get(a + i, w) * get(b + i, w), w);
    });
}

static void grad_cols(const float* p, const float* g, const float* s, int64_t n, float* dx) {
    each_lane(n, [&](int64_t i, int64_t w) {
        put(dx + i, get(p + i, w) * (get(g + i, w) - get(s + i, w)), w);
    });
}

static void add_cols(float* y, const float* b, int64_t n) {
    each_lane(n, [&](int64_t i, int64_t w) { put(y + i, get(y + i, w) + get(b + i, w), w); });
}

}  // namespace FB_ISA_NS
#undef FB_INLINE

const FusedKernels& FB_KERNELS_FN() {
    static const FusedKernels table{
        FB_ISA_NS::row_max,   FB_ISA_NS::exp_row,    FB_ISA_NS::scale_row, FB_ISA_NS::dot_row,
        FB_ISA_NS::grad_row,  FB_ISA_NS::max_cols,   FB_ISA_NS::exp_cols,  FB_ISA_NS::scale_cols,
        FB_ISA_NS::dot_cols,  FB_ISA_NS::grad_cols,  FB_ISA_NS::add_cols};
    return table;
}

}  // namespace fusebridge
