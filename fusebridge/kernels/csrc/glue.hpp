// What the framework glues (integrations/mxnet/csrc/mxnet_ops.cc, integrations/paddle/csrc/
// paddle_ops.cc) share around the kernels, free of any framework: the dropout mask shape of
// shared axes, the GRU's attributes, input shapes and packed weights. A bad value throws
// GlueError, whose message names the input or attribute but not the op: each glue adds that
// and raises it its framework's way.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "aligned.hpp"
#include "gru.hpp"
#include "isa.hpp"
#include "op_attributes.hpp"
#include "runtime.hpp"

namespace fusebridge::glue {

using Dims = std::vector<int64_t>;

struct GlueError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

inline std::string str(const Dims& d) {
    std::ostringstream s;
    s << "[";
    for (size_t i = 0; i < d.size(); ++i) s << (i ? ", " : "") << d[i];
    s << "]";
    return s.str();
}

// `shape` with 1 on every (shared) axis of `axes`.
inline Dims dropout_mask_shape(const Dims& shape, const Dims& axes) {
    const int64_t nd = int64_t(shape.size());
    Dims mask = shape;
    std::vector<bool> seen(size_t(nd), false);
    for (int64_t a : axes) {
        if (a < -nd || a >= nd)
            throw GlueError("attr 'axes' " + str(axes) + ": axis " + std::to_string(a) +
                            " is out of range for x of rank " + std::to_string(nd));
        const int64_t k = a < 0 ? a + nd : a;
        if (seen[size_t(k)])
            throw GlueError("attr 'axes' " + str(axes) + " repeats axis " + std::to_string(a));
        seen[size_t(k)] = true;
        mask[size_t(k)] = 1;
    }
    return mask;
}

// Bytes of a packed mask of this shape (bit i in byte i / 8, LSB first).
inline int64_t packed_bytes(const Dims& mask) {
    int64_t n = 1;
    for (int64_t v : mask) n *= v;
    return (n + 7) / 8;
}

// The instruction set a glue runs: the best this CPU runs, or the one $FUSEBRIDGE_ISA names
// (as for fusebridge.kernels: it may only lower it). Throws GlueError for one it cannot run.
inline Isa isa_from_env() {
    const Isa best = best_isa();
    const char* want = std::getenv("FUSEBRIDGE_ISA");
    if (want == nullptr) return best;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
        if (std::string(want) == isa_name(isa) && int(isa) <= int(best)) return isa;
    throw GlueError(std::string("fusebridge: FUSEBRIDGE_ISA='") + want +
                    "' is not an instruction set this CPU runs (best: " + isa_name(best) + ")");
}

// ---------------------------------------------------------------- fusion GRU

struct GruConfig {
    int directions = 1;
    bool reverse = false, ntc = false, lbr = false, origin = true;
    GruAct act = GruAct::tanh, gate = GruAct::sigmoid;
};

inline GruAct gru_activation(op_attributes::fusion_gru::Activation a) {
    using Activation = op_attributes::fusion_gru::Activation;
    switch (a) {
        case Activation::sigmoid: return GruAct::sigmoid;
        case Activation::tanh: return GruAct::tanh;
        case Activation::relu: return GruAct::relu;
        case Activation::identity: return GruAct::identity;
    }
    throw GlueError("unknown GRU activation " + std::to_string(int(a)));  // not an enumerator
}

// The kernel's configuration from the attributes, as their enums in op_attributes.hpp.
inline GruConfig gru_config(op_attributes::fusion_gru::Direction direction,
                            op_attributes::fusion_gru::Layout layout, bool lbr, bool origin,
                            op_attributes::fusion_gru::Activation activation,
                            op_attributes::fusion_gru::GateActivation gate_activation) {
    using op_attributes::fusion_gru::Direction;
    GruConfig g;
    g.directions = direction == Direction::bidirectional ? 2 : 1;
    g.reverse = direction == Direction::reverse;
    g.ntc = layout == op_attributes::fusion_gru::Layout::ntc;
    g.lbr = lbr;
    g.origin = origin;
    g.act = gru_activation(activation);
    g.gate = gru_activation(gate_activation);
    return g;
}

// The same from the attributes' values as given (Paddle's); one outside an attribute's
// choices throws op_attributes' std::invalid_argument.
inline GruConfig gru_config(const std::string& direction, const std::string& layout, bool lbr,
                            bool origin, const std::string& activation,
                            const std::string& gate_activation) {
    namespace op = op_attributes::fusion_gru;
    using op_attributes::choice;
    const auto dir = choice<op::Direction>(op::direction, direction);
    const auto lay = choice<op::Layout>(op::layout, layout);
    const auto act = choice<op::Activation>(op::activation, activation);
    const auto gate = choice<op::GateActivation>(op::gate_activation, gate_activation);
    return gru_config(dir, lay, lbr, origin, act, gate);
}

inline const char* const kGruInputs[] = {"x", "seq_lens", "wx", "wh", "bias", "bias_h", "h0"};

struct GruDims {
    int64_t t, n, ic, oc, d;
};

// Checks every input's shape (in kGruInputs' order, h0 optional) against x's and wh's.
inline GruDims gru_dims(const GruConfig& g, const std::vector<Dims>& in) {
    const Dims &x = in[0], &wh = in[3];
    if (x.size() != 3)
        throw GlueError(std::string("input 'x' must be 3-D ") +
                        (g.ntc ? "[N, T, IC]" : "[T, N, IC]") + " (layout " +
                        (g.ntc ? "ntc" : "tnc") + "), got " + str(x));
    const int64_t d = g.directions;
    if (wh.size() != 3 || wh[0] != d || wh[2] != 3 * wh[1])
        throw GlueError("input 'wh' must be [D, OC, 3*OC] with D = " + std::to_string(d) +
                        " for direction " + (d == 2 ? "bidirectional" : "forward/reverse") +
                        ", got " + str(wh));
    const GruDims m{g.ntc ? x[1] : x[0], g.ntc ? x[0] : x[1], x[2], wh[1], d};
    const int64_t oc = m.oc;
    const std::vector<Dims> expected = {x,          {m.n},       {d, m.ic, 3 * oc}, wh,
                                        {d, 3 * oc}, {d, 3 * oc}, {d, m.n, oc}};
    for (size_t i = 1; i < in.size(); ++i)
        if (in[i] != expected[i])
            throw GlueError(std::string("input '") + kGruInputs[i] + "' must have shape " +
                            str(expected[i]) + " for x " + str(x) + " and wh " + str(wh) +
                            ", got " + str(in[i]));
    return m;
}

inline Dims gru_y_shape(const GruConfig& g, const GruDims& m) {
    return g.ntc ? Dims{m.n, m.t, m.d * m.oc} : Dims{m.t, m.n, m.d * m.oc};
}

// A sentence length as the kernel takes it: a whole number in [0, steps].
inline int64_t gru_length(double v, int64_t steps, int64_t index) {
    if (!(v >= 0 && v <= double(steps)) || v != double(int64_t(v))) {
        std::ostringstream msg;
        msg << "input 'seq_lens' must hold whole numbers in [0, " << steps
            << "] (the padded length T), got " << v << " at index " << index;
        throw GlueError(msg.str());
    }
    return int64_t(v);
}

// The kernel's packed weights (GRUWeights in fusebridge/kernels/gru_weights.py) from the
// canonical ones: wx and wh in blocks of 16 hidden units [D, OCp/16, K, 3, 16];
// bias_x [D, 3, OCp] = bias + the recurrent update/reset bias; bias_hc [D, OCp].
struct PackedGru {
    AlignedVector<float> wx, wh, bx, bhc;
    GruWeightsView view() const { return {wx.data(), wh.data(), bx.data(), bhc.data()}; }
};

inline PackedGru pack_gru(const GruDims& m, const float* wx, const float* wh, const float* b,
                          const float* bh) {
    const int64_t D = m.d, IC = m.ic, OC = m.oc, G3 = 3 * OC;
    const int64_t B = kGruBlock, OCp = (OC + B - 1) / B * B;
    PackedGru p;
    p.wx.resize(size_t(D * OCp * IC * 3));
    pack_gru_blocks(wx, D, IC, OC, p.wx.data());
    p.wh.resize(size_t(D * OCp * OC * 3));
    pack_gru_blocks(wh, D, OC, OC, p.wh.data());
    p.bx.assign(size_t(D * 3 * OCp), 0.0f);
    p.bhc.assign(size_t(D * OCp), 0.0f);
    for (int64_t d = 0; d < D; ++d)
        for (int64_t gate = 0; gate < 3; ++gate)
            for (int64_t u = 0; u < OC; ++u) {
                const float bxv = b[d * G3 + gate * OC + u], bhv = bh[d * G3 + gate * OC + u];
                // update and reset add their recurrent bias; the candidate's stays apart,
                // inside r * (...) with linear_before_reset.
                p.bx[size_t((d * 3 + gate) * OCp + u)] = gate < 2 ? bxv + bhv : bxv;
                if (gate == 2) p.bhc[size_t(d * OCp + u)] = bhv;
            }
    return p;
}

}  // namespace fusebridge::glue

// The op library holds its own copy of the kernels' settings: fusebridge.kernels hands it its
// thread count when the library loads and at every set_num_threads
// (kernels_library.follow_thread_count), so the process has one count whatever OMP_NUM_THREADS
// says (Paddle sets it to 1 when imported, for its own math library). Defined here, not inline:
// each op library has one translation unit that includes this header.
extern "C" __attribute__((visibility("default"))) void fusebridge_set_num_threads(int n) {
    if (n >= 1 && n <= fusebridge::thread_cap()) fusebridge::set_num_threads(n);
}
extern "C" __attribute__((visibility("default"))) int fusebridge_num_threads() {
    return fusebridge::max_threads();
}
