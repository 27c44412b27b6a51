// nanobind glue for fusebridge.kernels._C. Arguments arrive validated by the Python layer;
// this layer checks that buffers are as large as the primitive will touch (sizes computed
// without overflow, checks.hpp) and that enum values name something, converts types, and
// releases the GIL while kernels run. Arrays a kernel only reads are const (read-only numpy
// arrays are accepted); arrays it writes are noconvert, since a converted copy (of a
// non-contiguous array, say) would take the results and drop them. A failed check raises
// fusebridge.errors.ArgumentError.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <omp.h>

#include <cstring>
#include <optional>

#include "checks.hpp"
#include "crf_decoding.hpp"
#include "dispatch.hpp"
#include "dropout.hpp"
#include "fused_dropout.hpp"
#include "gru.hpp"
#include "philox.hpp"
#include "runtime.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using namespace fusebridge;

using BufferIn = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Buffer = nb::ndarray<nb::c_contig, nb::device::cpu>;
using BytesIn = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;
using Bytes = nb::ndarray<uint8_t, nb::c_contig, nb::device::cpu>;
using Floats = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using FloatsOut = nb::ndarray<float, nb::c_contig, nb::device::cpu>;

static void require_size(const char* op, const char* what, size_t have, int64_t want,
                         const char* unit = "elements") {
    if (int64_t(have) != want)
        fail(op, std::string(what) + " holds " + std::to_string(have) + " " + unit +
                     ", expected " + std::to_string(want));
}

// The data a dropout primitive reads or writes: numel items of the primitive's own size.
template <class Array>
static void require_data(const char* what, const Array& a, const DropoutPrimitive& p) {
    require_size("dropout", what, a.nbytes(), mul_size(p.numel(), p.itemsize(), "dropout", what),
                 "bytes");
}

template <class Array>
static void require_mask(const Array& m, const DropoutPrimitive& p) {
    require_size("dropout", "mask", m.size(), p.mask_bytes(), "bytes");
}

// An enum's int from Python, checked: a value past the last one would select no code (or, for
// an ISA, instructions this CPU cannot run).
static int enum_value(const char* what, int v, int last) {
    if (v < 0 || v > last)
        fail("_C", std::string(what) + " must lie in [0, " + std::to_string(last) + "], got " +
                       std::to_string(v));
    return v;
}
static Isa to_isa(int v) { return Isa(enum_value("isa", v, int(best_isa()))); }
static DropoutMode to_mode(int v) { return DropoutMode(enum_value("mode", v, 1)); }
static GruAct to_act(int v) { return GruAct(enum_value("activation", v, 3)); }

// The fused ops' output geometry: the dropout of a float32 tensor whose mask is not shared.
static DropoutDesc fused_dropout_desc(std::vector<int64_t> shape, std::vector<int64_t> global_shape,
                                      std::vector<int64_t> start, float p, int mode, bool training,
                                      int isa, int64_t stream_min_bytes) {
    return DropoutDesc{shape, global_shape, start, global_shape, DType::f32, p, to_mode(mode),
                       training, to_isa(isa), stream_min_bytes};
}

// A fused op's mask: checked, then zeroed (ranges on different threads OR their shared bytes).
template <class Prim>
static uint8_t* fused_mask(const char* op, std::optional<Bytes>& mask, const Prim& p) {
    if (!mask) return nullptr;
    require_size(op, "mask", mask->size(), p.mask_bytes());
    std::memset(mask->data(), 0, mask->size());
    return mask->data();
}

