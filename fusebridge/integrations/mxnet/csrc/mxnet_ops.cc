// fusebridge's kernels as native MXNet 1.9 operators, through the custom-library interface of
// lib_api.h (MX_LIBRARY_VERSION 11). op_library.py compiles this file together with the wheel's
// src/lib_api.cc into one shared library, linked with the kernels library that
// fusebridge.kernels._C loads (one thread pool, ISA setting and primitive cache for the
// process), which mx.library.load() registers.
//
//   fusebridge_dropout(x; p, seed, offset, axes, mode, is_test) -> (y, mask)
//     x float32 of any shape; mask uint8 [ceil(mask elements / 8)], bit i of the mask shape
//     (x's shape with 1 on `axes`) in byte i / 8, LSB first: the bits of
//     fusebridge.kernels.dropout for the same seed and offset (docs/dropout.md).
//     Backward (MXNet's _backward_fusebridge_dropout): dx = dy * keep * scale from the mask.
//   fusebridge_fusion_gru(x, seq_lens, wx, wh, bias_x, bias_hc[, h0]; direction, layout,
//                         linear_before_reset, origin_mode, activation, gate_activation,
//                         has_h0) -> y
//     fusebridge.kernels.fusion_gru over right-padded input. The weights are packed once, by
//     fusebridge.kernels.pack_gru_weights (save_mxnet writes them so): wx [D, OCp/16, IC, 3,
//     16], wh [D, OCp/16, OC, 3, 16], bias_x [D, 3, OCp], bias_hc [D, OCp] (OCp: OC rounded
//     up to 16); h0 [D, N, OC]. x [T, N, IC] (tnc) or [N, T, IC] (ntc), y with D*OC columns
//     in x's layout, zero at padding. Its backward is registered but refuses to run: see
//     gru_backward.
//
// MXNet passes every attribute as a string. Nothing here may throw across the C interface:
// each entry point catches, records the message with MX_ERROR_MSG and returns MX_FAIL, which
// MXNet raises as MXNetError.
//
// What lib_api v11 in MXNet 1.9.1 does not give an op: its OpReqType (so a gradient under
// grad_req='add' is overwritten, not accumulated), whether autograd is training (hence the
// is_test attribute), and any input of unknown shape (its bridge fails before calling us).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "dropout.hpp"
#include "glue.hpp"
#include "gru.hpp"
#include "mxnet/lib_api.h"
#include "op_attributes.hpp"
#include "primitive_cache.hpp"

namespace fb = fusebridge;
namespace glue = fusebridge::glue;
// Each attribute's name, default and allowed values, as the op schemas give them.
namespace schema = fusebridge::op_attributes;
using mxnet::ext::MX_FAIL;
using mxnet::ext::MX_SUCCESS;
using mxnet::ext::MXReturnValue;
using mxnet::ext::MXTensor;
using mxnet::ext::OpResource;

