#include "runtime.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <stdexcept>
#include <string>

namespace fusebridge {

// libgomp starts a team's threads when a parallel region begins and ends the process when one
// cannot be created (pthread_create failing for want of address space or of a thread quota):
// with glibc's default 8 MiB stacks, 512 threads already exhaust a 4 GiB address space. No
// kernel gains from more threads than cores (each splits its work by shape), so the cap is the
// cores, or up to 8 times them (oversubscription, for experiments) while that stays within 256
// threads (2 GiB of stacks); never above OpenMP's own limit (OMP_THREAD_LIMIT).
int thread_cap() {
    const int procs = omp_get_num_procs();
    return std::min(omp_get_thread_limit(), std::max(procs, std::min(8 * procs, 256)));
}

namespace {
// OMP_NUM_THREADS or the cores, at load; a larger OMP_NUM_THREADS is lowered to the cap (no
// result depends on the thread count, and the first region would end the process otherwise).
std::atomic<int> g_threads{std::min(omp_get_max_threads(), thread_cap())};
}  // namespace

// OpenBLAS's own pthread pool stays at one thread: its workers spin after each call and would
// fight the OpenMP threads of the kernels for the same cores. Parallel BLAS work runs instead as
// pieces on the OpenMP threads, each piece a single-threaded OpenBLAS call.
void set_num_threads(int n) {
    if (n < 1 || n > thread_cap())
        throw std::invalid_argument("set_num_threads: n must lie in [1, " +
                                    std::to_string(thread_cap()) + "], got " +
                                    std::to_string(n));
    g_threads.store(n);
    omp_set_num_threads(n);  // also for OpenMP code of others that runs on this thread
    scipy_openblas_set_num_threads(1);
}

int max_threads() { return g_threads.load(std::memory_order_relaxed); }
int blas_threads() { return scipy_openblas_get_num_threads(); }
std::string blas_config() { return scipy_openblas_get_config(); }

namespace {
// Piece sizes: large enough that OpenBLAS runs near its peak inside a piece (its per-call
// packing of B costs about 1/rows of the arithmetic), small enough to feed two or more threads.
constexpr int64_t kPieceRows = 256;
constexpr int64_t kPieceCols = 512;  // a multiple of 16: whole 64-byte column groups
// A piece smaller than this many multiply-adds is not worth waking a thread for.
constexpr double kMinGemmFmaPerThread = 1 << 19;
}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c) {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        throw std::invalid_argument("sgemm: dimensions exceed the 32-bit BLAS interface");
    const int64_t row_pieces = (m + kPieceRows - 1) / kPieceRows;
    const int64_t col_pieces = (n + kPieceCols - 1) / kPieceCols;
    const int64_t pieces = row_pieces * col_pieces;
    // C[r0:r1, c0:c1] = A[r0:r1] @ B[:, c0:c1]; the leading dimensions stay those of the whole.
    auto piece = [&](int64_t i) {
        const int64_t r0 = i % row_pieces * kPieceRows, r1 = std::min(m, r0 + kPieceRows);
        const int64_t c0 = i / row_pieces * kPieceCols, c1 = std::min(n, c0 + kPieceCols);
        scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(r1 - r0), int(c1 - c0),
                          int(k), alpha, a + r0 * k, int(k), b + c0, int(n), beta,
                          c + r0 * n + c0, int(n));
    };
    if (m == 0 || n == 0) return;
    const double fma = double(m) * double(n) * double(k);
    const int nt = omp_in_parallel()
                       ? 1
                       : int(std::min<double>({double(max_threads()), double(pieces),
                                               std::max(1.0, fma / kMinGemmFmaPerThread)}));
    // Row pieces innermost: consecutive pieces of one thread share B's column panel.
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t i = 0; i < pieces; ++i) piece(i);
}

}  // namespace fusebridge
