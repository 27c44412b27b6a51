// The per-ISA row loops of the fused softmax (+ dropout) and the matmul epilogue: one table per
// instruction set, chosen at run time. Every ISA computes on 16 lanes with the same operations
// in the same order (a row's lane j holds elements j, j + 16, ...; sums reduce by a fixed
// tree), so softmax gives the same bits on scalar, AVX2 and AVX-512.
#pragma once
#include <cstdint>


namespace fusebridge {

struct FusedKernels {
    // Rows: n contiguous elements.
    float (*row_max)(const float* x, int64_t n);
    // e = exp(x - m) for x - m <= 0; returns the sum of e.
    float (*exp_row)(const float* x, int64_t n, float m, float* e);
    void (*scale_row)(const float* x, int64_t n, float s, float* y);  // y = x * s
    float (*dot_row)(const float* a, const float* b, int64_t n);       // sum of a * b
    // dx = p * (g - s): softmax's backward, g the gradient of its output.
    void (*grad_row)(const float* p, const float* g, int64_t n, float s, float* dx);

    // Columns: the same per lane of n independent columns (softmax over a strided axis walks
    // its rows one after the other, each op elementwise).
    void (*max_cols)(float* m, const float* x, int64_t n);  // m = max(m, x)
    // e = exp(x - m); s += e.
    void (*exp_cols)(const float* x, const float* m, int64_t n, float* e, float* s);
    void (*scale_cols)(const float* x, const float* s, int64_t n, float* y);  // y = x * s
    void (*dot_cols)(const float* a, const float* b, int64_t n, float* s);    // s += a * b
    void (*grad_cols)(const float* p, const float* g, const float* s, int64_t n, float* dx);
    void (*add_cols)(float* y, const float* b, int64_t n);  // y += b (the matmul bias)
};

const FusedKernels& fused_kernels_scalar();
const FusedKernels& fused_kernels_avx2();
const FusedKernels& fused_kernels_avx512();

}  // namespace fusebridge
