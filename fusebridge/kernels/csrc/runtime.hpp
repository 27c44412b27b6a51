// Process-wide settings of the compiled core: threads (the kernels' pool and OpenBLAS together)
// and BLAS.
#pragma once
#include <cstdint>
#include <string>

namespace fusebridge {

// One count for the whole process (a Session used from a thread pool runs with it too); every
// parallel_for of the kernels (parallel.hpp) asks for at most max_threads() threads.
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
