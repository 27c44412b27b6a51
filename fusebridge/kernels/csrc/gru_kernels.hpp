// The per-ISA inner loops of the fused GRU: the input projection x @ Wx and the recurrent product
// h_prev @ Wh on packed weights, with the gate math in the latter's epilogue; one table per
// instruction set, chosen at run time.
#pragma once
#include <cstdint>

#include "isa.hpp"  // Isa, which gru.hpp's descriptor names

namespace fusebridge {

enum class GruAct : int { sigmoid = 0, tanh = 1, relu = 2, identity = 3 };

// Wx and Wh are packed alike, in blocks of kGruBlock hidden units: for a matrix of K rows
// (K = IC for Wx, OC for Wh), block b holds, for k = 0..K-1, the 16 update, then 16 reset, then
// 16 candidate weights of its units (row k of the matrix), zero past OC.
// One block is one AVX-512 vector (two AVX2, four SSE), so the packing is the same on every ISA.
constexpr int kGruBlock = 16;
constexpr int kGruPackStride = 3 * kGruBlock;  // floats per k in a block

// The input projection of one direction: g = x @ Wx for a set of rows (the bias joins later, in
// the step's epilogue).
struct GruProjection {
    int64_t ic, oc;
    const float* const* x;  // row i: the input row (IC floats)
    float* g;               // row i at g + i * g_stride: its projection, [u | r | c] (3*OC)
    int64_t g_stride;
    const float* wx;        // packed Wx of this direction
};

// One direction at one time step. Rows are the sentences still active, longest first.
struct GruStep {
    int64_t oc, ocp;            // hidden size, rounded up to kGruBlock
    const float* const* hprev;  // row i: the state before this step (OC floats)
    float* const* hout;         // row i: where the new state goes
    const float* const* g;      // row i: projected input, [u | r | c] (3*OC) of this direction
    const float* wh;            // packed Wh of this direction
    const float* bx;            // [3, ocp]: input bias (+ recurrent u, r bias)
    const float* bhc;           // [ocp]: recurrent candidate bias
    float* u;                   // [rows, ocp] scratch of the two-pass form
    float* rh;                  // [rows, ocp] r * h_prev, the second pass's left operand
    GruAct act, gate;
    bool origin;
};

// Each tile function computes rows [row0, row0 + nrows) of one block of 16 hidden units
// (`fn`, nrows <= rows), or of blocks `block` and `block + 1` together (`pair`, nrows <=
// pair_rows; 0 and null where the ISA has no room for them). A row's arithmetic never depends
// on nrows, row0 or which of the two ran.
template <class Args>
struct GruTile {
    using Fn = void (*)(const Args& s, int64_t row0, int64_t nrows, int64_t block);
    int rows;
    Fn fn;
    int pair_rows;
    Fn pair;
};

struct GruKernels {
    GruTile<GruProjection> project;
    // linear_before_reset: c = act(g_c + r * (h @ Wh_c + bh_c)); one pass.
    GruTile<GruStep> lbr;
    // linear_before_reset=false, first pass: u and r, then rh = r * h_prev.
    GruTile<GruStep> update_reset;
    // second pass: c = act(g_c + rh @ Wh_c + bh_c) and the new state.
    GruTile<GruStep> candidate;
    // y = act(x), the same vector code the epilogues use (tests check its accuracy).
    void (*activate)(GruAct act, const float* x, float* y, int64_t n);
};

const GruKernels& gru_kernels_scalar();
const GruKernels& gru_kernels_avx2();
const GruKernels& gru_kernels_avx512();

}  // namespace fusebridge
