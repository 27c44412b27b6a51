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
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "checks.hpp"
#include "crf_decoding.hpp"
#include "dispatch.hpp"
#include "dropout.hpp"
#include "fused_dropout.hpp"
#include "gru.hpp"
#include "parallel.hpp"
#include "philox.hpp"
#include "primitive_cache.hpp"
#include "qgru.hpp"
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
using Groups = nb::ndarray<const uint32_t, nb::c_contig, nb::device::cpu>;
using Ints = nb::ndarray<const int32_t, nb::c_contig, nb::device::cpu>;

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
static GruAct to_act(int v) { return GruAct(enum_value("activation", v, 3)); }

// A fused op's mask: checked, then zeroed (ranges on different threads OR their shared bytes).
template <class Prim>
static uint8_t* fused_mask(const char* op, std::optional<Bytes>& mask, const Prim& p) {
    if (!mask) return nullptr;
    require_size(op, "mask", mask->size(), p.mask_bytes());
    std::memset(mask->data(), 0, mask->size());
    return mask->data();
}

// One descriptor field's hash (descriptor.hpp); floats as their value, so 0.0 and -0.0 agree
// as == says.
template <class T>
static size_t field_hash(const T& v) {
    if constexpr (std::is_enum_v<T>) return std::hash<int>()(int(v));
    else if constexpr (std::is_floating_point_v<T>) return std::hash<T>()(v == 0 ? T(0) : v);
    else return std::hash<T>()(v);
}
static size_t field_hash(const std::vector<int64_t>& v) {
    size_t h = v.size();
    for (int64_t x : v) h = h * 1000003u ^ std::hash<int64_t>()(x);
    return h;
}

// A descriptor type (descriptor.hpp) as a Python class: built from its fields, by position or
// keyword, each converted as nanobind converts arguments (a field that does not convert, is
// missing or unknown is an ArgumentError naming it); fields read-only; == and hash over every
// field, so the primitive cache (primitive_cache.py) keys on it.
template <class Desc>
static void bind_descriptor(nb::module_& m, const char* name) {
    nb::class_<Desc> cls(m, name);
    // The field names as interned Python strings, made once: keyword lookups then cost a
    // dict probe each (descriptors are made on every kernel call).
    static std::vector<PyObject*> keys;
    Desc::for_each_field([&](const char* field, auto) {
        keys.push_back(PyUnicode_InternFromString(field));
    });
    cls.def("__init__", [name](Desc* self, nb::args args, nb::kwargs kw) {
        Desc d{};
        size_t i = 0, from_kw = 0;
        Desc::for_each_field([&](const char* field, auto member) {
            using T = std::decay_t<decltype(d.*member)>;
            nb::handle v;
            if (i < args.size()) {
                v = args[i];
            } else if (PyObject* k = PyDict_GetItem(kw.ptr(), keys[i])) {
                v = k;
                ++from_kw;
            } else {
                fail(name, std::string("field '") + field + "' is missing");
            }
            if (!nb::try_cast<T>(v, d.*member))
                fail(name, std::string("field '") + field + "' cannot take " +
                               nb::repr(v).c_str());
            if constexpr (std::is_same_v<T, Isa>) to_isa(int(d.*member));
            ++i;
        });
        if (args.size() > i || from_kw != kw.size())
            fail(name, "takes " + std::to_string(i) + " fields, got " +
                           std::to_string(args.size()) + " by position and keywords " +
                           nb::repr(kw.attr("keys")()).c_str());
        new (self) Desc(std::move(d));
    });
    Desc::for_each_field([&](const char* field, auto member) { cls.def_ro(field, member); });
    cls.def("__eq__", [](const Desc& a, const Desc& b) {
        bool same = true;
        Desc::for_each_field([&](const char*, auto member) { same = same && a.*member == b.*member; });
        return same;
    });
    cls.def("__eq__", [](const Desc&, nb::handle) { return false; });
    cls.def("__hash__", [](const Desc& a) {
        size_t h = 0;
        Desc::for_each_field([&](const char*, auto member) {
            h = h * 1000003u ^ field_hash(a.*member);
        });
        return int64_t(h >> 1);
    });
    cls.def("__repr__", [name](nb::handle self) {
        std::string r = std::string(name) + "(";
        Desc::for_each_field([&](const char* field, auto) {
            r += std::string(r.back() == '(' ? "" : ", ") + field + "=" +
                 nb::repr(self.attr(field)).c_str();
        });
        return r + ")";
    });
}

