// Generated from the op schemas (fusebridge/ops) and the glue tables of
// fusebridge/ops/glue_header.py by
//   python -m fusebridge.ops.glue_header > fusebridge/kernels/csrc/op_attributes.hpp
// Do not edit: tests/ops/test_glue_header.py fails when it differs from what that prints.
//
// The attributes of the ops the framework glues register (integrations/mxnet/csrc/mxnet_ops.cc,
// integrations/paddle/csrc/paddle_ops.cc): each one's name, kind, default and allowed values.
// The glues are compiled against a framework's headers at first use and cannot read the Python
// schemas, so they read them here. Plain C++17: no framework, no kernel.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace fusebridge::op_attributes {

enum class Kind { boolean, integer, real, string, int_list };

// The most allowed values any attribute below has.
inline constexpr std::size_t kMaxChoices = 4;

// One attribute. Its default is the field of its kind (an int list's is empty). A string
// attribute lists its allowed values in the order of its enum, so that the position of a
// value is its enumerator; a bool (0 or 1 in the schema) has none.
struct Attribute {
    const char* name = "";
    Kind kind = Kind::integer;
    bool required = false;  // no default: the caller must give it
    bool default_bool = false;
    std::int64_t default_int = 0;
    double default_real = 0;
    const char* default_string = "";
    std::array<const char*, kMaxChoices> choices{};  // then null
};

constexpr Attribute bool_attr(const char* name, bool value) {
    Attribute a;
    a.name = name;
    a.kind = Kind::boolean;
    a.default_bool = value;
    return a;
}

constexpr Attribute int_attr(const char* name, std::int64_t value) {
    Attribute a;
    a.name = name;
    a.kind = Kind::integer;
    a.default_int = value;
    return a;
}

constexpr Attribute required_int_attr(const char* name) {
    Attribute a = int_attr(name, 0);
    a.required = true;
    return a;
}

constexpr Attribute real_attr(const char* name, double value) {
    Attribute a;
    a.name = name;
    a.kind = Kind::real;
    a.default_real = value;
    return a;
}

constexpr Attribute string_attr(const char* name, const char* value,
                                std::initializer_list<const char*> choices) {
    Attribute a;
    a.name = name;
    a.kind = Kind::string;
    a.default_string = value;
    std::size_t i = 0;
    for (const char* c : choices) a.choices[i++] = c;  // past kMaxChoices: not a constant
    return a;
}

constexpr Attribute int_list_attr(const char* name) {
    Attribute a;
    a.name = name;
    a.kind = Kind::int_list;
    return a;
}

// The position of `value` among a's allowed values, or -1.
inline int find_choice(const Attribute& a, const std::string& value) {
    for (std::size_t i = 0; i < a.choices.size() && a.choices[i]; ++i)
        if (value == a.choices[i]) return int(i);
    return -1;
}

// a's allowed values as 'x', 'y', 'z', for messages.
inline std::string listed_choices(const Attribute& a) {
    std::string listed;
    for (std::size_t i = 0; i < a.choices.size() && a.choices[i]; ++i)
        listed += std::string(i ? ", " : "") + "'" + a.choices[i] + "'";
    return listed;
}

// `value` as the enumerator of a's enum (E); std::invalid_argument naming the attribute, the
// value and the allowed ones if it is none of them.
template <class E>
E choice(const Attribute& a, const std::string& value) {
    const int i = find_choice(a, value);
    if (i < 0)
        throw std::invalid_argument(std::string("attr '") + a.name + "' is '" + value +
                                    "', expected one of " + listed_choices(a));
    return E(i);
}

// A list below as Paddle's .Attrs() takes it.
template <std::size_t N>
std::vector<std::string> declarations(const char* const (&list)[N]) {
    return std::vector<std::string>(list, list + N);
}

