// Throughput of the one-instruction dot products the quantized GRU is built on, against the FMA
// the float32 GRU uses: 12 independent accumulator chains of one instruction, in a loop long
// enough to hide everything else. Prints MACs per nanosecond for each instruction this CPU has.
// Built and run by benchmarks/dot_throughput.py (g++ -O2 -march=native).
#include <chrono>
#include <cstdio>
#include <cstring>

#define CHAINS(op)                                                                        \
    op " %%zmm13, %%zmm14, %%zmm0\n" op " %%zmm13, %%zmm14, %%zmm1\n" op                  \
       " %%zmm13, %%zmm14, %%zmm2\n" op " %%zmm13, %%zmm14, %%zmm3\n" op                  \
       " %%zmm13, %%zmm14, %%zmm4\n" op " %%zmm13, %%zmm14, %%zmm5\n" op                  \
       " %%zmm13, %%zmm14, %%zmm6\n" op " %%zmm13, %%zmm14, %%zmm7\n" op                  \
       " %%zmm13, %%zmm14, %%zmm8\n" op " %%zmm13, %%zmm14, %%zmm9\n" op                  \
       " %%zmm13, %%zmm14, %%zmm10\n" op " %%zmm13, %%zmm14, %%zmm11\n"
#define CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                 "xmm9", "xmm10", "xmm11"

constexpr long kLoops = 20000000;

template <class F>
static double ns_per_instruction(F body) {
    double best = 1e9;
    for (int round = 0; round < 5; ++round) {
        const auto t0 = std::chrono::steady_clock::now();
        body();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = s < best ? s : best;
    }
    return best / kLoops / 12 * 1e9;
}

int main() {
    __builtin_cpu_init();
    const double fma = ns_per_instruction([] {
        for (long i = 0; i < kLoops; ++i) asm volatile(CHAINS("vfmadd231ps") ::: CLOBBERS);
    });
    std::printf("vfmadd231ps zmm (float32, 16 MACs) %.3f ns, %.1f MACs/ns\n", fma, 16 / fma);
    if (__builtin_cpu_supports("avx512bf16")) {
        const double bf = ns_per_instruction([] {
            for (long i = 0; i < kLoops; ++i) asm volatile(CHAINS("vdpbf16ps") ::: CLOBBERS);
        });
        std::printf("vdpbf16ps zmm (bf16, 32 MACs) %.3f ns, %.1f MACs/ns\n", bf, 32 / bf);
    }
    if (__builtin_cpu_supports("avx512vnni")) {
        const double bu = ns_per_instruction([] {
            for (long i = 0; i < kLoops; ++i) asm volatile(CHAINS("vpdpbusd") ::: CLOBBERS);
        });
        std::printf("vpdpbusd zmm (int8, 64 MACs) %.3f ns, %.1f MACs/ns\n", bu, 64 / bu);
    }
}
