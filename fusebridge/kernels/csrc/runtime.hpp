// Process-wide settings of the compiled core: threads (OpenMP and OpenBLAS together) and BLAS.
#pragma once
#include <cstdint>
#include <string>

namespace fusebridge {

void set_num_threads(int n);  // OpenMP threads; OpenBLAS's pool stays at 1 (see runtime.cpp)
int omp_threads();
int blas_threads();
std::string blas_config();

// C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C, row-major, through OpenBLAS, in row slices
// on the OpenMP threads.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c);

}  // namespace fusebridge
