// The per-ISA inner loops of the quantized GRU (qgru.hpp): int8 (u8 x s8 dot products into
// int32) and bf16 (pairs of bf16 products into f32) on packed weights, with the float gate math
// in the products' epilogues. Every ISA gives the same bits: the integer sums are exact, the bf16
// sums follow VDPBF16PS step by step, and the float math is compiled without contraction
// (docs/gru.md, "Quantized GRU").
#pragma once
#include <cstdint>
#include <cstring>

#include "gru_kernels.hpp"  // GruAct, kGruBlock

namespace fusebridge {

enum class GruPrecision : int { f32 = 0, int8 = 1, bf16 = 2 };

// Packed weights and quantized rows are arrays of 32-bit groups: 4 int8 values (k = 4g .. 4g+3)
// or 2 bf16 values (k = 2g, 2g+1; the even one in the low half), the operand layout of VPDPBUSD
// and VDPBF16PS. A matrix of K rows is packed per block of kGruBlock hidden units: block b holds,
// for each group g, the 16 update, then 16 reset, then 16 candidate groups of its units.
constexpr int64_t kQGroupStride = 3 * kGruBlock;  // groups per k-group in a block

// Values per group, and groups for K values.
inline int64_t q_group_values(GruPrecision p) { return p == GruPrecision::int8 ? 4 : 2; }
inline int64_t q_groups(GruPrecision p, int64_t k) {
    return (k + q_group_values(p) - 1) / q_group_values(p);
}

// float to bf16 bits: round to nearest even; NaN stays a (quiet) NaN; denormals and zeros become
// zeros of their sign (what VDPBF16PS reads them as). Weights and activations alike.
inline uint32_t bf16_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (b >> 16) | 0x40u;
    if ((b & 0x7F800000u) == 0) return (b >> 16) & 0x8000u;
    return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

// The input projection of one direction for a set of quantized x rows (without bias).
struct QGruProjection {
    int64_t oc, groups;
    const uint32_t* a;      // row i at a + i * a_stride: the quantized input row
    int64_t a_stride;
    const float* a_scale;   // int8: row i's scale; bf16: unused
    float* g;               // row i at g + i * g_stride: its projection [u | r | c]
    int64_t g_stride;
    const uint32_t* w;      // packed Wx of this direction
    const float* w_scale;   // int8 [3, ocp]: each column's scale
    const int32_t* w_comp;  // int8 [3, ocp]: 128 * each column's sum (the u8 offset's share)
};

// One direction at one step over `rows` active sentences; quantized rows a (h_prev, or r * h_prev
// for the candidate pass of linear_before_reset=false) are contiguous in scratch.
struct QGruStep {
    int64_t oc, ocp, groups;
    const uint32_t* a;
    int64_t a_stride;
    const float* a_scale;
    const float* const* hprev;  // row i: the state before this step (OC floats)
    float* const* hout;         // row i: where the new state goes
    const float* const* g;      // row i: projected input [u | r | c] of this direction
    const uint32_t* w;          // packed Wh of this direction
    const float* w_scale;
    const int32_t* w_comp;
    const float* bx;            // [3, ocp]: input bias (+ recurrent u, r bias)
    const float* bhc;           // [ocp]: recurrent candidate bias
    float* u;                   // [rows, ocp] scratch of the two-pass form
    float* rh;                  // [rows, ocp] r * h_prev, quantized for the second pass
    GruAct act, gate;
    bool origin;
};

template <class Args>
struct QGruTile {
    using Fn = void (*)(const Args& s, int64_t row0, int64_t nrows, int64_t block);
    int rows;  // the most rows one call takes
    Fn fn;
};

struct QGruKernels {
    // A float row of k values into groups (zero-padded to whole groups); int8 also writes the
    // row's scale (its largest magnitude / 127; NaN when the row holds a NaN or an infinity).
    void (*quantize)(const float* x, int64_t k, uint32_t* out, float* scale);
    QGruTile<QGruProjection> project;
    QGruTile<QGruStep> lbr, update_reset, candidate;
};

// Tables per (ISA, extension) build, each with both precisions. "emulated": the dot products
// written with the ISA's base instructions, giving the bits the extension's instruction gives.
const QGruKernels& qgru_kernels_scalar(GruPrecision p);
const QGruKernels& qgru_kernels_avx2(GruPrecision p);
const QGruKernels& qgru_kernels_avx2_vnni(GruPrecision p);
const QGruKernels& qgru_kernels_avx512(GruPrecision p);
const QGruKernels& qgru_kernels_avx512_vnni(GruPrecision p);
const QGruKernels& qgru_kernels_avx512_bf16(GruPrecision p);

}  // namespace fusebridge
