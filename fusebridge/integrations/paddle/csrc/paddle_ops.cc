// fusebridge's kernels as Paddle custom operators (paddle/extension.h: PD_BUILD_OP), built by
// op_library.py with paddle.utils.cpp_extension from this file alone, linked with the kernels
// library fusebridge.kernels._C loads (one thread pool, ISA setting and primitive cache for the
// process). They run in dygraph, in static programs and in Paddle Inference.
//
//   fusebridge_dropout(X, Key; p, mode, is_test, axes, save_mask) -> (Out, Mask)
//     X float32 of any shape; Key int64 [2] = (seed, offset) as uint64 bits: the bits of
//     fusebridge.kernels.dropout for that seed and offset (docs/dropout.md), shared over
//     `axes`. Mask uint8 [ceil(mask elements / 8)] (bit i of the mask shape in byte i / 8,
//     LSB first), or [0] with save_mask false: the grad then regenerates the bits from Key.
//     Grad: X@GRAD = Out@GRAD * keep * scale.
//   fusebridge_softmax_dropout(X, Key; p, mode, is_test, axis, save_mask) -> (Out, Mask)
//     dropout(softmax(X, axis)) in one pass, bit-identical to softmax then fusebridge_dropout;
//     Mask as above (the output's shape). Grad from X (the probabilities are recomputed, not
//     stored) and Mask, or Key with save_mask false.
//   fusebridge_matmul_dropout(A, B, Key; p, mode, is_test, transpose_a, transpose_b,
//                             save_mask) -> (Out, Mask)
//     dropout(op(A) @ op(B)) with np.matmul's batch broadcasting, the dropout applied while
//     each output tile is in cache; bit-identical to the matmul then fusebridge_dropout. Grad:
//     dZ = Out@GRAD * keep * scale (Mask, or Key with save_mask false), then Paddle's own
//     matmul for A@GRAD and B@GRAD, summed over broadcast batch dimensions.
//   fusebridge_fusion_gru(X, SeqLens, Wx, Wh, BiasX, BiasHc[, H0]; direction, layout,
//                         linear_before_reset, origin_mode, activation, gate_activation) -> Y
//     fusebridge.kernels.fusion_gru over right-padded input, forward only. The weights are
//     packed once, by fusebridge.kernels.pack_gru_weights (save_paddle writes them so, as
//     parameters): Wx [D, OCp/16, IC, 3, 16], Wh [D, OCp/16, OC, 3, 16], BiasX [D, 3, OCp],
//     BiasHc [D, OCp] (OCp: OC rounded up to 16); H0 [D, N, OC]; X [T, N, IC] (tnc) or
//     [N, T, IC] (ntc); SeqLens int32 or int64 [N]. Y has D*OC columns in X's layout, zero at
//     padding. No call packs weights or builds a primitive that an earlier call built: the
//     weights are the inputs, and primitives come from the process's cache.
//
// Errors are Paddle errors (PD_THROW) naming the op and the input or attribute.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "dropout.hpp"
#include "fused_dropout.hpp"
#include "glue.hpp"
#include "gru.hpp"
#include "op_attributes.hpp"
#include "paddle/extension.h"
#include "primitive_cache.hpp"
#include "runtime.hpp"

namespace fb = fusebridge;
namespace glue = fusebridge::glue;
// Each attribute's name, type and allowed values, as the op schemas give them.
namespace schema = fusebridge::op_attributes;
using glue::Dims;