namespace {

using Attrs = std::unordered_map<std::string, std::string>;
using Shapes = std::vector<std::vector<unsigned int>>;
using glue::Dims;
using glue::str;

constexpr const char* kDropout = "fusebridge_dropout";
constexpr const char* kGru = "fusebridge_fusion_gru";

// A bad attribute, shape, type or value; the message does not repeat the op name.
struct OpError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// lib_api v11 keeps every message since the library was loaded, and MXNet prints them all with
// each error, so every error would also show all earlier ones. MXerrorMsgs has no way to drop
// them; its private list is reached through explicit template instantiation, where C++ does
// not check access.
using MessageList = std::vector<std::stringstream*>;
MessageList mxnet::ext::MXerrorMsgs::*message_list();
template <MessageList mxnet::ext::MXerrorMsgs::*M>
struct MessageListAccess {
    friend MessageList mxnet::ext::MXerrorMsgs::*message_list() { return M; }
};
template struct MessageListAccess<&mxnet::ext::MXerrorMsgs::messages>;

void clear_messages() {
    MessageList& list = mxnet::ext::MXerrorMsgs::get()->*message_list();
    for (std::stringstream* m : list) delete m;
    list.clear();
}

template <class F>
MXReturnValue guarded(const char* op, F&& body) {
    try {
        body();
        return MX_SUCCESS;
    } catch (const std::exception& e) {
        clear_messages();
        MX_ERROR_MSG << op << ": " << e.what();
    } catch (...) {
        clear_messages();
        MX_ERROR_MSG << op << ": unknown C++ exception";
    }
    return MX_FAIL;
}

// ---------------------------------------------------------------- attributes

// Keys MXNet itself adds start with "__" (__profiler_scope__, __lr_mult__, ...); any other key
// the op does not know is most likely a misspelt attribute, so it is an error.
template <size_t N>
void check_known(const Attrs& attrs, const char* const (&known)[N]) {
    for (const auto& kv : attrs) {
        if (kv.first.rfind("__", 0) == 0) continue;
        bool ok = false;
        for (const char* k : known) ok = ok || kv.first == k;
        if (!ok) {
            std::string names;
            for (const char* k : known) names += std::string(names.empty() ? "" : ", ") + k;
            throw OpError("unknown attr '" + kv.first + "' (known: " + names + ")");
        }
    }
}

const std::string* find(const Attrs& attrs, const char* key) {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
}

std::string trimmed(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

bool parse_bool(const Attrs& attrs, const schema::Attribute& a) {
    const std::string* v = find(attrs, a.name);
    if (!v) return a.default_bool;
    const std::string s = trimmed(*v);
    if (s == "True" || s == "true" || s == "1") return true;
    if (s == "False" || s == "false" || s == "0") return false;
    throw OpError(std::string("attr '") + a.name + "' must be True or False, got '" + *v + "'");
}

// The value (or the default) as the enumerator of the attribute's enum E in op_attributes.hpp.
template <class E>
E parse_choice(const Attrs& attrs, const schema::Attribute& a) {
    const std::string* v = find(attrs, a.name);
    const std::string s = v ? trimmed(*v) : std::string(a.default_string);
    const int i = schema::find_choice(a, s);
    if (i < 0)
        throw OpError(std::string("attr '") + a.name + "' must be one of " +
                      schema::listed_choices(a) + ", got '" + s + "'");
    return E(i);
}

// A 64-bit pattern from a decimal integer in [-2^63, 2^64); negative values are their two's
// complement (docs/dropout.md), so seed -1 is 0xFFFFFFFFFFFFFFFF.
uint64_t parse_u64(const Attrs& attrs, const schema::Attribute& a) {
    const std::string* v = find(attrs, a.name);
    if (!v) {
        if (!a.required) return uint64_t(a.default_int);
        throw OpError(std::string("attr '") + a.name +
                      "' is required (an integer in [-2^63, 2^64))");
    }
    const std::string s = trimmed(*v);
    auto bad = [&] {
        return OpError(std::string("attr '") + a.name +
                       "' must be an integer in [-2^63, 2^64), got '" + *v + "'");
    };
    size_t i = 0;
    const bool neg = !s.empty() && s[0] == '-';
    if (!s.empty() && (s[0] == '-' || s[0] == '+')) i = 1;
    if (i == s.size()) throw bad();
    unsigned __int128 mag = 0;
    for (; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') throw bad();
        mag = mag * 10 + unsigned(s[i] - '0');
        if (mag > (unsigned __int128)(UINT64_MAX)) throw bad();
    }
    if (neg) {
        if (mag > (unsigned __int128)(1) << 63) throw bad();
        return uint64_t(0) - uint64_t(mag);
    }
    return uint64_t(mag);
}

float parse_p(const Attrs& attrs, const schema::Attribute& a) {
    const std::string* v = find(attrs, a.name);
    if (!v) return float(a.default_real);
    const std::string s = trimmed(*v);
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE)
        throw OpError(std::string("attr '") + a.name + "' must be a number, got '" + *v + "'");
    // float32 as the bit contract compares in (same rounding as fusebridge's as_probability).
    const float p = float(d);
    if (std::isnan(p) || p < 0.0f || p > 1.0f)
        throw OpError(std::string("attr '") + a.name + "' must lie in [0, 1], got '" + *v + "'");
    return p;
}

// MXNet writes tuples as "(1, 2)", "(1,)" or "[1, 2]"; a bare "1" is one axis. Not given:
// the default, empty.
Dims parse_int_tuple(const Attrs& attrs, const schema::Attribute& a) {
    const std::string* v = find(attrs, a.name);
    Dims out;
    if (!v) return out;
    std::string s = trimmed(*v);
    auto bad = [&] {
        return OpError(std::string("attr '") + a.name + "' must be a tuple of integers, got '" +
                       *v + "'");
    };
    if (!s.empty() && (s.front() == '(' || s.front() == '[')) {
        const char close = s.front() == '(' ? ')' : ']';
        if (s.size() < 2 || s.back() != close) throw bad();
        s = s.substr(1, s.size() - 2);
    }
    std::stringstream items(s);
    std::string item;
    std::vector<std::string> parts;
    while (std::getline(items, item, ',')) parts.push_back(trimmed(item));
    // A trailing comma ("(1,)") leaves one empty last part; any other empty part is an error.
    if (!parts.empty() && parts.back().empty() && parts.size() > 1) parts.pop_back();
    if (parts.size() == 1 && parts[0].empty()) parts.clear();
    for (const std::string& p : parts) {
        char* end = nullptr;
        errno = 0;
        const long long n = std::strtoll(p.c_str(), &end, 10);
        if (p.empty() || end != p.c_str() + p.size() || errno == ERANGE) throw bad();
        out.push_back(int64_t(n));
    }
    return out;
}

// ---------------------------------------------------------------- shapes and types

// MXNet 1.9's lib_api bridge cannot pass an input of unknown rank at all (it fails with
// std::bad_alloc before calling us) and passes an unknown dimension as 2^32 - 1 (or 0 in
// legacy files). Our ops need every input's shape, so a partial one is an error.
Dims known_dims(const std::vector<unsigned int>& s, const char* input) {
    for (unsigned d : s)
        if (d == 0 || d == UINT32_MAX)
            throw OpError(std::string("input '") + input +
                          "' has an unknown shape; give every input's shape");
    return Dims(s.begin(), s.end());
}

std::vector<unsigned int> to_shape(const Dims& d) {
    std::vector<unsigned int> s;
    for (int64_t v : d) {
        if (v > int64_t(UINT32_MAX)) throw OpError("a dimension exceeds MXNet's 32-bit shapes");
        s.push_back(unsigned(v));
    }
    return s;
}

const char* dtype_name(int t) {
    switch (t) {
        case mxnet::ext::kFloat32: return "float32";
        case mxnet::ext::kFloat64: return "float64";
        case mxnet::ext::kFloat16: return "float16";
        case mxnet::ext::kUint8: return "uint8";
        case mxnet::ext::kInt32: return "int32";
        case mxnet::ext::kInt8: return "int8";
        case mxnet::ext::kInt64: return "int64";
        case -1: return "unknown";
        default: return "an unsupported type";
    }
}

void require_cpu(const std::vector<MXTensor>& ts) {
    for (const MXTensor& t : ts)
        if (t.ctx.dev_type != "cpu")
            throw OpError("runs on CPU only, got a tensor on " + t.ctx.dev_type);
}

// ---------------------------------------------------------------- dropout

struct DropoutParams {
    float p;
    uint64_t seed, offset;
    Dims axes;
    fb::DropoutMode mode;
    bool is_test;
};

DropoutParams dropout_params(const Attrs& attrs) {
    namespace op = schema::dropout;
    check_known(attrs, op::mxnet_attrs);
    DropoutParams d;
    d.p = parse_p(attrs, op::p);
    d.seed = parse_u64(attrs, op::seed);
    d.offset = parse_u64(attrs, op::offset);
    d.axes = parse_int_tuple(attrs, op::axes);
    d.mode = parse_choice<op::Mode>(attrs, op::mode) == op::Mode::upscale_in_train
                 ? fb::DropoutMode::upscale_in_train
                 : fb::DropoutMode::downgrade_in_infer;
    d.is_test = parse_bool(attrs, op::is_test);
    return d;
}

std::shared_ptr<const fb::DropoutPrimitive> dropout_primitive(const DropoutParams& d,
                                                              const Dims& shape) {
    return fb::primitive<fb::DropoutPrimitive>(
        glue::dropout_desc(shape, d.p, d.mode, d.is_test, d.axes));
}

MXReturnValue dropout_parse(const Attrs& attrs, int* num_in, int* num_out) {
    return guarded(kDropout, [&] {
        dropout_params(attrs);
        *num_in = 1;
        *num_out = 2;
    });
}

MXReturnValue dropout_type(const Attrs& attrs, std::vector<int>* in, std::vector<int>* out) {
    return guarded(kDropout, [&] {
        dropout_params(attrs);
        int& x = (*in)[0];
        if (x == -1) x = mxnet::ext::kFloat32;  // the only type it takes
        if (x != mxnet::ext::kFloat32)
            throw OpError(std::string("input 'x' must be float32, got ") + dtype_name(x));
        (*out)[0] = mxnet::ext::kFloat32;
        (*out)[1] = mxnet::ext::kUint8;
    });
}

MXReturnValue dropout_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    return guarded(kDropout, [&] {
        const DropoutParams d = dropout_params(attrs);
        const Dims x = known_dims((*in)[0], "x");
        (*out)[0] = (*in)[0];
        (*out)[1] = to_shape({glue::packed_bytes(glue::dropout_mask_shape(x, d.axes))});
    });
}

