// The instruction sets the kernels are built for, and which of them this CPU runs. Every kernel
// family has one table per ISA; dispatch.hpp picks a family's table for an Isa.
#pragma once

namespace fusebridge {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

Isa best_isa();  // what this CPU (and OS) can run
const char* isa_name(Isa isa);

}  // namespace fusebridge