// Dropout: fusebridge_dropout in MXNet and Paddle.
namespace dropout {
inline constexpr Attribute p = real_attr("p", 0.5);
enum class Mode { upscale_in_train, downgrade_in_infer };
inline constexpr Attribute mode =
    string_attr("mode", "upscale_in_train", {"upscale_in_train", "downgrade_in_infer"});
inline constexpr Attribute axes = int_list_attr("axes");
inline constexpr Attribute is_test = bool_attr("is_test", false);
// MXNet only, not in the schema: the schema's seed input, as an attribute: lib_api gives an op no
// random generator, so the node carries its seed. Required: without one nothing is drawn.
inline constexpr Attribute seed = required_int_attr("seed");
// MXNet only, not in the schema: the schema's offset input, as an attribute (as seed); 0 when left
// out.
inline constexpr Attribute offset = int_attr("offset", 0);
// Paddle only, not in the schema: whether the forward keeps the 1-bit mask for the grad op (false:
// the grad redraws the bits from Key). The schema says it by whether the mask output is used.
inline constexpr Attribute save_mask = bool_attr("save_mask", true);
// MXNet's attributes: any other one is refused as misspelt.
inline constexpr const char* mxnet_attrs[] = {"p", "seed", "offset", "axes", "mode", "is_test"};
// Paddle's .Attrs(...), in the order of the kernel functions' parameters.
inline constexpr const char* paddle_attrs[] = {
    "p: float", "mode: std::string", "is_test: bool", "axes: std::vector<int>", "save_mask: bool"};
}  // namespace dropout

// SoftmaxDropout: fusebridge_softmax_dropout in Paddle.
namespace softmax_dropout {
inline constexpr const Attribute& p = dropout::p;
using Mode = dropout::Mode;
inline constexpr const Attribute& mode = dropout::mode;
inline constexpr Attribute axis = int_attr("axis", -1);
// Paddle only, not in the schema: the program's mode, as for Dropout (true: no bits drawn). The
// schema's fused dropouts are made from training dropouts only.
inline constexpr Attribute is_test = bool_attr("is_test", false);
inline constexpr const Attribute& save_mask = dropout::save_mask;
// Paddle's .Attrs(...), in the order of the kernel functions' parameters.
inline constexpr const char* paddle_attrs[] = {
    "p: float", "mode: std::string", "is_test: bool", "axis: int", "save_mask: bool"};
}  // namespace softmax_dropout

// MatMulDropout: fusebridge_matmul_dropout in Paddle.
namespace matmul_dropout {
inline constexpr const Attribute& p = dropout::p;
using Mode = dropout::Mode;
inline constexpr const Attribute& mode = dropout::mode;
inline constexpr Attribute transpose_a = bool_attr("transpose_a", false);
inline constexpr Attribute transpose_b = bool_attr("transpose_b", false);
inline constexpr const Attribute& is_test = softmax_dropout::is_test;
inline constexpr const Attribute& save_mask = dropout::save_mask;
// Paddle's .Attrs(...), in the order of the kernel functions' parameters.
inline constexpr const char* paddle_attrs[] = {
    "p: float", "mode: std::string", "is_test: bool", "transpose_a: bool", "transpose_b: bool",
    "save_mask: bool"};
}  // namespace matmul_dropout

// FusionGRU: fusebridge_fusion_gru in MXNet and Paddle.
namespace fusion_gru {
enum class Direction { forward, reverse, bidirectional };
inline constexpr Attribute direction =
    string_attr("direction", "forward", {"forward", "reverse", "bidirectional"});
inline constexpr Attribute linear_before_reset = bool_attr("linear_before_reset", false);
inline constexpr Attribute origin_mode = bool_attr("origin_mode", true);
enum class Activation { sigmoid, tanh, relu, identity };
inline constexpr Attribute activation =
    string_attr("activation", "tanh", {"sigmoid", "tanh", "relu", "identity"});
using GateActivation = Activation;  // the same choices
inline constexpr Attribute gate_activation =
    string_attr("gate_activation", "sigmoid", {"sigmoid", "tanh", "relu", "identity"});
// Narrower than the schema's (lod, tnc, ntc; default lod): the glues take right-padded input and
// seq_lens: neither framework's op interface passes LoD offsets. tnc is the default of MXNet's RNN.
enum class Layout { tnc, ntc };
inline constexpr Attribute layout = string_attr("layout", "tnc", {"tnc", "ntc"});
// MXNet only, not in the schema: whether the H0 input is given. lib_api asks an op its input count
// from its attributes alone, so an optional input needs an attribute.
inline constexpr Attribute has_h0 = bool_attr("has_h0", false);
// MXNet's attributes: any other one is refused as misspelt.
inline constexpr const char* mxnet_attrs[] = {
    "direction", "layout", "linear_before_reset", "origin_mode", "activation", "gate_activation",
    "has_h0"};
// Paddle's .Attrs(...), in the order of the kernel functions' parameters.
inline constexpr const char* paddle_attrs[] = {
    "direction: std::string", "layout: std::string", "linear_before_reset: bool",
    "origin_mode: bool", "activation: std::string", "gate_activation: std::string"};
}  // namespace fusion_gru

}  // namespace fusebridge::op_attributes