MXReturnValue dropout_forward(const Attrs& attrs, std::vector<MXTensor>* in,
                              std::vector<MXTensor>* out, const OpResource&) {
    return guarded(kDropout, [&] {
        const DropoutParams d = dropout_params(attrs);
        require_cpu(*in), require_cpu(*out);
        MXTensor &x = (*in)[0], &y = (*out)[0], &mask = (*out)[1];
        if (x.dtype != mxnet::ext::kFloat32 || y.dtype != mxnet::ext::kFloat32 ||
            mask.dtype != mxnet::ext::kUint8)
            throw OpError("expects x and y float32 and the mask uint8");
        const auto prim = dropout_primitive(d, x.shape);
        if (y.shape != x.shape || mask.size() != prim->mask_bytes())
            throw OpError("output shapes differ from the inferred ones");
        // The kernel writes every mask bit but leaves the unused high bits of the last byte;
        // MXNet's buffer is uninitialised, and docs/dropout.md wants them zero.
        if (prim->mask_bytes() > 0) mask.data<uint8_t>()[prim->mask_bytes() - 1] = 0;
        prim->forward(x.data_ptr, y.data_ptr, mask.data<uint8_t>(), d.seed, d.offset);
    });
}

// MXNet's gradient node gets the output gradients (dy, dmask), the inputs (x) and the outputs
// (y, mask), and produces dx.
MXReturnValue dropout_backward(const Attrs& attrs, std::vector<MXTensor>* in,
                               std::vector<MXTensor>* out, const OpResource&) {
    return guarded(kDropout, [&] {
        const DropoutParams d = dropout_params(attrs);
        require_cpu(*in), require_cpu(*out);
        if (in->size() != 5 || out->size() != 1)
            throw OpError("backward expects (dy, dmask, x, y, mask) -> dx, got " +
                          std::to_string(in->size()) + " inputs");
        MXTensor &dy = (*in)[0], &mask = (*in)[4], &dx = (*out)[0];
        if (dy.dtype != mxnet::ext::kFloat32 || dx.dtype != mxnet::ext::kFloat32 ||
            mask.dtype != mxnet::ext::kUint8)
            throw OpError("backward expects dy and dx float32 and the mask uint8");
        const auto prim = dropout_primitive(d, dy.shape);
        if (dx.shape != dy.shape || mask.size() != prim->mask_bytes())
            throw OpError("backward: dy, dx and mask sizes disagree");
        prim->apply_mask(dy.data_ptr, dx.data_ptr, mask.data<uint8_t>());
    });
}

