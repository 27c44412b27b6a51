// The per-ISA inner loops of the fused GRU: the recurrent product h_prev @ Wh on packed weights
// with the gate math in its epilogue, one table per instruction set, chosen at run time.
#pragma once
#include <cstdint>

#include "dropout_kernels.hpp"  // Isa

namespace fusebridge {

enum class GruAct : int { sigmoid = 0, tanh = 1, relu = 2, identity = 3 };

// Wh is packed in blocks of kGruBlock hidden units: block b holds, for k = 0..OC-1, the 16
// update, then 16 reset, then 16 candidate weights of its units (row k of Wh), zero past OC.
// One block is one AVX-512 vector (two AVX2, four SSE), so the packing is the same on every ISA.
constexpr int kGruBlock = 16;
constexpr int kGruPackStride = 3 * kGruBlock;  // floats per k in a block

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

using GruTileFn = void (*)(const GruStep& s, int64_t row0, int64_t nrows, int64_t block);

struct GruKernels {
    int tile_rows;  // rows per register tile; nrows passed to the tile functions is <= this
    // linear_before_reset: c = act(g_c + r * (h @ Wh_c + bh_c)); one pass.
    GruTileFn lbr;
    // linear_before_reset=false, first pass: u and r, then rh = r * h_prev.
    GruTileFn update_reset;
    // second pass: c = act(g_c + rh @ Wh_c + bh_c) and the new state.
    GruTileFn candidate;
    // y = act(x), the same vector code the epilogues use (tests check its accuracy).
    void (*activate)(GruAct act, const float* x, float* y, int64_t n);
};

const GruKernels& gru_kernels_scalar();
const GruKernels& gru_kernels_avx2();
const GruKernels& gru_kernels_avx512();
const GruKernels& gru_kernels_for(Isa isa);

}  // namespace fusebridge
