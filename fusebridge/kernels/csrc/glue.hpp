// What the framework glues (integrations/mxnet/csrc/mxnet_ops.cc, integrations/paddle/csrc/
// paddle_ops.cc) share around the kernels, free of any framework: the dropout descriptor and
// mask shape of shared axes, the GRU's attributes, input shapes and forward. Primitives come
// from the process's cache (primitive_cache.hpp) at the ISA set now (runtime.hpp), both shared
// with fusebridge.kernels._C through libfusebridge_kernels.so. A bad value throws GlueError,
// whose message names the input or attribute but not the op: each glue adds that and raises
// it its framework's way.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dropout.hpp"
#include "gru.hpp"
#include "gru_kernels.hpp"
#include "op_attributes.hpp"
#include "primitive_cache.hpp"
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

// Same as fusebridge.kernels.dropout: outputs this large use non-temporal stores. It changes
// how y is written, never what.
constexpr int64_t kStreamMinBytes = int64_t(8) << 20;

// The descriptor of a dropout over a whole float32 tensor of `shape` (no shard), its mask
// shared over `axes`, at the ISA set now.
inline DropoutDesc dropout_desc(const Dims& shape, float p, DropoutMode mode, bool is_test,
                                const Dims& axes) {
    const Dims start(shape.size(), 0);
    return DropoutDesc{shape, shape, start, dropout_mask_shape(shape, axes), DType::f32,
                       p, mode, !is_test, current_isa(), kStreamMinBytes};
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

inline const char* const kGruInputs[] = {"x", "seq_lens", "wx", "wh", "bias_x", "bias_hc", "h0"};

struct GruDims {
    int64_t t, n, ic, oc, d;
};

// Checks every input's shape (in kGruInputs' order, h0 optional) against x's and wh's. The
// weights are packed (fusebridge.kernels.pack_gru_weights, gru.hpp): wx [D, OCp/16, IC, 3, 16],
// wh [D, OCp/16, OC, 3, 16], bias_x [D, 3, OCp], bias_hc [D, OCp], OCp = OC rounded up to 16.
inline GruDims gru_dims(const GruConfig& g, const std::vector<Dims>& in) {
    const Dims &x = in[0], &wh = in[3];
    if (x.size() != 3)
        throw GlueError(std::string("input 'x' must be 3-D ") +
                        (g.ntc ? "[N, T, IC]" : "[T, N, IC]") + " (layout " +
                        (g.ntc ? "ntc" : "tnc") + "), got " + str(x));
    const int64_t d = g.directions, B = kGruBlock;
    if (wh.size() != 5 || wh[0] != d || wh[2] < 1 || wh[1] != (wh[2] + B - 1) / B || wh[3] != 3 ||
        wh[4] != B)
        throw GlueError("input 'wh' must be packed [D, ceil(OC/16), OC, 3, 16] with D = " +
                        std::to_string(d) + " for direction " +
                        (d == 2 ? "bidirectional" : "forward/reverse") +
                        " (fusebridge.kernels.pack_gru_weights), got " + str(wh));
    const GruDims m{g.ntc ? x[1] : x[0], g.ntc ? x[0] : x[1], x[2], wh[2], d};
    const int64_t ocp = wh[1] * B;
    const std::vector<Dims> expected = {x,           {m.n},    {d, wh[1], m.ic, 3, B}, wh,
                                        {d, 3, ocp}, {d, ocp}, {d, m.n, m.oc}};
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

// The fused GRU over right-padded x with packed weights into y (x's layout, D*OC columns,
// zero at padding): the process's primitive of these attributes and sizes, at the ISA set now.
inline void gru_forward(const GruConfig& g, const GruDims& m, const std::vector<int64_t>& lens,
                        const float* x, const GruWeightsView& w, const float* h0, float* y) {
    const auto prim = primitive<GruPrimitive>(
        GruDesc{g.ntc ? SeqLayout::ntc : SeqLayout::tnc, m.ic, m.oc, g.directions, g.reverse,
                g.lbr, g.origin, g.act, g.gate, /*projection=*/true, current_isa()});
    const GruPlan& plan = prim->plan(lens.data(), int64_t(lens.size()), m.t);
    prim->forward(plan, x, w, h0, y, nullptr);
}

}  // namespace fusebridge::glue