// ---------------------------------------------------------------- fusion GRU

struct GruParams : glue::GruConfig {
    bool has_h0 = false;
};

GruParams gru_params(const Attrs& attrs) {
    namespace op = schema::fusion_gru;
    check_known(attrs, op::mxnet_attrs);
    const auto direction = parse_choice<op::Direction>(attrs, op::direction);
    const auto layout = parse_choice<op::Layout>(attrs, op::layout);
    const bool lbr = parse_bool(attrs, op::linear_before_reset);
    const bool origin = parse_bool(attrs, op::origin_mode);
    const auto act = parse_choice<op::Activation>(attrs, op::activation);
    const auto gate = parse_choice<op::GateActivation>(attrs, op::gate_activation);
    return GruParams{glue::gru_config(direction, layout, lbr, origin, act, gate),
                     parse_bool(attrs, op::has_h0)};
}

MXReturnValue gru_parse(const Attrs& attrs, int* num_in, int* num_out) {
    return guarded(kGru, [&] {
        *num_in = gru_params(attrs).has_h0 ? 7 : 6;
        *num_out = 1;
    });
}

MXReturnValue gru_type(const Attrs& attrs, std::vector<int>* in, std::vector<int>* out) {
    return guarded(kGru, [&] {
        gru_params(attrs);
        for (size_t i = 0; i < in->size(); ++i) {
            int& t = (*in)[i];
            if (t == -1) t = mxnet::ext::kFloat32;
            // seq_lens may come as MXNet's float32 sequence_length or as integers.
            const bool ok = t == mxnet::ext::kFloat32 ||
                            (i == 1 && (t == mxnet::ext::kFloat64 || t == mxnet::ext::kInt32 ||
                                        t == mxnet::ext::kInt64));
            if (!ok)
                throw OpError(std::string("input '") + glue::kGruInputs[i] + "' must be float32" +
                              (i == 1 ? ", float64, int32 or int64" : "") + ", got " +
                              dtype_name(t));
        }
        (*out)[0] = mxnet::ext::kFloat32;
    });
}

