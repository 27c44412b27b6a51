// The instruction sets the kernels are built for, and which of them this CPU runs. Every kernel
// family has one table per ISA; dispatch.hpp picks a family's table for an Isa.
#pragma once

namespace fusebridge {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

Isa best_isa();  // what this CPU (and OS) can run
const char* isa_name(Isa isa);

// Extensions some kernels use beside an Isa's base (bits of a mask): VNNI is VPDPBUSD
// (AVX512_VNNI for avx512 code, AVX-VNNI for avx2 code), BF16 is VDPBF16PS (AVX512_BF16, avx512
// code only). Kernels without an extension emulate its arithmetic exactly (qgru_simd.hpp).
enum : unsigned { kExtVnni = 1u, kExtBf16 = 2u, kExtAll = 3u };
unsigned cpu_extensions(Isa isa);  // those this CPU runs for code built for `isa`
const char* extension_name(unsigned bit);

}  // namespace fusebridge