namespace {

constexpr const char* kDropout = "fusebridge_dropout";
constexpr const char* kSoftmax = "fusebridge_softmax_dropout";
constexpr const char* kMatmul = "fusebridge_matmul_dropout";
constexpr const char* kGru = "fusebridge_fusion_gru";
// Runs `body`, re-raising a C++ exception (a GlueError, a kernel's check, or one a part of a
// kernel threw on a pool thread, carried to this one) as a Paddle error that names the op.
template <typename F>
auto guarded(const char* op, F&& body) -> decltype(body()) {
    try {
        return body();
    } catch (const ::common::PD_Exception&) {
        throw;  // PD_THROW's own (require() below): it names the op already
    } catch (const std::bad_alloc&) {
        PD_THROW(op, ": the kernel could not allocate its work memory (std::bad_alloc)");
    } catch (const std::exception& e) {
        PD_THROW(op, ": ", e.what());
    }
}

void require(bool ok, const char* op, const std::string& what) {
    if (!ok) PD_THROW(op, ": ", what);
}

void require_cpu_float(const paddle::Tensor& t, const char* op, const char* name) {
    require(t.is_cpu(), op, std::string("input '") + name + "' must be on the CPU");
    require(t.dtype() == paddle::DataType::FLOAT32, op,
            std::string("input '") + name + "' must be float32, got " +
                phi::DataTypeToString(t.dtype()));
}

// ---------------------------------------------------------------- dropout

// Every dropout op's mode: softmax_dropout::mode and matmul_dropout::mode are dropout::mode.
fb::DropoutMode dropout_mode(const std::string& mode) {
    namespace op = schema::dropout;
    return schema::choice<op::Mode>(op::mode, mode) == op::Mode::upscale_in_train
               ? fb::DropoutMode::upscale_in_train
               : fb::DropoutMode::downgrade_in_infer;
}

float probability(float p) {
    if (!(p >= 0.0f && p <= 1.0f))
        throw glue::GlueError("attr 'p' is " + std::to_string(p) + ", expected a value in [0, 1]");
    return p;
}

Dims axes_of(const std::vector<int>& axes) { return Dims(axes.begin(), axes.end()); }

using DropoutPrimitive = std::shared_ptr<const fb::DropoutPrimitive>;

DropoutPrimitive dropout_primitive(const Dims& shape, float p, const std::string& mode,
                                   bool is_test, const std::vector<int>& axes) {
    return fb::primitive<fb::DropoutPrimitive>(
        glue::dropout_desc(shape, probability(p), dropout_mode(mode), is_test, axes_of(axes)));
}

// (seed, offset) from Key int64 [2].
std::pair<uint64_t, uint64_t> key_of(const paddle::Tensor& key, const char* op) {
    require(key.is_cpu() && key.dtype() == paddle::DataType::INT64 && key.numel() == 2, op,
            "input 'Key' must be int64 [2] (seed, offset) on the CPU, got " +
                phi::DataTypeToString(key.dtype()) + " " + glue::str(key.shape()));
    const int64_t* k = key.data<int64_t>();
    return {uint64_t(k[0]), uint64_t(k[1])};
}

// A forward's Mask output, zeroed (the fused kernels OR bits in, and the unused high bits of
// the last byte stay 0), for `like`'s place; [0] without save_mask.
paddle::Tensor new_mask(int64_t bytes, bool save_mask, const paddle::Tensor& like) {
    paddle::Tensor mask =
        paddle::empty({save_mask ? bytes : 0}, paddle::DataType::UINT8, like.place());
    if (save_mask && bytes > 0) std::memset(mask.data<uint8_t>(), 0, size_t(bytes));
    return mask;
}

uint8_t* mask_data(paddle::Tensor& mask, bool save_mask) {
    return save_mask ? mask.data<uint8_t>() : nullptr;
}

// A grad op's saved Mask, checked against the `bytes` its forward wrote; null without save_mask.
const uint8_t* saved_mask(const paddle::Tensor& mask, int64_t bytes, bool save_mask,
                          const char* op) {
    if (!save_mask) return nullptr;
    require(mask.dtype() == paddle::DataType::UINT8 && mask.numel() == bytes, op,
            "input 'Mask' must be uint8 [" + std::to_string(bytes) + "], got " +
                glue::str(mask.shape()));
    return mask.data<uint8_t>();
}

// dy * keep * scale: the bits from the saved mask, or regenerated from the key (dropout(dy)
// with the same bits is exactly that).
paddle::Tensor dropped_grad(const fb::DropoutPrimitive& prim, const paddle::Tensor& dy,
                            const paddle::Tensor& mask, bool save_mask, const paddle::Tensor& key,
                            const char* op) {
    const auto [seed, offset] = key_of(key, op);
    paddle::Tensor dx = paddle::empty(dy.shape(), dy.dtype(), dy.place());
    if (const uint8_t* m = saved_mask(mask, prim.mask_bytes(), save_mask, op))
        prim.apply_mask(dy.data<float>(), dx.data<float>(), m);
    else
        prim.forward(dy.data<float>(), dx.data<float>(), nullptr, seed, offset);
    return dx;
}

std::vector<paddle::Tensor> dropout_forward(const paddle::Tensor& x, const paddle::Tensor& key,
                                            float p, const std::string& mode, bool is_test,
                                            const std::vector<int>& axes, bool save_mask) {
    return guarded(kDropout, [&] {
        require_cpu_float(x, kDropout, "X");
        const auto [seed, offset] = key_of(key, kDropout);
        const DropoutPrimitive prim = dropout_primitive(x.shape(), p, mode, is_test, axes);
        paddle::Tensor y = paddle::empty(x.shape(), x.dtype(), x.place());
        paddle::Tensor mask = new_mask(prim->mask_bytes(), save_mask, x);
        prim->forward(x.data<float>(), y.data<float>(), mask_data(mask, save_mask), seed, offset);
        return std::vector<paddle::Tensor>{y, mask};
    });
}

std::vector<paddle::Tensor> dropout_backward(const paddle::Tensor& key, const paddle::Tensor& mask,
                                             const paddle::Tensor& dy, float p,
                                             const std::string& mode, bool is_test,
                                             const std::vector<int>& axes, bool save_mask) {
    return guarded(kDropout, [&] {
        require_cpu_float(dy, kDropout, "Out@GRAD");
        const DropoutPrimitive prim = dropout_primitive(dy.shape(), p, mode, is_test, axes);
        return std::vector<paddle::Tensor>{dropped_grad(*prim, dy, mask, save_mask, key, kDropout)};
    });
}

std::vector<std::vector<int64_t>> dropout_shape(const std::vector<int64_t>& x,
                                                const std::vector<int64_t>& /*key*/, float p,
                                                const std::string& mode, bool /*is_test*/,
                                                const std::vector<int>& axes, bool save_mask) {
    return guarded(kDropout, [&] {
        probability(p), dropout_mode(mode);
        Dims mask = glue::dropout_mask_shape(x, axes_of(axes));
        bool known = true;
        for (int64_t d : mask) known = known && d >= 0;
        const int64_t bytes = !save_mask ? 0 : known ? glue::packed_bytes(mask) : -1;
        return std::vector<std::vector<int64_t>>{x, {bytes}};
    });
}

std::vector<paddle::DataType> dropout_dtype(const paddle::DataType& x, const paddle::DataType&) {
    return {x, paddle::DataType::UINT8};
}

// ---------------------------------------------------------------- softmax + dropout

// `axis` of a tensor of rank `rank`, in [0, rank).
int64_t softmax_axis(int axis, size_t rank) {
    const int64_t r = int64_t(rank);
    if (axis < -r || axis >= r)
        throw glue::GlueError("attr 'axis' is " + std::to_string(axis) +
                              ", out of range for x of rank " + std::to_string(r));
    return axis < 0 ? axis + r : axis;
}

std::shared_ptr<const fb::SoftmaxDropoutPrimitive> softmax_primitive(const Dims& shape, int axis,
                                                                     float p,
                                                                     const std::string& mode,
                                                                     bool is_test) {
    return fb::primitive<fb::SoftmaxDropoutPrimitive>(fb::SoftmaxDropoutDesc{
        shape, softmax_axis(axis, shape.size()), shape, Dims(shape.size(), 0), probability(p),
        dropout_mode(mode), !is_test, fb::current_isa(), glue::kStreamMinBytes});
}

std::vector<paddle::Tensor> softmax_forward(const paddle::Tensor& x, const paddle::Tensor& key,
                                            float p, const std::string& mode, bool is_test,
                                            int axis, bool save_mask) {
    return guarded(kSoftmax, [&] {
        require_cpu_float(x, kSoftmax, "X");
        const auto [seed, offset] = key_of(key, kSoftmax);
        const auto prim = softmax_primitive(x.shape(), axis, p, mode, is_test);
        paddle::Tensor y = paddle::empty(x.shape(), x.dtype(), x.place());
        paddle::Tensor mask = new_mask(prim->mask_bytes(), save_mask, x);
        prim->forward(x.data<float>(), y.data<float>(), mask_data(mask, save_mask), seed, offset);
        return std::vector<paddle::Tensor>{y, mask};
    });
}

std::vector<paddle::Tensor> softmax_backward(const paddle::Tensor& x, const paddle::Tensor& key,
                                             const paddle::Tensor& mask, const paddle::Tensor& dy,
                                             float p, const std::string& mode, bool is_test,
                                             int axis, bool save_mask) {
    return guarded(kSoftmax, [&] {
        require_cpu_float(x, kSoftmax, "X");
        require_cpu_float(dy, kSoftmax, "Out@GRAD");
        const auto [seed, offset] = key_of(key, kSoftmax);
        const auto prim = softmax_primitive(x.shape(), axis, p, mode, is_test);
        const uint8_t* m = saved_mask(mask, prim->mask_bytes(), save_mask, kSoftmax);
        paddle::Tensor dx = paddle::empty(dy.shape(), dy.dtype(), dy.place());
        prim->backward(dy.data<float>(), x.data<float>(), /*from_x=*/true, m, seed, offset,
                      dx.data<float>());
        return std::vector<paddle::Tensor>{dx};
    });
}

std::vector<std::vector<int64_t>> softmax_shape(const std::vector<int64_t>& x,
                                                const std::vector<int64_t>& /*key*/, float p,
                                                const std::string& mode, bool /*is_test*/,
                                                int axis, bool save_mask) {
    return guarded(kSoftmax, [&] {
        probability(p), dropout_mode(mode), softmax_axis(axis, x.size());
        bool known = true;
        for (int64_t d : x) known = known && d >= 0;
        const int64_t bytes = !save_mask ? 0 : known ? glue::packed_bytes(x) : -1;
        return std::vector<std::vector<int64_t>>{x, {bytes}};
    });
}

// ---------------------------------------------------------------- matmul + dropout

struct MatmulShapes {
    int64_t m, n, k;
    Dims batch, out;
};

// op(a) [..., M, K] @ op(b) [..., K, N] with np.matmul's broadcasting of the batch dims.
MatmulShapes matmul_shapes(const Dims& a, const Dims& b, bool ta, bool tb) {
    if (a.size() < 2 || b.size() < 2)
        throw glue::GlueError("inputs 'A' and 'B' must be at least 2-D, got " + glue::str(a) +
                              " and " + glue::str(b));
    MatmulShapes r;
    const size_t ra = a.size(), rb = b.size();
    r.m = ta ? a[ra - 1] : a[ra - 2];
    const int64_t ka = ta ? a[ra - 2] : a[ra - 1];
    r.k = tb ? b[rb - 1] : b[rb - 2];
    r.n = tb ? b[rb - 2] : b[rb - 1];
    if (ka != r.k)
        throw glue::GlueError("op(A) [..., M, K] and op(B) [..., K, N] must chain, got A " +
                              glue::str(a) + " and B " + glue::str(b));
    const size_t nb = std::max(ra, rb) - 2;
    r.batch.assign(nb, 1);
    for (size_t i = 0; i < nb; ++i) {
        const int64_t da = i + ra - 2 >= nb ? a[i + ra - 2 - nb] : 1;
        const int64_t db = i + rb - 2 >= nb ? b[i + rb - 2 - nb] : 1;
        if (da != db && da != 1 && db != 1)
            throw glue::GlueError("the batch dimensions of A " + glue::str(a) + " and B " +
                                  glue::str(b) + " do not broadcast");
        r.batch[i] = da == 1 ? db : da;
    }
    r.out = r.batch;
    r.out.push_back(r.m);
    r.out.push_back(r.n);
    return r;
}

std::shared_ptr<const fb::MatmulDropoutPrimitive> matmul_primitive(
    const Dims& a, const Dims& b, bool ta, bool tb, float p, const std::string& mode,
    bool is_test, MatmulShapes* shapes) {
    *shapes = matmul_shapes(a, b, ta, tb);
    return fb::primitive<fb::MatmulDropoutPrimitive>(fb::MatmulDropoutDesc{
        a, b, ta, tb, /*bias=*/false, shapes->out, Dims(shapes->out.size(), 0), probability(p),
        dropout_mode(mode), !is_test, fb::current_isa(), glue::kStreamMinBytes});
}

std::vector<paddle::Tensor> matmul_forward(const paddle::Tensor& a, const paddle::Tensor& b,
                                           const paddle::Tensor& key, float p,
                                           const std::string& mode, bool is_test, bool ta,
                                           bool tb, bool save_mask) {
    return guarded(kMatmul, [&] {
        require_cpu_float(a, kMatmul, "A");
        require_cpu_float(b, kMatmul, "B");
        const auto [seed, offset] = key_of(key, kMatmul);
        MatmulShapes shapes;
        const auto prim =
            matmul_primitive(a.shape(), b.shape(), ta, tb, p, mode, is_test, &shapes);
        paddle::Tensor y = paddle::empty(shapes.out, a.dtype(), a.place());
        paddle::Tensor mask = new_mask(prim->mask_bytes(), save_mask, a);
        prim->forward(a.data<float>(), b.data<float>(), nullptr, y.data<float>(),
                     mask_data(mask, save_mask), seed, offset);
        return std::vector<paddle::Tensor>{y, mask};
    });
}

// grad summed down to an operand's `shape` over the batch dims it was broadcast along.
paddle::Tensor unbroadcast(const paddle::Tensor& grad, const Dims& shape) {
    const Dims g = grad.shape();
    std::vector<int64_t> axes;
    const size_t lead = g.size() - shape.size();
    for (size_t i = 0; i < g.size() - 2; ++i)
        if (i < lead || (shape[i - lead] == 1 && g[i] != 1)) axes.push_back(int64_t(i));
    if (axes.empty()) return grad;
    paddle::Tensor summed = paddle::experimental::sum(grad, axes, grad.dtype(), true);
    return paddle::experimental::reshape(summed, shape);
}

std::vector<paddle::Tensor> matmul_backward(const paddle::Tensor& a, const paddle::Tensor& b,
                                            const paddle::Tensor& key, const paddle::Tensor& mask,
                                            const paddle::Tensor& dy, float p,
                                            const std::string& mode, bool is_test, bool ta,
                                            bool tb, bool save_mask) {
    return guarded(kMatmul, [&] {
        require_cpu_float(dy, kMatmul, "Out@GRAD");
        // The matmul's dropout is the standalone one over the output (fused_dropout.hpp).
        const DropoutPrimitive drop = dropout_primitive(dy.shape(), p, mode, is_test, {});
        const paddle::Tensor dz = dropped_grad(*drop, dy, mask, save_mask, key, kMatmul);
        using paddle::experimental::matmul;
        const paddle::Tensor da = ta ? matmul(b, dz, tb, true) : matmul(dz, b, false, !tb);
        const paddle::Tensor db = tb ? matmul(dz, a, true, ta) : matmul(a, dz, !ta, false);
        return std::vector<paddle::Tensor>{unbroadcast(da, a.shape()), unbroadcast(db, b.shape())};
    });
}

std::vector<std::vector<int64_t>> matmul_shape(const std::vector<int64_t>& a,
                                               const std::vector<int64_t>& b,
                                               const std::vector<int64_t>& /*key*/, float p,
                                               const std::string& mode, bool /*is_test*/,
                                               bool ta, bool tb, bool save_mask) {
    return guarded(kMatmul, [&] {
        probability(p), dropout_mode(mode);
        const MatmulShapes r = matmul_shapes(a, b, ta, tb);
        bool known = true;
        for (int64_t d : r.out) known = known && d >= 0;
        const int64_t bytes = !save_mask ? 0 : known ? glue::packed_bytes(r.out) : -1;
        return std::vector<std::vector<int64_t>>{r.out, {bytes}};
    });
}

std::vector<paddle::DataType> matmul_dtype(const paddle::DataType& a, const paddle::DataType&,
                                           const paddle::DataType&) {
    return {a, paddle::DataType::UINT8};
}

// ---------------------------------------------------------------- fusion GRU

glue::GruConfig gru_config(const std::string& direction, const std::string& layout, bool lbr,
                           bool origin, const std::string& act, const std::string& gate) {
    return glue::gru_config(direction, layout, lbr, origin, act, gate);
}

std::vector<int64_t> read_lens(const paddle::Tensor& s, int64_t steps) {
    require(s.is_cpu(), kGru, "input 'seq_lens' must be on the CPU");
    std::vector<int64_t> lens(size_t(s.numel()));
    for (int64_t i = 0; i < s.numel(); ++i) {
        double v;
        if (s.dtype() == paddle::DataType::INT64)
            v = double(s.data<int64_t>()[i]);
        else if (s.dtype() == paddle::DataType::INT32)
            v = s.data<int32_t>()[i];
        else
            throw glue::GlueError("input 'seq_lens' must be int32 or int64, got " +
                                  phi::DataTypeToString(s.dtype()));
        lens[size_t(i)] = glue::gru_length(v, steps, i);
    }
    return lens;
}

std::vector<paddle::Tensor> gru_forward(const paddle::Tensor& x, const paddle::Tensor& seq_lens,
                                        const paddle::Tensor& wx, const paddle::Tensor& wh,
                                        const paddle::Tensor& bias_x, const paddle::Tensor& bias_hc,
                                        const paddle::optional<paddle::Tensor>& h0,
                                        const std::string& direction, const std::string& layout,
                                        bool lbr, bool origin, const std::string& act,
                                        const std::string& gate) {
    return guarded(kGru, [&] {
        const glue::GruConfig g = gru_config(direction, layout, lbr, origin, act, gate);
        std::vector<Dims> dims = {x.shape(), seq_lens.shape(), wx.shape(), wh.shape(),
                                  bias_x.shape(), bias_hc.shape()};
        if (h0) dims.push_back(h0->shape());
        const glue::GruDims m = glue::gru_dims(g, dims);
        const paddle::Tensor* floats[] = {&x, &wx, &wh, &bias_x, &bias_hc};
        for (int i = 0; i < 5; ++i)
            require_cpu_float(*floats[i], kGru, glue::kGruInputs[i == 0 ? 0 : i + 1]);
        if (h0) require_cpu_float(*h0, kGru, "h0");
        const std::vector<int64_t> lens = read_lens(seq_lens, m.t);
        paddle::Tensor y = paddle::empty(glue::gru_y_shape(g, m), x.dtype(), x.place());
        glue::gru_forward(g, m, lens, x.data<float>(),
                          {wx.data<float>(), wh.data<float>(), bias_x.data<float>(),
                           bias_hc.data<float>()},
                          h0 ? h0->data<float>() : nullptr, y.data<float>());
        return std::vector<paddle::Tensor>{y};
    });
}

// Y's shape; every input's is checked when the op runs (in static programs some are -1 here).
std::vector<std::vector<int64_t>> gru_shape(
    const std::vector<int64_t>& x, const std::vector<int64_t>& /*seq_lens*/,
    const std::vector<int64_t>& /*wx*/, const std::vector<int64_t>& wh,
    const std::vector<int64_t>& /*bias*/, const std::vector<int64_t>& /*bias_h*/,
    const paddle::optional<std::vector<int64_t>>& /*h0*/, const std::string& direction,
    const std::string& layout, bool lbr, bool origin, const std::string& act,
    const std::string& gate) {
    return guarded(kGru, [&] {
        const glue::GruConfig g = gru_config(direction, layout, lbr, origin, act, gate);
        if (x.size() != 3 || wh.size() != 5)
            throw glue::GlueError("inputs 'x' and 'wh' must be 3-D and 5-D (packed), got " +
                                  glue::str(x) + " and " + glue::str(wh));
        const int64_t t = g.ntc ? x[1] : x[0], n = g.ntc ? x[0] : x[1];
        const Dims y = g.ntc ? Dims{n, t, g.directions * wh[2]} : Dims{t, n, g.directions * wh[2]};
        return std::vector<std::vector<int64_t>>{y};
    });
}

std::vector<paddle::DataType> gru_dtype(const paddle::DataType& x, const paddle::DataType&,
                                        const paddle::DataType&, const paddle::DataType&,
                                        const paddle::DataType&, const paddle::DataType&,
                                        const paddle::optional<paddle::DataType>&) {
    return {x};
}

}  // namespace

