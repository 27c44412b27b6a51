// Process-wide settings of the compiled core: threads (OpenMP and OpenBLAS together) and BLAS.
#pragma once
#include <cstdint>
#include <string>

namespace fusebridge {

void set_num_threads(int n);  // OpenMP and OpenBLAS pools, so they never oversubscribe
int omp_threads();
int blas_threads();
std::string blas_config();

// C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C, row-major, through OpenBLAS.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c);

}  // namespace fusebridge
