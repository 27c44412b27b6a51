#include "runtime.hpp"

#include <cblas.h>
#include <omp.h>

#include <climits>
#include <stdexcept>

namespace fusebridge {

void set_num_threads(int n) {
    if (n < 1) throw std::invalid_argument("set_num_threads: n must be >= 1");
    omp_set_num_threads(n);
    scipy_openblas_set_num_threads(n);
}

int omp_threads() { return omp_get_max_threads(); }
int blas_threads() { return scipy_openblas_get_num_threads(); }
std::string blas_config() { return scipy_openblas_get_config(); }

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c) {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        throw std::invalid_argument("sgemm: dimensions exceed the 32-bit BLAS interface");
    scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), alpha, a,
                      int(k), b, int(n), beta, c, int(n));
}

}  // namespace fusebridge
