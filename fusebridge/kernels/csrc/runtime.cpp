#include "runtime.hpp"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "parallel.hpp"

namespace fusebridge {

namespace {
int usable_cores() {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof(set), &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}
}  // namespace

// No kernel gains from more threads than cores (each splits its work by shape), so the cap is
// the cores, or up to 8 times them (oversubscription, for experiments) while that stays within
// 256 threads (2 GiB of the default 8 MiB stacks).
int thread_cap() {
    const int procs = usable_cores();
    return std::max(procs, std::min(8 * procs, 256));
}

namespace {
// OMP_NUM_THREADS (the variable users set for every threaded library; its first count) or the
// cores, at load; a count past the cap is lowered to it, an unreadable one ignored.
int default_threads() {
    const char* env = std::getenv("OMP_NUM_THREADS");
    char* end = nullptr;
    const long n = env ? std::strtol(env, &end, 10) : 0;
    const bool read = n >= 1 && end != env && (*end == '\0' || *end == ',');
    return read ? int(std::min<long>(n, thread_cap())) : usable_cores();
}
std::atomic<int> g_threads{default_threads()};
}  // namespace

// OpenBLAS's own pthread pool stays at one thread: its workers spin after each call and would
// fight the kernels' pool (parallel.hpp) for the same cores. Parallel BLAS work runs instead as
// pieces on the pool, each piece a single-threaded OpenBLAS call.
void set_num_threads(int n) {
    if (n < 1 || n > thread_cap())
        throw std::invalid_argument("set_num_threads: n must lie in [1, " +
                                    std::to_string(thread_cap()) + "], got " +
                                    std::to_string(n));
    g_threads.store(n);
    scipy_openblas_set_num_threads(1);
}

int max_threads() { return g_threads.load(std::memory_order_relaxed); }

namespace {
struct IsaLimit {
    Isa isa = best_isa();
    unsigned extensions = kExtAll;
    std::string error;  // why $FUSEBRIDGE_ISA cannot be run, or empty
};

// "<isa>" or "<isa>-no<extension>..." (say "avx512-novnni-nobf16").
IsaLimit isa_limit_from_env() {
    IsaLimit limit;
    const char* env = std::getenv("FUSEBRIDGE_ISA");
    if (env == nullptr) return limit;
    const std::string want = env;
    const std::string name = want.substr(0, want.find('-'));
    std::string masks = name.size() < want.size() ? want.substr(name.size()) : "";
    unsigned extensions = kExtAll;
    for (unsigned bit : {kExtVnni, kExtBf16}) {
        const std::string token = std::string("-no") + extension_name(bit);
        const size_t at = masks.find(token);
        if (at != std::string::npos) masks.erase(at, token.size()), extensions &= ~bit;
    }
    std::string allowed;
    for (int i = 0; i <= int(limit.isa); ++i) {
        allowed += std::string(i ? ", " : "") + "'" + isa_name(Isa(i)) + "'";
        if (masks.empty() && name == isa_name(Isa(i))) return {Isa(i), extensions, ""};
    }
    limit.error = "FUSEBRIDGE_ISA: expected one of (" + allowed +
                  ") on this CPU, optionally followed by -novnni and/or -nobf16, got '" + want +
                  "'";
    return limit;
}

const IsaLimit& isa_setting() {
    static const IsaLimit limit = isa_limit_from_env();
    return limit;
}

std::atomic<int> g_isa{-1};  // -1: isa_limit(), until set_isa
std::atomic<int> g_extensions{-1};  // -1: extension_limit(), until set_extensions
}  // namespace

Isa isa_limit() {
    const IsaLimit& limit = isa_setting();
    if (!limit.error.empty()) throw std::invalid_argument(limit.error);
    return limit.isa;
}

Isa current_isa() {
    const int isa = g_isa.load(std::memory_order_relaxed);
    return isa < 0 ? isa_limit() : Isa(isa);
}

void set_isa(Isa isa) {
    if (int(isa) < 0 || int(isa) > int(isa_limit()))
        throw std::invalid_argument(std::string("set_isa: ") + isa_name(isa) +
                                    " is beyond what this process may run (" +
                                    isa_name(isa_limit()) + ")");
    g_isa.store(int(isa));
}
unsigned extension_limit() {
    isa_limit();  // throws for an unusable $FUSEBRIDGE_ISA
    return isa_setting().extensions;
}

unsigned current_extensions() {
    const int mask = g_extensions.load(std::memory_order_relaxed);
    return (mask < 0 ? extension_limit() : unsigned(mask)) & cpu_extensions(current_isa());
}

void set_extensions(unsigned mask) {
    if (mask & ~extension_limit())
        throw std::invalid_argument("set_extensions: mask " + std::to_string(mask) +
                                    " turns on an extension $FUSEBRIDGE_ISA masks (allowed: " +
                                    std::to_string(extension_limit()) + ")");
    g_extensions.store(int(mask));
}

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
    const int nt = int(std::min<double>(
        {double(max_threads()), double(pieces), std::max(1.0, fma / kMinGemmFmaPerThread)}));
    // Row pieces innermost: consecutive pieces of one range share B's column panel.
    parallel_ranges(pieces, nt, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) piece(i);
    });
}

}  // namespace fusebridge
