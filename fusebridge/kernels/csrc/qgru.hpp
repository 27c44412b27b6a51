// The quantized fused GRU: fusion_gru with int8 or bf16 weights (docs/gru.md, "Quantized GRU").
// int8: weights s8 with one scale per gate column (Wx and Wh apart), activations u8 with one
// scale per row (each word's input, each sentence's state at each step), int32 sums; bf16:
// weights and activations bf16, f32 sums in VDPBF16PS's order. Bias, gate math and the state
// between steps stay f32. Every row's arithmetic is fixed by its own data, so a sentence gets
// the same bits in any batch, on any thread count and on every ISA (extensions emulated).
#pragma once
#include <cstdint>

#include "descriptor.hpp"
#include "gru.hpp"
#include "qgru_kernels.hpp"

namespace fusebridge {

#define FUSEBRIDGE_QGRU_DESC(F)                                                                 \
    F(SeqLayout, layout)                                                                        \
    F(int64_t, ic)                                                                              \
    F(int64_t, oc)                                                                              \
    F(int64_t, directions)                                                                      \
    F(bool, reverse)                                                                            \
    F(bool, linear_before_reset)                                                                \
    F(bool, origin_mode)                                                                        \
    F(GruAct, act)                                                                              \
    F(GruAct, gate)                                                                             \
    F(bool, projection)                                                                         \
    F(GruPrecision, precision) /* int8 or bf16 */                                               \
    F(Isa, isa)                                                                                 \
    F(unsigned, extensions)    /* kExtVnni, kExtBf16 the kernels may use (runtime.hpp) */

struct QGruDesc {
    FUSEBRIDGE_DESCRIPTOR(QGruDesc, FUSEBRIDGE_QGRU_DESC)
};

// Packed quantized weights (QGRUWeights in qgru_weights.py, which quantizes and packs them): wx
// [D, OCp/16, groups(IC), 3, 16] and wh [D, OCp/16, groups(OC), 3, 16] 32-bit groups
// (qgru_kernels.hpp); int8 only: wx_scale, wh_scale [D, 3, OCp] per column, wx_comp, wh_comp
// [D, 3, OCp] (128 * column sums of the s8 values); bx [D, 3, OCp] and bhc [D, OCp] f32 as the
// float GRU's.
struct QGruWeightsView {
    const uint32_t *wx, *wh;
    const float *wx_scale, *wh_scale;
    const int32_t *wx_comp, *wh_comp;
    const float *bx, *bhc;
};

// Elements of each packed array (checked: directions 1 or 2, IC in [0, 2**31) (0: no
// projection), OC in [1, 2**31); int8 sums exact in int32: IC, OC <= kMaxInt8Depth).
struct QGruPackedSizes {
    int64_t wx, wh, columns /* each scale and comp array */, bx, bhc;
};
constexpr int64_t kMaxInt8Depth = 65536;  // 255 * 127 * 65536 < 2**31
QGruPackedSizes qgru_packed_sizes(GruPrecision p, int64_t directions, int64_t ic, int64_t oc);

class QGruPrimitive {
   public:
    explicit QGruPrimitive(const QGruDesc& desc);

    const GruPlan& plan(const int64_t* lens, int64_t n, int64_t steps) const;
    // As GruPrimitive::forward.
    void forward(const GruPlan& p, const float* x, const QGruWeightsView& w, const float* h0,
                 float* out, float* last) const;

    const QGruDesc& desc() const { return d_; }
    int64_t ocp() const { return ocp_; }

   private:
    void project(const GruPlan& p, const float* x, const QGruWeightsView& w, float* gproj) const;

    const QGruKernels& k_;
    QGruDesc d_;
    GruDesc plan_desc_;  // the float descriptor of the same shape, which plans the batch
    int64_t ocp_, blocks_, gx_, gh_;  // groups of an input row, of a state row
};

}  // namespace fusebridge
