// Process-wide settings of the compiled core: threads (OpenMP and OpenBLAS together) and BLAS.
#pragma once
#include <cstdint>
#include <string>

namespace fusebridge {

// OpenMP's own setting (omp_set_num_threads) belongs to the calling thread, so a Session used
// from a thread pool would run with another count. The count lives here instead, for the whole
// process, and every parallel region names it (num_threads(max_threads())).
void set_num_threads(int n);  // n in [1, thread_cap()]; OpenBLAS's pool stays at 1 (runtime.cpp)
int max_threads();
int thread_cap();  // the most threads set_num_threads accepts (why: runtime.cpp)
int blas_threads();
std::string blas_config();

// C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C, row-major, through OpenBLAS. The matrix is cut
// into pieces chosen from (m, n) alone, each one single-threaded OpenBLAS call; threads only
// decide who computes which piece, so no bit of C depends on the thread count.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c);

}  // namespace fusebridge
