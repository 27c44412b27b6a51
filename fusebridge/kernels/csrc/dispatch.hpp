// Run-time dispatch: each kernel family's table for an instruction set. Each ISA's table is
// compiled from its own file with that ISA's flags only (CMakeLists.txt); these functions are
// compiled without them, so calling one never runs an instruction the CPU lacks.
#pragma once

#include "crf_kernels.hpp"
#include "dropout_kernels.hpp"
#include "fused_kernels.hpp"
#include "gru_kernels.hpp"
#include "isa.hpp"

namespace fusebridge {

const DropoutKernels& dropout_kernels_for(Isa isa);
const GruKernels& gru_kernels_for(Isa isa);
const FusedKernels& fused_kernels_for(Isa isa);
const CrfKernels& crf_kernels_for(Isa isa);

}  // namespace fusebridge
