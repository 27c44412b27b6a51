// Vector types and the float math the GRU kernels share (gru_simd.hpp, qgru_simd.hpp): loads
// and stores that never pass a row's end, Cephes exp/tanh, the gate activations and the state
// blend. Included inside each ISA's namespace (FB_ISA_NS), once per translation unit, so each
// ISA's flags compile it; no include guard, on purpose. Whether a * b + c becomes an FMA is the
// including file's choice (-ffp-contract): the quantized GRU turns contraction off so that every
// ISA gives the same bits.

#if defined(__AVX512F__)
constexpr int VW = 16, kRegs = 32;
#elif defined(__AVX2__)
constexpr int VW = 8, kRegs = 16;
#else
constexpr int VW = 4, kRegs = 16;  // the x86-64 baseline (SSE2)
#endif

typedef float V __attribute__((vector_size(VW * 4)));
typedef int32_t VI __attribute__((vector_size(VW * 4)));
typedef float VU __attribute__((vector_size(VW * 4), aligned(4), may_alias));

static inline V load(const float* p) { return *reinterpret_cast<const VU*>(p); }
static inline void store(float* p, V v) { *reinterpret_cast<VU*>(p) = v; }
// An intrinsic, not V{} + x: adding to +0 is not an identity for -0, so the compiler would
// keep an add before every broadcast in the inner loop.
static inline V splat(float x) {
#if defined(__AVX512F__)
    return _mm512_set1_ps(x);
#elif defined(__AVX2__)
    return _mm256_set1_ps(x);
#else
    return _mm_set1_ps(x);
#endif
}
// The tail of a row that is not a whole vector: never touch memory past it.
static inline V load_n(const float* p, int64_t n) {
    if (n >= VW) return load(p);
    float t[VW] = {};
    std::memcpy(t, p, size_t(n) * sizeof(float));
    return load(t);
}
static inline void store_n(float* p, V v, int64_t n) {
    if (n >= VW) return store(p, v);
    float t[VW];
    store(t, v);
    std::memcpy(p, t, size_t(n) * sizeof(float));
}
// Clamps that keep NaN (a comparison with NaN is false, so x passes through): NaN in an input
// or a weight must reach the output, as the formulas say (ONNX Runtime's GRU drops it).
static inline V clamp_above(V x, V hi) { return x > hi ? hi : x; }
static inline V clamp_below(V x, V lo) { return x < lo ? lo : x; }

// exp with Cephes' expf reduction and polynomial (about 1 ulp), inputs clamped to the range
// whose result is a normal float.
static inline V vexp(V x) {
    x = clamp_above(clamp_below(x, splat(-87.3365447505531f)), splat(88.3762626647949f));
    const V magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
    const V n = (x * 1.44269504088896341f + magic) - magic;
    V r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    V p = splat(1.9875691500E-4f);
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    const VI e = (__builtin_convertvector(n, VI) + 127) << 23;
    V scale;
    std::memcpy(&scale, &e, sizeof scale);
    return p * scale;
}

// 1 / (1 + e^-x): no cancellation anywhere, so the relative error stays that of exp.
static inline V vsigmoid(V x) { return splat(1.0f) / (splat(1.0f) + vexp(-x)); }

// Cephes tanhf: an odd polynomial below 0.625 (where 1 - 2/(e^2x + 1) would cancel), the
// exponential form above.
static inline V vtanh(V x) {
    const V ax = x < 0 ? -x : x;  // |x|, NaN kept
    const V z = x * x;
    V p = splat(-5.70498872745E-3f);
    p = p * z + 2.06390887954E-2f;
    p = p * z - 5.37397155531E-2f;
    p = p * z + 1.33314422036E-1f;
    p = p * z - 3.33332819422E-1f;
    const V small = p * z * x + x;
    V big = splat(1.0f) - splat(2.0f) / (vexp(ax + ax) + 1.0f);
    big = x < 0 ? -big : big;
    return ax < 0.625f ? small : big;
}

static inline V activate(GruAct a, V x) {
    switch (a) {
        case GruAct::sigmoid: return vsigmoid(x);
        case GruAct::tanh: return vtanh(x);
        case GruAct::relu: return x < 0 ? V{} : x;  // NaN kept
        default: return x;
    }
}

// h = u * hp + (1 - u) * c (origin_mode), else (1 - u) * hp + u * c.
static inline V blend(bool origin, V u, V hp, V c) {
    return origin ? c + u * (hp - c) : hp + u * (c - hp);
}

