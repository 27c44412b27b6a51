#include "dispatch.hpp"

namespace fusebridge {

// One template for the families: a family's tables are its three accessors.
template <class Kernels>
static const Kernels& pick(Isa isa, const Kernels& (*scalar)(), const Kernels& (*avx2)(),
                           const Kernels& (*avx512)()) {
    switch (isa) {
        case Isa::avx512: return avx512();
        case Isa::avx2: return avx2();
        default: return scalar();
    }
}

const DropoutKernels& dropout_kernels_for(Isa isa) {
    return pick(isa, kernels_scalar, kernels_avx2, kernels_avx512);
}

const GruKernels& gru_kernels_for(Isa isa) {
    return pick(isa, gru_kernels_scalar, gru_kernels_avx2, gru_kernels_avx512);
}

const FusedKernels& fused_kernels_for(Isa isa) {
    return pick(isa, fused_kernels_scalar, fused_kernels_avx2, fused_kernels_avx512);
}

const CrfKernels& crf_kernels_for(Isa isa) {
    return pick(isa, crf_kernels_scalar, crf_kernels_avx2, crf_kernels_avx512);
}

}  // namespace fusebridge
