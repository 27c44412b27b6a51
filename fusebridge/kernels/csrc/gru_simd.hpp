// GRU step kernels, compiled once per ISA: gru_{scalar,avx2,avx512}.cpp include this with their
// own -m flags and FB_ISA_NS. GCC vector extensions give one source for every width; the
// compiler turns a * b + c into FMA (-ffp-contract=fast is GCC's default in GNU C++ mode).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gru_kernels.hpp"

namespace fusebridge {
namespace FB_ISA_NS {

#include "simd_math.hpp"

// Register tiles of R rows x G gates x KU partial sums. KU is fixed per G (and ISA), never
// chosen from R: a row's sums then come out the same whether its tile is full or not, so a
// sentence gets the same bits alone or in any batch. R fills the registers left (R*G*KU
// accumulators, G weight vectors, a broadcast): every further tile of a step reads the block's
// weights again, so KU stays as small as hides the FMA latency (2 ports x 4 cycles want 8
// independent chains) with a few rows, and on AVX-512 5 to 8 rows take one tile of 8. A lone
// row takes two blocks at once instead (kPairRows below). These tiles are faster than the KU = 2
// (3, 6) for 3 (2, 1) gates and tiles of 4 (4, 5) rows AVX-512 had before at most row counts
// (docs/performance.md, "Measurements behind the code").
template <int G>
struct Tiling {
    static constexpr int KU = G == 1 ? 2 : 1;
    static constexpr int MR = std::min(8, (kRegs - G - 1) / (G * KU));
};
// The projection has many rows: one sum per output (KU = 1) and tiles of 8 (4) rows give
// 24 (12) chains, like OpenBLAS's own micro-kernels.
constexpr int kProjectRows = kRegs == 32 ? 8 : 4;

// A weight vector that every row of a tile multiplies. GCC folds such loads into the FMAs
// (a memory operand each) at some tile sizes even where the registers would hold them, and
// then loads each weight once per row, slower than the loads in registers (same bits;
// docs/performance.md, "Measurements behind the code"). Where the tile's sums and two steps'
// weights fit the registers, the load goes to a register of its own (an asm GCC cannot fold);
// else GCC chooses, which beats spilling.
template <bool kInRegister>
static inline V load_to_register(const float* p) {
#if defined(__AVX__)
    if constexpr (kInRegister) {
        V v;
        asm("vmovups %1, %0" : "=v"(v) : "m"(*reinterpret_cast<const VU*>(p)));
        return v;
    }
#endif
    return load(p);
}

// acc[i][c] = sum_k a[i][k] * W[k, column c] for C = G * S vectors: vector c is gate c % G of
// unit vector c / G, which lies `vstride` floats after the previous one (VW for the sub-vectors
// of a block, a whole panel for the next block); w points at the first, plus the first gate's
// offset. The k loop is the whole of K: no partial sums leave registers. KU partial sums take
// interleaved k and are added in a fixed order at the end.
template <int R, int G, int S, int KU>
static inline void product(const float* const* a, const float* w, int64_t kdim, int64_t vstride,
                           V (&acc)[R][G * S]) {
    constexpr int C = G * S;
    V part[KU][R][C];
    for (int u = 0; u < KU; ++u)
        for (int i = 0; i < R; ++i)
            for (int c = 0; c < C; ++c) part[u][i][c] = V{};
    auto step = [&](int u, int64_t k) {
        const float* wk = w + k * kGruPackStride;
        V b[C];
#pragma GCC unroll 6
        for (int c = 0; c < C; ++c) b[c] = load_to_register<R * C * KU + 2 * C + 1 <= kRegs>(
                                          wk + (c % G) * kGruBlock + (c / G) * vstride);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
            const V ai = splat(a[i][k]);
#pragma GCC unroll 6
            for (int c = 0; c < C; ++c) part[u][i][c] += ai * b[c];
        }
    };
    int64_t k = 0;
    for (; k + KU <= kdim; k += KU)
#pragma GCC unroll 8
        for (int u = 0; u < KU; ++u) step(u, k + u);
    for (; k < kdim; ++k) step(0, k);
    for (int i = 0; i < R; ++i)
        for (int c = 0; c < C; ++c) {
            V sum = part[0][i][c];
            for (int u = 1; u < KU; ++u) sum += part[u][i][c];
            acc[i][c] = sum;
        }
}

// How many of a block's kGruBlock / VW vectors one product takes at once: all that fit in the
// registers (accumulators, weight vectors, a broadcast). With few rows they are the
// independent sums that hide the FMA latency (AVX2 and SSE2, where a block is 2 or 4
// vectors); each output's arithmetic is the same either way.
template <int R, int G, int KU>
constexpr int subvectors() {
    int s = kGruBlock / VW;
    while (s > 1 && R * G * KU * s + G * s + 1 > kRegs) s /= 2;
    return s;
}
// The most rows for which a tile takes two whole blocks in one product (AVX-512, where a block
// is one vector; 0 elsewhere): twice the independent sums of a lone row. Not for 2 or 3 rows,
// which ran slower so than one block at a time (docs/performance.md).
constexpr int kPairRows = kGruBlock == VW ? 1 : 0;

// For NB consecutive blocks from `block` of a matrix packed with K = kdim rows: the products of
// rows a[0..R) with their G gates from gate0, then epilogue(j, n, acc) per vector of VW hidden
// units: j its first unit, n the units left in the row from j (the last vector may pass OC),
// acc[i][g].
template <int R, int G, int KU, int NB, class Epilogue>
static inline void block_product(const float* const* a, const float* packed, int64_t kdim,
                                 int64_t block, int gate0, int64_t oc, Epilogue&& epilogue) {
    const float* panel = packed + block * kdim * kGruPackStride + gate0 * kGruBlock;
    auto finish = [&](const auto& acc, int v, int64_t j) {
        V one[R][G];
        for (int i = 0; i < R; ++i)
            for (int g = 0; g < G; ++g) one[i][g] = acc[i][v * G + g];
        epilogue(j, oc - j, one);
    };
    if constexpr (NB == 2) {  // two blocks of one vector each
        V acc[R][G * 2];
        product<R, G, 2, KU>(a, panel, kdim, kdim * kGruPackStride, acc);
        for (int v = 0; v < 2; ++v)
            if ((block + v) * kGruBlock < oc) finish(acc, v, (block + v) * kGruBlock);
    } else {
        constexpr int S = subvectors<R, G, KU>();
        for (int sub = 0; sub < kGruBlock / VW; sub += S) {
            V acc[R][G * S];
            if (block * kGruBlock + sub * VW >= oc) return;
            product<R, G, S, KU>(a, panel + sub * VW, kdim, VW, acc);
            for (int v = 0; v < S; ++v) {
                const int64_t j = block * kGruBlock + (sub + v) * VW;
                if (j >= oc) return;
                finish(acc, v, j);
            }
        }
    }
}

template <int R>
static void project_tile(const GruProjection& p, int64_t row0, int64_t block) {
    block_product<R, 3, 1, 1>(p.x + row0, p.wx, p.ic, block, 0, p.oc,
                           [&](int64_t j, int64_t n, V (&acc)[R][3]) {
                               for (int i = 0; i < R; ++i) {
                                   float* g = p.g + (row0 + i) * p.g_stride + j;
                                   for (int gate = 0; gate < 3; ++gate)
                                       store_n(g + gate * p.oc, acc[i][gate], n);
                               }
                           });
}

template <int R, int NB>
static void lbr_tile(const GruStep& s, int64_t row0, int64_t block) {
    const float* const* a = s.hprev + row0;
    block_product<R, 3, Tiling<3>::KU, NB>(a, s.wh, s.oc, block, 0, s.oc, [&](int64_t j, int64_t n,
                                                                           V (&acc)[R][3]) {
        const V bu = load(s.bx + j), br = load(s.bx + s.ocp + j), bc = load(s.bx + 2 * s.ocp + j);
        const V bhc = load(s.bhc + j);
        for (int i = 0; i < R; ++i) {
            const float* g = s.g[row0 + i];
            const V u = activate(s.gate, acc[i][0] + load_n(g + j, n) + bu);
            const V r = activate(s.gate, acc[i][1] + load_n(g + s.oc + j, n) + br);
            const V c = activate(s.act, load_n(g + 2 * s.oc + j, n) + bc + r * (acc[i][2] + bhc));
            store_n(s.hout[row0 + i] + j, blend(s.origin, u, load_n(a[i] + j, n), c), n);
        }
    });
}

template <int R, int NB>
static void update_reset_tile(const GruStep& s, int64_t row0, int64_t block) {
    const float* const* a = s.hprev + row0;
    block_product<R, 2, Tiling<2>::KU, NB>(a, s.wh, s.oc, block, 0, s.oc, [&](int64_t j, int64_t n,
                                                                           V (&acc)[R][2]) {
        const V bu = load(s.bx + j), br = load(s.bx + s.ocp + j);
        for (int i = 0; i < R; ++i) {
            const float* g = s.g[row0 + i];
            const int64_t row = (row0 + i) * s.ocp + j;
            store(s.u + row, activate(s.gate, acc[i][0] + load_n(g + j, n) + bu));
            const V r = activate(s.gate, acc[i][1] + load_n(g + s.oc + j, n) + br);
            store(s.rh + row, r * load_n(a[i] + j, n));  // zero past OC: hp loads zeros there
        }
    });
}

template <int R, int NB>
static void candidate_tile(const GruStep& s, int64_t row0, int64_t block) {
    const float* a[R];
    for (int i = 0; i < R; ++i) a[i] = s.rh + (row0 + i) * s.ocp;
    block_product<R, 1, Tiling<1>::KU, NB>(a, s.wh, s.oc, block, 2, s.oc, [&](int64_t j, int64_t n,
                                                                           V (&acc)[R][1]) {
        const V bc = load(s.bx + 2 * s.ocp + j), bhc = load(s.bhc + j);
        for (int i = 0; i < R; ++i) {
            const float* g = s.g[row0 + i];
            const V c = activate(s.act, load_n(g + 2 * s.oc + j, n) + bc + acc[i][0] + bhc);
            const V u = load(s.u + (row0 + i) * s.ocp + j);
            const V hp = load_n(s.hprev[row0 + i] + j, n);
            store_n(s.hout[row0 + i] + j, blend(s.origin, u, hp, c), n);
        }
    });
}

// nrows (1..MR) picks the register tile compiled for exactly that many rows.
template <template <int> class Tile, int MR, class Args>
static void dispatch(const Args& s, int64_t row0, int64_t nrows, int64_t block) {
    static_assert(MR >= 1 && MR <= 8, "tiles of 1 to 8 rows");
    switch (nrows) {
#define FB_ROWS(r) \
    case r: return Tile<(r <= MR ? r : MR)>::run(s, row0, block);
        FB_ROWS(1) FB_ROWS(2) FB_ROWS(3) FB_ROWS(4) FB_ROWS(5) FB_ROWS(6) FB_ROWS(7) FB_ROWS(8)
#undef FB_ROWS
        default: return;
    }
}
template <int R>
struct Project {
    static void run(const GruProjection& p, int64_t r0, int64_t b) { project_tile<R>(p, r0, b); }
};
// The step tiles of one pass (G gates): single blocks up to MR rows, block pairs up to
// kPairRows rows (0: none on this ISA).
template <int G, template <int, int> class Fn>
struct StepTiles {
    template <int R>
    struct One {
        static void run(const GruStep& s, int64_t r0, int64_t b) { Fn<R, 1>::run(s, r0, b); }
    };
    template <int R>
    struct Pair {
        static void run(const GruStep& s, int64_t r0, int64_t b) { Fn<R, 2>::run(s, r0, b); }
    };
    static GruTile<GruStep> table() {
        constexpr int mr = Tiling<G>::MR, pr = kPairRows;
        if constexpr (pr > 0)
            return {mr, dispatch<One, mr, GruStep>, pr, dispatch<Pair, pr, GruStep>};
        else
            return {mr, dispatch<One, mr, GruStep>, 0, nullptr};
    }
};
template <int R, int NB>
struct Lbr {
    static void run(const GruStep& s, int64_t r0, int64_t b) { lbr_tile<R, NB>(s, r0, b); }
};
template <int R, int NB>
struct UpdateReset {
    static void run(const GruStep& s, int64_t r0, int64_t b) { update_reset_tile<R, NB>(s, r0, b); }
};
template <int R, int NB>
struct Candidate {
    static void run(const GruStep& s, int64_t r0, int64_t b) { candidate_tile<R, NB>(s, r0, b); }
};

static void activate_array(GruAct a, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; i += VW) {
        const int64_t m = std::min<int64_t>(VW, n - i);
        store_n(y + i, activate(a, load_n(x + i, m)), m);
    }
}

}  // namespace FB_ISA_NS

const GruKernels& FB_GRU_KERNELS_FN() {
    using namespace FB_ISA_NS;
    static const GruKernels k{
        {kProjectRows, dispatch<Project, kProjectRows, GruProjection>, 0, nullptr},
        StepTiles<3, Lbr>::table(),
        StepTiles<2, UpdateReset>::table(),
        StepTiles<1, Candidate>::table(),
        activate_array};
    return k;
}

}  // namespace fusebridge