NB_MODULE(_C, m) {
    m.doc() = "fusebridge compiled kernels";

    // A failed check in C++ (std::invalid_argument, checks.hpp) reaches Python as fusebridge's
    // ArgumentError, as the same check in a Python face does. The class stays referenced for
    // the life of the process (the translator holds it).
    nb::object argument_error = nb::module_::import_("fusebridge.errors").attr("ArgumentError");
    nb::register_exception_translator(
        [](const std::exception_ptr& p, void* payload) {
            try {
                std::rethrow_exception(p);
            } catch (const std::invalid_argument& e) {
                PyErr_SetString(static_cast<PyObject*>(payload), e.what());
            }
        },
        argument_error.release().ptr());

    nb::class_<SoftmaxDropoutPrimitive>(m, "SoftmaxDropoutPrimitive")
        .def("__init__",
             [](SoftmaxDropoutPrimitive* self, std::vector<int64_t> shape, int64_t axis,
                std::vector<int64_t> global_shape, std::vector<int64_t> start, float p, int mode,
                bool training, int isa, int64_t stream_min_bytes) {
                 new (self) SoftmaxDropoutPrimitive(SoftmaxDropoutDesc{
                     shape, axis, fused_dropout_desc(shape, global_shape, start, p, mode, training,
                                                     isa, stream_min_bytes)});
             },
             "shape"_a, "axis"_a, "global_shape"_a, "start"_a, "p"_a, "mode"_a, "training"_a,
             "isa"_a, "stream_min_bytes"_a)
        .def_prop_ro("numel", &SoftmaxDropoutPrimitive::numel)
        .def_prop_ro("mask_bytes", &SoftmaxDropoutPrimitive::mask_bytes)
        .def("forward",
             [](const SoftmaxDropoutPrimitive& self, Floats x, FloatsOut y,
                std::optional<Bytes> mask, uint64_t seed, uint64_t offset) {
                 const char* op = "softmax_dropout";
                 require_size(op, "x", x.size(), self.numel());
                 require_size(op, "y", y.size(), self.numel());
                 uint8_t* mp = fused_mask(op, mask, self);
                 nb::gil_scoped_release release;
                 self.forward(x.data(), y.data(), mp, seed, offset);
             },
             "x"_a, "y"_a.noconvert(), "mask"_a.noconvert().none(), "seed"_a, "offset"_a)
        .def("backward",
             [](const SoftmaxDropoutPrimitive& self, Floats dy, Floats src, bool from_x,
                std::optional<BytesIn> mask, uint64_t seed, uint64_t offset, FloatsOut dx) {
                 const char* op = "softmax_dropout_backward";
                 require_size(op, "dy", dy.size(), self.numel());
                 require_size(op, from_x ? "x" : "probs", src.size(), self.numel());
                 require_size(op, "dx", dx.size(), self.numel());
                 if (mask) require_size(op, "mask", mask->size(), self.mask_bytes());
                 const uint8_t* mp = mask ? mask->data() : nullptr;
                 nb::gil_scoped_release release;
                 self.backward(dy.data(), src.data(), from_x, mp, seed, offset, dx.data());
             },
             "dy"_a, "src"_a, "from_x"_a, "mask"_a.none(), "seed"_a, "offset"_a,
             "dx"_a.noconvert());

    nb::class_<MatmulDropoutPrimitive>(m, "MatmulDropoutPrimitive")
        .def("__init__",
             [](MatmulDropoutPrimitive* self, int64_t m, int64_t n, int64_t k, bool trans_a,
                bool trans_b, bool bias, std::vector<int64_t> a_offsets,
                std::vector<int64_t> b_offsets, int64_t a_size, int64_t b_size,
                std::vector<int64_t> shape, std::vector<int64_t> global_shape,
                std::vector<int64_t> start, float p, int mode, bool training, int isa,
                int64_t stream_min_bytes) {
                 new (self) MatmulDropoutPrimitive(MatmulDropoutDesc{
                     m, n, k, trans_a, trans_b, bias, a_offsets, b_offsets, a_size, b_size,
                     fused_dropout_desc(shape, global_shape, start, p, mode, training, isa,
                                        stream_min_bytes)});
             },
             "m"_a, "n"_a, "k"_a, "trans_a"_a, "trans_b"_a, "bias"_a, "a_offsets"_a,
             "b_offsets"_a, "a_size"_a, "b_size"_a, "shape"_a, "global_shape"_a, "start"_a, "p"_a,
             "mode"_a, "training"_a, "isa"_a, "stream_min_bytes"_a)
        .def_prop_ro("numel", &MatmulDropoutPrimitive::numel)
        .def_prop_ro("mask_bytes", &MatmulDropoutPrimitive::mask_bytes)
        .def_prop_ro("tile_rows", &MatmulDropoutPrimitive::tile_rows)
        .def_prop_ro("tile_cols", &MatmulDropoutPrimitive::tile_cols)
        .def("forward",
             [](const MatmulDropoutPrimitive& self, Floats a, Floats b, std::optional<Floats> bias,
                FloatsOut y, std::optional<Bytes> mask, uint64_t seed, uint64_t offset) {
                 const char* op = "matmul_dropout";
                 require_size(op, "a", a.size(), self.a_size());
                 require_size(op, "b", b.size(), self.b_size());
                 require_size(op, "bias", bias ? bias->size() : 0, self.bias_size());
                 require_size(op, "y", y.size(), self.numel());
                 uint8_t* mp = fused_mask(op, mask, self);
                 const float* bp = bias ? bias->data() : nullptr;
                 nb::gil_scoped_release release;
                 self.forward(a.data(), b.data(), bp, y.data(), mp, seed, offset);
             },
             "a"_a, "b"_a, "bias"_a.none(), "y"_a.noconvert(), "mask"_a.noconvert().none(),
             "seed"_a, "offset"_a);

    nb::class_<DropoutPrimitive>(m, "DropoutPrimitive")
        .def("__init__",
             [](DropoutPrimitive* self, std::vector<int64_t> shape, std::vector<int64_t> global_shape,
                std::vector<int64_t> start, std::vector<int64_t> mask_shape, int dtype, float p,
                int mode, bool training, int isa, int64_t stream_min_bytes) {
                 new (self) DropoutPrimitive(DropoutDesc{
                     shape, global_shape, start, mask_shape, DType(enum_value("dtype", dtype, 3)),
                     p, to_mode(mode), training, to_isa(isa), stream_min_bytes});
             },
             "shape"_a, "global_shape"_a, "start"_a, "mask_shape"_a, "dtype"_a, "p"_a, "mode"_a,
             "training"_a, "isa"_a, "stream_min_bytes"_a)
        .def_prop_ro("numel", &DropoutPrimitive::numel)
        .def_prop_ro("mask_bytes", &DropoutPrimitive::mask_bytes)
        .def("forward",
             [](const DropoutPrimitive& self, BufferIn x, Buffer y, std::optional<Bytes> mask,
                uint64_t seed, uint64_t offset) {
                 require_data("x", x, self);
                 require_data("y", y, self);
                 if (mask) require_mask(*mask, self);
                 uint8_t* mp = mask ? mask->data() : nullptr;
                 nb::gil_scoped_release release;
                 self.forward(x.data(), y.data(), mp, seed, offset);
             },
             "x"_a, "y"_a.noconvert(), "mask"_a.noconvert().none(), "seed"_a, "offset"_a)
        .def("generate_mask",
             [](const DropoutPrimitive& self, Bytes mask, uint64_t seed, uint64_t offset) {
                 require_mask(mask, self);
                 nb::gil_scoped_release release;
                 self.forward(nullptr, nullptr, mask.data(), seed, offset);
             },
             "mask"_a.noconvert(), "seed"_a, "offset"_a)
        .def("apply_mask",
             [](const DropoutPrimitive& self, BufferIn x, Buffer y, BytesIn mask) {
                 require_data("dy", x, self);
                 require_data("dx", y, self);
                 require_mask(mask, self);
                 nb::gil_scoped_release release;
                 self.apply_mask(x.data(), y.data(), mask.data());
             },
             "x"_a, "y"_a.noconvert(), "mask"_a);

    nb::class_<GruPrimitive>(m, "GruPrimitive")
        .def("__init__",
             [](GruPrimitive* self, std::vector<int64_t> lens, int layout, int64_t steps,
                int64_t ic, int64_t oc, int directions, bool reverse, bool linear_before_reset,
                bool origin_mode, int act, int gate, int isa) {
                 new (self) GruPrimitive(GruDesc{
                     lens, SeqLayout(enum_value("layout", layout, 2)), steps, ic, oc, directions,
                     reverse, linear_before_reset, origin_mode, to_act(act), to_act(gate),
                     to_isa(isa)});
             },
             "lens"_a, "layout"_a, "steps"_a, "ic"_a, "oc"_a, "directions"_a, "reverse"_a,
             "linear_before_reset"_a, "origin_mode"_a, "act"_a, "gate"_a, "isa"_a)
        .def("forward",
             [](const GruPrimitive& self, Floats x, Floats wx, Floats wh, Floats bx, Floats bhc,
                std::optional<Floats> h0, FloatsOut out, std::optional<FloatsOut> last) {
                 // The primitive checked rows * columns and ic, oc < 2**31 (gru.cpp): the weights'
                 // and states' sizes multiply two such numbers and are checked here.
                 const char* op = "fusion_gru";
                 const int64_t ic = self.ic(), oc = self.oc(), directions = self.directions();
                 const int64_t ocp = (oc + kGruBlock - 1) / kGruBlock * kGruBlock;
                 const int64_t gates = directions * ocp * 3;
                 const int64_t states = mul_size(directions * oc, self.sentences(), op, "h0");
                 require_size(op, "x", x.size(), self.x_rows() * ic);
                 require_size(op, "wx", wx.size(), mul_size(gates, ic, op, "wx"));
                 require_size(op, "wh", wh.size(), mul_size(gates, oc, op, "wh"));
                 require_size(op, "bias", bx.size(), directions * 3 * ocp);
                 require_size(op, "bias_h", bhc.size(), directions * ocp);
                 if (h0) require_size(op, "h0", h0->size(), states);
                 require_size(op, "out", out.size(), self.x_rows() * directions * oc);
                 if (last) require_size(op, "last", last->size(), states);
                 const GruWeightsView w{wx.data(), wh.data(), bx.data(), bhc.data()};
                 const float* h0p = h0 ? h0->data() : nullptr;
                 float* lastp = last ? last->data() : nullptr;
                 nb::gil_scoped_release release;
                 self.forward(x.data(), w, h0p, out.data(), lastp);
             },
             "x"_a, "wx"_a, "wh"_a, "bx"_a, "bhc"_a, "h0"_a.none(), "out"_a.noconvert(),
             "last"_a.noconvert().none());

    m.def("gru_activation",
          [](int isa, int act, Floats x, FloatsOut y) {
              require_size("gru_activation", "y", y.size(), int64_t(x.size()));
              gru_kernels_for(to_isa(isa)).activate(to_act(act), x.data(), y.data(),
                                                    int64_t(x.size()));
          },
          "isa"_a, "act"_a, "x"_a, "y"_a.noconvert());

    using Tags = nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>;
    m.def("crf_decoding",
          [](nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu> emission,
             nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu> transition,
             Tags offsets, std::optional<Tags> label,
             nb::ndarray<int64_t, nb::c_contig, nb::device::cpu> path) {
              CrfDecodingArgs a{};
              a.emission = emission.data();
              a.words = int64_t(emission.shape(0)), a.tags = int64_t(emission.shape(1));
              a.transition = transition.data();
              a.transition_rows = int64_t(transition.shape(0));
              a.transition_cols = int64_t(transition.shape(1));
              a.offsets = offsets.data(), a.offsets_size = int64_t(offsets.size());
              if (label) a.label = label->data(), a.label_size = int64_t(label->size());
              a.path = path.data(), a.path_size = int64_t(path.size());
              nb::gil_scoped_release release;
              crf_decoding(a);
          },
          "emission"_a, "transition"_a, "offsets"_a, "label"_a.none(), "path"_a.noconvert());

    m.def("philox4x32",
          [](nb::ndarray<const uint32_t, nb::shape<-1, 4>, nb::c_contig, nb::device::cpu> ctr,
             nb::ndarray<const uint32_t, nb::shape<-1, 2>, nb::c_contig, nb::device::cpu> key,
             nb::ndarray<uint32_t, nb::shape<-1, 4>, nb::c_contig, nb::device::cpu> out, int rounds) {
              if (ctr.shape(0) != key.shape(0) || ctr.shape(0) != out.shape(0))
                  fail("philox4x32", "counter, key and out differ in length");
              for (size_t i = 0; i < ctr.shape(0); ++i) {
                  Philox4 c{{ctr(i, 0), ctr(i, 1), ctr(i, 2), ctr(i, 3)}};
                  const Philox4 r = philox4x32(c, key(i, 0), key(i, 1), rounds);
                  for (int w = 0; w < 4; ++w) out(i, w) = r.v[w];
              }
          },
          "counter"_a, "key"_a, "out"_a.noconvert(), "rounds"_a);

    m.def("sgemm",
          [](nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu> a,
             nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu> b,
             nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu> c, float alpha, float beta) {
              if (a.shape(1) != b.shape(0) || c.shape(0) != a.shape(0) || c.shape(1) != b.shape(1))
                  fail("sgemm", "shapes do not chain");
              nb::gil_scoped_release release;
              sgemm(a.shape(0), b.shape(1), a.shape(1), alpha, a.data(), b.data(), beta, c.data());
          },
          "a"_a, "b"_a, "c"_a.noconvert(), "alpha"_a, "beta"_a);

    m.def("best_isa", [] { return int(best_isa()); });
    m.def("isa_name", [](int isa) { return std::string(isa_name(Isa(enum_value("isa", isa, 2)))); });
    m.def("set_num_threads", &set_num_threads, "n"_a);
    m.def("max_threads", &max_threads);
    m.def("thread_cap", &thread_cap);
    // The size of a team the kernels start from the calling thread (fusebridge info, tests).
    m.def("team_size", [] {
        int size = 1;
#pragma omp parallel num_threads(max_threads())
#pragma omp single
        size = omp_get_num_threads();
        return size;
    });
    m.def("blas_threads", &blas_threads);
    m.def("blas_config", &blas_config);
}