MXReturnValue gru_shape(const Attrs& attrs, Shapes* in, Shapes* out) {
    return guarded(kGru, [&] {
        const GruParams g = gru_params(attrs);
        std::vector<Dims> dims;
        for (size_t i = 0; i < in->size(); ++i)
            dims.push_back(known_dims((*in)[i], glue::kGruInputs[i]));
        (*out)[0] = to_shape(glue::gru_y_shape(g, glue::gru_dims(g, dims)));
    });
}

// Sentence lengths from seq_lens in whatever type it came, each a whole number in [0, T].
std::vector<int64_t> read_lens(const MXTensor& s, int64_t steps) {
    const int64_t n = s.size();
    std::vector<int64_t> lens(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        double v;
        switch (s.dtype) {
            case mxnet::ext::kFloat32: v = static_cast<const float*>(s.data_ptr)[i]; break;
            case mxnet::ext::kFloat64: v = static_cast<const double*>(s.data_ptr)[i]; break;
            case mxnet::ext::kInt32: v = static_cast<const int32_t*>(s.data_ptr)[i]; break;
            case mxnet::ext::kInt64: v = double(static_cast<const int64_t*>(s.data_ptr)[i]); break;
            default: throw OpError(std::string("input 'seq_lens' has type ") + dtype_name(s.dtype));
        }
        lens[size_t(i)] = glue::gru_length(v, steps, i);
    }
    return lens;
}

MXReturnValue gru_forward(const Attrs& attrs, std::vector<MXTensor>* in,
                          std::vector<MXTensor>* out, const OpResource&) {
    return guarded(kGru, [&] {
        const GruParams g = gru_params(attrs);
        require_cpu(*in), require_cpu(*out);
        const size_t nin = g.has_h0 ? 7 : 6;
        if (in->size() != nin || out->size() != 1)
            throw OpError("expects " + std::to_string(nin) + " inputs and 1 output");
        std::vector<Dims> dims;
        for (const MXTensor& t : *in) dims.push_back(t.shape);
        const glue::GruDims m = glue::gru_dims(g, dims);
        for (size_t i = 0; i < nin; ++i)
            if (i != 1 && (*in)[i].dtype != mxnet::ext::kFloat32)
                throw OpError(std::string("input '") + glue::kGruInputs[i] + "' must be float32");
        MXTensor& y = (*out)[0];
        const Dims y_shape = glue::gru_y_shape(g, m);
        if (y.dtype != mxnet::ext::kFloat32 || y.shape != y_shape)
            throw OpError("output 'y' must be float32 " + str(y_shape) + ", got " + str(y.shape));

        const std::vector<int64_t> lens = read_lens((*in)[1], m.t);
        glue::gru_forward(g, m, lens, (*in)[0].data<float>(),
                          {(*in)[2].data<float>(), (*in)[3].data<float>(), (*in)[4].data<float>(),
                           (*in)[5].data<float>()},
                          g.has_h0 ? (*in)[6].data<float>() : nullptr, y.data<float>());
    });
}

// MXNet's gradient node of the GRU. Without a registered backward MXNet refuses every graph
// that might differentiate the op ("non-differentiable because it didn't register FGradient"),
// and gluon's SymbolBlock builds its backward graph up front, even for inference with every
// grad_req 'null'. So the GRU has this backward, which MXNet calls only when a gradient is
// actually computed, and which says so instead of returning a wrong gradient.
MXReturnValue gru_backward(const Attrs&, std::vector<MXTensor>*, std::vector<MXTensor>*,
                           const OpResource&) {
    clear_messages();
    MX_ERROR_MSG << kGru << " has no backward yet; run the model for inference (outside "
                 << "autograd.record(), or with no gradient asked of the GRU's inputs), or "
                 << "train the original model with MXNet's RNN and save_mxnet it again";
    return MX_FAIL;
}

}  // namespace

REGISTER_OP(fusebridge_dropout)
    .setParseAttrs(dropout_parse)
    .setInferType(dropout_type)
    .setInferShape(dropout_shape)
    .setForward(dropout_forward, "cpu")
    .setBackward(dropout_backward, "cpu");

REGISTER_OP(fusebridge_fusion_gru)
    .setParseAttrs(gru_parse)
    .setInferType(gru_type)
    .setInferShape(gru_shape)
    .setForward(gru_forward, "cpu")
    .setBackward(gru_backward, "cpu");

// Called by mx.library.load. The threads, the instruction set and OpenBLAS's pool are the
// kernels runtime's, which fusebridge.kernels set up when it loaded the same library.
MXReturnValue initialize(int version) {
    if (version < 10900) {
        clear_messages();
        MX_ERROR_MSG << "fusebridge: the op library needs MXNet >= 1.9, got version " << version;
        return MX_FAIL;
    }
    return MX_SUCCESS;
}
