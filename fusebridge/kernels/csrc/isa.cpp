// Run-time ISA detection: CPUID feature bits plus XGETBV, so the OS must also save the state.
#include <cpuid.h>

#include "isa.hpp"

namespace fusebridge {

static unsigned long long xgetbv0() {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<unsigned long long>(edx) << 32) | eax;
}

static Isa detect_isa() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::scalar;
    const bool osxsave = c & bit_OSXSAVE, fma = c & bit_FMA, f16c = c & bit_F16C;
    if (!osxsave || !fma || !f16c) return Isa::scalar;
    const unsigned long long xcr0 = xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return Isa::scalar;  // XMM and YMM state
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::scalar;
    const bool avx2 = b & bit_AVX2, bmi2 = b & bit_BMI2;
    if (!avx2 || !bmi2) return Isa::scalar;
    const bool avx512 = (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) &&
                        (b & bit_AVX512DQ) && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM state
    return avx512 ? Isa::avx512 : Isa::avx2;
}

// cpuid traps to the hypervisor in a VM (slow: docs/performance.md), and every descriptor
// checks its ISA when made: the CPU is asked once.
Isa best_isa() {
    static const Isa best = detect_isa();
    return best;
}

static unsigned detect_extensions(Isa isa) {
    unsigned a, b, c, d, ext = 0;
    if (isa == Isa::scalar || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned max_subleaf = a;
    if (isa == Isa::avx512 && (c & bit_AVX512VNNI)) ext |= kExtVnni;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        if (isa == Isa::avx2 && (a & bit_AVXVNNI)) ext |= kExtVnni;
        if (isa == Isa::avx512 && (a & bit_AVX512BF16)) ext |= kExtBf16;
    }
    return ext;
}

unsigned cpu_extensions(Isa isa) {
    static const unsigned ext[3] = {0, detect_extensions(Isa::avx2),
                                    best_isa() == Isa::avx512 ? detect_extensions(Isa::avx512) : 0};
    return int(isa) <= int(best_isa()) ? ext[int(isa)] : 0;
}

const char* extension_name(unsigned bit) { return bit == kExtVnni ? "vnni" : "bf16"; }

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::avx512: return "avx512";
        case Isa::avx2: return "avx2";
        default: return "scalar";
    }
}

}  // namespace fusebridge