PD_BUILD_OP(fusebridge_dropout)
    .Inputs({"X", "Key"})
    .Outputs({"Out", "Mask"})
    .Attrs(schema::declarations(schema::dropout::paddle_attrs))
    .SetKernelFn(PD_KERNEL(dropout_forward))
    .SetInferShapeFn(PD_INFER_SHAPE(dropout_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(dropout_dtype));

PD_BUILD_GRAD_OP(fusebridge_dropout)
    .Inputs({"Key", "Mask", paddle::Grad("Out")})
    .Outputs({paddle::Grad("X")})
    .Attrs(schema::declarations(schema::dropout::paddle_attrs))
    .SetKernelFn(PD_KERNEL(dropout_backward));

PD_BUILD_OP(fusebridge_softmax_dropout)
    .Inputs({"X", "Key"})
    .Outputs({"Out", "Mask"})
    .Attrs(schema::declarations(schema::softmax_dropout::paddle_attrs))
    .SetKernelFn(PD_KERNEL(softmax_forward))
    .SetInferShapeFn(PD_INFER_SHAPE(softmax_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(dropout_dtype));

PD_BUILD_GRAD_OP(fusebridge_softmax_dropout)
    .Inputs({"X", "Key", "Mask", paddle::Grad("Out")})
    .Outputs({paddle::Grad("X")})
    .Attrs(schema::declarations(schema::softmax_dropout::paddle_attrs))
    .SetKernelFn(PD_KERNEL(softmax_backward));

PD_BUILD_OP(fusebridge_matmul_dropout)
    .Inputs({"A", "B", "Key"})
    .Outputs({"Out", "Mask"})
    .Attrs(schema::declarations(schema::matmul_dropout::paddle_attrs))
    .SetKernelFn(PD_KERNEL(matmul_forward))
    .SetInferShapeFn(PD_INFER_SHAPE(matmul_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(matmul_dtype));

PD_BUILD_GRAD_OP(fusebridge_matmul_dropout)
    .Inputs({"A", "B", "Key", "Mask", paddle::Grad("Out")})
    .Outputs({paddle::Grad("A"), paddle::Grad("B")})
    .Attrs(schema::declarations(schema::matmul_dropout::paddle_attrs))
    .SetKernelFn(PD_KERNEL(matmul_backward));

PD_BUILD_OP(fusebridge_fusion_gru)
    .Inputs({"X", "SeqLens", "Wx", "Wh", "BiasX", "BiasHc", paddle::Optional("H0")})
    .Outputs({"Y"})
    .Attrs(schema::declarations(schema::fusion_gru::paddle_attrs))
    .SetKernelFn(PD_KERNEL(gru_forward))
    .SetInferShapeFn(PD_INFER_SHAPE(gru_shape))
    .SetInferDtypeFn(PD_INFER_DTYPE(gru_dtype));
