// Process-wide settings of the compiled core: threads (the kernels' pool and OpenBLAS together),
// the instruction set, and BLAS. They live in libfusebridge_kernels.so, which _C and the
// framework op libraries all load: one setting for the whole process.
#pragma once
#include <cstdint>
#include <string>

#include "isa.hpp"

namespace fusebridge {

// One count for the whole process (a Session used from a thread pool runs with it too); every
// parallel_for of the kernels (parallel.hpp) asks for at most max_threads() threads.
void set_num_threads(int n);  // n in [1, thread_cap()]; OpenBLAS's pool stays at 1 (runtime.cpp)
int max_threads();
int thread_cap();  // the most threads set_num_threads accepts (why: runtime.cpp)
int blas_threads();

// The widest instruction set allowed: best_isa(), lowered by $FUSEBRIDGE_ISA (read once) when
// set; a value that names no ISA this CPU runs throws std::invalid_argument at every call.
Isa isa_limit();
// The instruction set new primitives are built for (descriptors carry it): isa_limit() until
// set_isa picks another within it.
Isa current_isa();
void set_isa(Isa isa);
// The extensions (isa.hpp) new primitives may use: those of cpu_extensions(current_isa()) that
// $FUSEBRIDGE_ISA does not mask ("avx512-novnni", "avx512-nobf16", "avx2-novnni", ...) and
// set_extensions has not turned off. Masking one makes the kernels emulate it: same bits.
unsigned extension_limit();  // the mask $FUSEBRIDGE_ISA allows (kExtAll when unset)
unsigned current_extensions();
void set_extensions(unsigned mask);  // within extension_limit()
std::string blas_config();

// C[m, n] = alpha * A[m, k] @ B[k, n] + beta * C, row-major, through OpenBLAS. The matrix is cut
// into pieces chosen from (m, n) alone, each one single-threaded OpenBLAS call; threads only
// decide who computes which piece, so no bit of C depends on the thread count.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
           float beta, float* c);

}  // namespace fusebridge
