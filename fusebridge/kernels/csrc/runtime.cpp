#include "runtime.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

namespace fusebridge {

// OpenBLAS's own pthread pool stays at one thread: its workers spin after each call and would
// fight the OpenMP threads of the kernels for the same cores. Parallel BLAS work runs instead as
// row slices on the OpenMP threads, each slice a single-threaded OpenBLAS call.
void set_num_threads(int n) {
    if (n < 1) throw std::invalid_argument("set_num_threads: n must be >= 1");
    omp_set_num_threads(n);
    scipy_openblas_set_num_threads(1);
}

int omp_threads() { return omp_get_max_threads(); }
int blas_threads() { return scipy_openblas_get_num_threads(); }
std::string blas_config() { return scipy_openblas_get_config(); }

namespace {
// A slice smaller than this many multiply-adds is not worth waking a thread for.
constexpr double kMinGemmFmaPerThread = 1 << 19;
}

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c) {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        throw std::invalid_argument("sgemm: dimensions exceed the 32-bit BLAS interface");
    // C[r0:r1, c0:c1] = A[r0:r1] @ B[:, c0:c1]; the leading dimensions stay those of the whole.
    auto block = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        if (r1 > r0 && c1 > c0)
            scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(r1 - r0),
                              int(c1 - c0), int(k), alpha, a + r0 * k, int(k), b + c0, int(n),
                              beta, c + r0 * n + c0, int(n));
    };
    const double fma = double(m) * double(n) * double(k);
    const int nt = int(std::min<double>({double(omp_get_max_threads()), double(std::max(m, n)),
                                         std::max(1.0, fma / kMinGemmFmaPerThread)}));
    if (nt <= 1 || omp_in_parallel()) return block(0, m, 0, n);
    // Each slice packs the part of B it reads: with few rows, slicing the columns keeps every
    // thread from packing all of B (a GRU over one sentence: 54 x 1536 from 512 x 1536).
    const bool by_rows = m >= n;
#pragma omp parallel num_threads(nt)
    {
        const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
        if (by_rows) {
            block(m * t / threads, m * (t + 1) / threads, 0, n);
        } else {
            const int64_t vecs = (n + 15) / 16;  // whole 64-byte column groups per slice
            block(0, m, std::min(n, vecs * t / threads * 16),
                  std::min(n, vecs * (t + 1) / threads * 16));
        }
    }
}

}  // namespace fusebridge