// _C.primitive(desc): the primitive of `desc` from the process's cache (primitive_cache.hpp),
// which the framework op libraries share; built (without the GIL) when missing.
template <class Prim, class Desc>
static void bind_cached(nb::module_& m) {
    m.def("primitive", [](const Desc& desc) {
        nb::gil_scoped_release release;
        return std::const_pointer_cast<Prim>(primitive<Prim>(desc));
    }, "desc"_a);
}

NB_MODULE(_C, m) {
    m.doc() = "fusebridge compiled kernels";

    // Every C++ exception reaches Python as a fusebridge error: a failed check
    // (std::invalid_argument, checks.hpp) as ArgumentError, as the same check in a Python face
    // does; anything else (std::bad_alloc of work memory, a broken invariant) as ExecutionError.
    // Exceptions thrown inside the kernels' pool arrive here on the calling thread
    // (parallel.hpp). The classes stay referenced for the life of the process (the translator
    // holds them).
    static PyObject* argument_error = nullptr;
    static PyObject* execution_error = nullptr;
    nb::module_ errors = nb::module_::import_("fusebridge.errors");
    argument_error = nb::object(errors.attr("ArgumentError")).release().ptr();
    execution_error = nb::object(errors.attr("ExecutionError")).release().ptr();
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const nb::python_error&) {
            throw;  // a Python error passing through C++, and nanobind's own: nanobind's translator
        } catch (const nb::builtin_exception&) {
            throw;
        } catch (const std::invalid_argument& e) {
            PyErr_SetString(argument_error, e.what());
        } catch (const std::bad_alloc&) {
            PyErr_SetString(execution_error,
                            "the compiled core could not allocate its work memory "
                            "(std::bad_alloc): the process is out of memory");
        } catch (const std::exception& e) {
            PyErr_SetString(execution_error, e.what());
        }
    });

    nb::enum_<Isa>(m, "Isa")
        .value("scalar", Isa::scalar)
        .value("avx2", Isa::avx2)
        .value("avx512", Isa::avx512);
    nb::enum_<GruAct>(m, "GruAct")
        .value("sigmoid", GruAct::sigmoid)
        .value("tanh", GruAct::tanh)
        .value("relu", GruAct::relu)
        .value("identity", GruAct::identity);
    nb::enum_<GruPrecision>(m, "GruPrecision")
        .value("f32", GruPrecision::f32)
        .value("int8", GruPrecision::int8)
        .value("bf16", GruPrecision::bf16);
    nb::enum_<SeqLayout>(m, "SeqLayout")
        .value("lod", SeqLayout::lod)
        .value("tnc", SeqLayout::tnc)
        .value("ntc", SeqLayout::ntc);
    nb::enum_<DType>(m, "DType")
        .value("f32", DType::f32)
        .value("f64", DType::f64)
        .value("f16", DType::f16)
        .value("bf16", DType::bf16);
    nb::enum_<DropoutMode>(m, "DropoutMode")
        .value("upscale_in_train", DropoutMode::upscale_in_train)
        .value("downgrade_in_infer", DropoutMode::downgrade_in_infer);
    bind_descriptor<GruDesc>(m, "GRUDescriptor");
    bind_descriptor<QGruDesc>(m, "QGRUDescriptor");
    bind_descriptor<DropoutDesc>(m, "DropoutDescriptor");
    bind_descriptor<SoftmaxDropoutDesc>(m, "SoftmaxDropoutDescriptor");
    bind_descriptor<MatmulDropoutDesc>(m, "MatmulDropoutDescriptor");

    nb::class_<SoftmaxDropoutPrimitive>(m, "SoftmaxDropoutPrimitive")
        .def(nb::init<const SoftmaxDropoutDesc&>(), "desc"_a)
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
        .def(nb::init<const MatmulDropoutDesc&>(), "desc"_a)
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
        .def(nb::init<const DropoutDesc&>(), "desc"_a)
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

    using Lengths = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
    nb::class_<GruPrimitive>(m, "GruPrimitive")
        .def(nb::init<const GruDesc&>(), "desc"_a)
        .def_prop_ro("desc", &GruPrimitive::desc)
        .def("forward",
             [](const GruPrimitive& self, Lengths lens, int64_t steps, Floats x,
                std::optional<Floats> wx, Floats wh, Floats bx, Floats bhc,
                std::optional<Floats> h0, FloatsOut out, std::optional<FloatsOut> last) {
                 // The primitive checked ic, oc < 2**31 and the plan rows * columns (gru.cpp):
                 // the weights' and states' sizes multiply two such numbers and are checked here.
                 const char* op = "fusion_gru";
                 const GruDesc& d = self.desc();
                 const GruPlan& plan = self.plan(lens.data(), int64_t(lens.shape(0)), steps);
                 const int64_t ic = d.ic, oc = d.oc, directions = d.directions;
                 const int64_t gates = directions * self.ocp() * 3;
                 const int64_t states = mul_size(directions * oc, plan.sentences(), op, "h0");
                 require_size(op, "x", x.size(), plan.x_rows() * ic);
                 if (d.projection != bool(wx))
                     fail(op, d.projection ? "wx is required with the input projection"
                                           : "wx must be None without the input projection");
                 if (wx) require_size(op, "wx", wx->size(), mul_size(gates, ic, op, "wx"));
                 require_size(op, "wh", wh.size(), mul_size(gates, oc, op, "wh"));
                 require_size(op, "bias", bx.size(), directions * 3 * self.ocp());
                 require_size(op, "bias_h", bhc.size(), directions * self.ocp());
                 if (h0) require_size(op, "h0", h0->size(), states);
                 require_size(op, "out", out.size(), plan.x_rows() * directions * oc);
                 if (last) require_size(op, "last", last->size(), states);
                 const GruWeightsView w{wx ? wx->data() : nullptr, wh.data(), bx.data(),
                                        bhc.data()};
                 const float* h0p = h0 ? h0->data() : nullptr;
                 float* lastp = last ? last->data() : nullptr;
                 nb::gil_scoped_release release;
                 self.forward(plan, x.data(), w, h0p, out.data(), lastp);
             },
             "lens"_a, "steps"_a, "x"_a, "wx"_a.none(), "wh"_a, "bx"_a, "bhc"_a, "h0"_a.none(),
             "out"_a.noconvert(), "last"_a.noconvert().none())
        // Nanoseconds per plan of this batch, the mean of `repeats` (benchmarks/gru_plan.py
        // sets it against the whole call).
        .def("plan_ns",
             [](const GruPrimitive& self, Lengths lens, int64_t steps, int64_t repeats) {
                 const int64_t n = int64_t(lens.shape(0));
                 self.plan(lens.data(), n, steps);  // the thread's plan at its size
                 const auto t0 = std::chrono::steady_clock::now();
                 for (int64_t i = 0; i < repeats; ++i) self.plan(lens.data(), n, steps);
                 const auto t1 = std::chrono::steady_clock::now();
                 return std::chrono::duration<double, std::nano>(t1 - t0).count() /
                        double(std::max<int64_t>(repeats, 1));
             },
             "lens"_a, "steps"_a, "repeats"_a);

    nb::class_<QGruPrimitive>(m, "QGruPrimitive")
        .def(nb::init<const QGruDesc&>(), "desc"_a)
        .def_prop_ro("desc", &QGruPrimitive::desc)
        .def("forward",
             [](const QGruPrimitive& self, Lengths lens, int64_t steps, Floats x,
                std::optional<Groups> wx, Groups wh, std::optional<Floats> wx_scale,
                std::optional<Floats> wh_scale, std::optional<Ints> wx_comp,
                std::optional<Ints> wh_comp, Floats bx, Floats bhc, std::optional<Floats> h0,
                FloatsOut out, std::optional<FloatsOut> last) {
                 const char* op = "fusion_gru";
                 const QGruDesc& d = self.desc();
                 const GruPlan& plan = self.plan(lens.data(), int64_t(lens.shape(0)), steps);
                 const QGruPackedSizes size = qgru_packed_sizes(
                     d.precision, d.directions, d.projection ? d.ic : 0, d.oc);
                 const int64_t states = mul_size(d.directions * d.oc, plan.sentences(), op, "h0");
                 const bool int8 = d.precision == GruPrecision::int8;
                 require_size(op, "x", x.size(), plan.x_rows() * d.ic);
                 if (d.projection != bool(wx))
                     fail(op, d.projection ? "wx is required with the input projection"
                                           : "wx must be None without the input projection");
                 if (wx) require_size(op, "wx", wx->size(), size.wx);
                 require_size(op, "wh", wh.size(), size.wh);
                 if (int8 != bool(wh_scale) || int8 != bool(wh_comp) ||
                     (int8 && d.projection) != bool(wx_scale) ||
                     (int8 && d.projection) != bool(wx_comp))
                     fail(op, "scales and compensations go with int8 weights (and wx's with wx)");
                 for (const auto& a : {wx_scale, wh_scale})
                     if (a) require_size(op, "scale", a->size(), size.columns);
                 for (const auto& a : {wx_comp, wh_comp})
                     if (a) require_size(op, "comp", a->size(), size.columns);
                 require_size(op, "bias", bx.size(), size.bx);
                 require_size(op, "bias_h", bhc.size(), size.bhc);
                 if (h0) require_size(op, "h0", h0->size(), states);
                 require_size(op, "out", out.size(), plan.x_rows() * d.directions * d.oc);
                 if (last) require_size(op, "last", last->size(), states);
                 auto ptr = [](const auto& a) { return a ? a->data() : nullptr; };
                 const QGruWeightsView w{ptr(wx),      wh.data(),     ptr(wx_scale), ptr(wh_scale),
                                         ptr(wx_comp), ptr(wh_comp), bx.data(),     bhc.data()};
                 const float* h0p = ptr(h0);
                 float* lastp = ptr(last);
                 nb::gil_scoped_release release;
                 self.forward(plan, x.data(), w, h0p, out.data(), lastp);
             },
             "lens"_a, "steps"_a, "x"_a, "wx"_a.none(), "wh"_a, "wx_scale"_a.none(),
             "wh_scale"_a.none(), "wx_comp"_a.none(), "wh_comp"_a.none(), "bx"_a, "bhc"_a,
             "h0"_a.none(), "out"_a.noconvert(), "last"_a.noconvert().none());

    bind_cached<GruPrimitive, GruDesc>(m);
    bind_cached<QGruPrimitive, QGruDesc>(m);
    bind_cached<DropoutPrimitive, DropoutDesc>(m);
    bind_cached<SoftmaxDropoutPrimitive, SoftmaxDropoutDesc>(m);
    bind_cached<MatmulDropoutPrimitive, MatmulDropoutDesc>(m);
    m.def("cache_stats", [] {
        const CacheStats s = cache_stats();
        nb::dict d;
        d["capacity"] = s.capacity, d["size"] = s.size, d["hits"] = s.hits;
        d["misses"] = s.misses, d["evictions"] = s.evictions;
        return d;
    });
    m.def("set_cache_capacity", &set_cache_capacity, "capacity"_a);
    m.def("clear_cache", &clear_cache);

    // Canonical GRU weights into the kernel's packed layout (gru.hpp), into arrays the caller
    // made (64-byte aligned: gru_weights.py).
    m.def("pack_gru_weights",
          [](int64_t directions, int64_t ic, int64_t oc, std::optional<Floats> wx, Floats wh,
             Floats bias, Floats bias_h, std::optional<FloatsOut> out_wx, FloatsOut out_wh,
             FloatsOut out_bx, FloatsOut out_bhc) {
              const char* op = "pack_gru_weights";
              if (bool(wx) != bool(out_wx) || bool(wx) != (ic > 0))
                  fail(op, "wx and out_wx go together, with an input size > 0");
              const GruPackedSizes size = gru_packed_sizes(directions, ic, oc);
              const int64_t g3 = mul_size(directions, 3 * oc, op, "bias");
              if (wx) require_size(op, "wx", wx->size(), mul_size(g3, ic, op, "wx"));
              require_size(op, "wh", wh.size(), mul_size(g3, oc, op, "wh"));
              require_size(op, "bias", bias.size(), g3);
              require_size(op, "bias_h", bias_h.size(), g3);
              if (out_wx) require_size(op, "out_wx", out_wx->size(), size.wx);
              require_size(op, "out_wh", out_wh.size(), size.wh);
              require_size(op, "out_bx", out_bx.size(), size.bx);
              require_size(op, "out_bhc", out_bhc.size(), size.bhc);
              nb::gil_scoped_release release;
              pack_gru_weights(directions, ic, oc, wx ? wx->data() : nullptr, wh.data(),
                               bias.data(), bias_h.data(), out_wx ? out_wx->data() : nullptr,
                               out_wh.data(), out_bx.data(), out_bhc.data());
          },
          "directions"_a, "ic"_a, "oc"_a, "wx"_a.none(), "wh"_a, "bias"_a, "bias_h"_a,
          "out_wx"_a.noconvert().none(), "out_wh"_a.noconvert(), "out_bx"_a.noconvert(),
          "out_bhc"_a.noconvert());

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
    m.def("isa_limit", [] { return int(isa_limit()); });
    m.def("current_isa", [] { return int(current_isa()); });
    m.def("set_isa", [](int isa) { set_isa(Isa(enum_value("isa", isa, 2))); }, "isa"_a);
    m.def("cpu_extensions", [](int isa) { return cpu_extensions(Isa(enum_value("isa", isa, 2))); },
          "isa"_a);
    m.def("extension_limit", &extension_limit);
    m.def("current_extensions", &current_extensions);
    m.def("set_extensions", &set_extensions, "mask"_a);
    m.def("isa_name", [](int isa) { return std::string(isa_name(Isa(enum_value("isa", isa, 2)))); });
    m.def("set_num_threads", &set_num_threads, "n"_a);
    m.def("max_threads", &max_threads);
    m.def("thread_cap", &thread_cap);
    // The threads a kernel's job may use from the calling thread, its pool's workers started
    // (fusebridge info, tests).
    m.def("team_size", [] {
        const int threads = max_threads();
        parallel_for(threads, threads, [](int64_t, int) {});
        return std::min(threads, 1 + pool_workers());
    });
    // Test hook (tests/kernels/test_parallel_errors.py): `parts` parts of `sleep_us` each on
    // up to `threads` threads, where a part run on slot `throw_slot` or above throws `kind`
    // (invalid_argument, bad_alloc or logic_error), as a kernel's part might; returns how many
    // parts the pool's workers ran when nothing threw.
    m.def(
        "_parallel_throw_test",
        [](int64_t parts, int threads, int throw_slot, const std::string& kind, int sleep_us) {
            nb::gil_scoped_release release;
            std::atomic<int64_t> on_workers{0};
            parallel_for(parts, threads, [&](int64_t part, int slot) {
                std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
                if (slot > 0) on_workers.fetch_add(1);
                if (slot < throw_slot) return;
                const std::string what = "test exception in part " + std::to_string(part) +
                                         " on slot " + std::to_string(slot);
                if (kind == "bad_alloc") throw std::bad_alloc();
                if (kind == "invalid_argument") throw std::invalid_argument(what);
                throw std::logic_error(what);
            });
            return on_workers.load();
        },
        "parts"_a, "threads"_a, "throw_slot"_a, "kind"_a, "sleep_us"_a);
    m.def("pool_workers", &pool_workers);  // the pool's threads started so far (tests)
    m.def("blas_threads", &blas_threads);
    m.def("blas_config", &blas_config);
}
