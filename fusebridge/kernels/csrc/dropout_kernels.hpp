// The per-ISA inner loops of dropout: one table per instruction set, chosen at run time
// (dispatch.hpp).
#pragma once
#include <cstdint>

namespace fusebridge {

enum class DType : int { f32 = 0, f64 = 1, f16 = 2, bf16 = 3 };

// A 16-bit float or bfloat16 travels as its raw bits.
using half_bits = uint16_t;

struct DropoutKernels {
    // out[w] bit b = keep decision of element group0 + 64*w + b (group0 % 4 == 0). While
    // word w is computed, the `prefetch_stride` bytes at prefetch + w * prefetch_stride are
    // fetched (the data the bits will be applied to), so memory works while Philox computes.
    void (*keep_bits)(uint64_t seed, uint64_t offset, uint32_t threshold, uint64_t group0,
                      int64_t nwords, uint64_t* out, const char* prefetch,
                      int64_t prefetch_stride);
    // y[i] = bit(pos + i) ? x[i] * scale : 0, for i < n. `stream` asks for non-temporal stores.
    void (*apply_f32)(const float* x, float* y, int64_t n, const uint8_t* bits, int64_t pos,
                      float scale, bool stream);
    void (*apply_f64)(const double* x, double* y, int64_t n, const uint8_t* bits, int64_t pos,
                      double scale, bool stream);
    void (*apply_f16)(const half_bits* x, half_bits* y, int64_t n, const uint8_t* bits,
                      int64_t pos, float scale, bool stream);
    void (*apply_bf16)(const half_bits* x, half_bits* y, int64_t n, const uint8_t* bits,
                       int64_t pos, float scale, bool stream);
};

const DropoutKernels& kernels_scalar();
const DropoutKernels& kernels_avx2();
const DropoutKernels& kernels_avx512();

}  // namespace fusebridge
