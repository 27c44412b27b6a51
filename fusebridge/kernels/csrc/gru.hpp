// The fused GRU primitive: input projection (every word, both directions) plus the recurrence
// over time-major batches sorted by length, so step t works on exactly the sentences still
// active and never on padding. Created once per descriptor (sentence lengths, sizes,
// attributes); execution only runs the plan creation made.
//
// Batch invariance: every output element is one fixed sequence of operations on its own
// sentence's data, whatever the other sentences, their number, the tiles or the threads. So
// the projection is not a BLAS call: OpenBLAS's per-row arithmetic depends on the row's place
// in its call (its Haswell kernel sums rows 0-5 and 6-11 of each 12 differently, and the rows
// past the last whole tile differently again), so a word's bits would depend on its
// neighbours. Our packed-weight tiles compute each row alike (docs/gru.md).
#pragma once
#include <cstdint>
#include <vector>

#include "gru_kernels.hpp"

namespace fusebridge {

enum class SeqLayout : int { lod = 0, tnc = 1, ntc = 2 };

struct GruDesc {
    std::vector<int64_t> lens;  // words per sentence, in the input's order
    SeqLayout layout;
    int64_t steps;              // T of a padded layout (>= every length); unused for lod
    int64_t ic, oc;
    int directions;             // 1 (forward or reverse) or 2 (bidirectional)
    bool reverse;               // the single direction runs back to front
    bool linear_before_reset, origin_mode;
    GruAct act, gate;
    Isa isa;
};

// Packed weights (see GRUWeights in gru_weights.py): wx [D, OCp/16 blocks, IC, 3, 16];
// wh [D, OCp/16 blocks, OC, 3, 16]; bx [D, 3, OCp]; bhc [D, OCp].
struct GruWeightsView {
    const float *wx, *wh, *bx, *bhc;
};

// w [D, K, 3*OC] (canonical gate order) into the blocked layout [D, OCp/16, K, 3, 16] above.
void pack_gru_blocks(const float* w, int64_t directions, int64_t k, int64_t oc, float* out);

class GruPrimitive {
   public:
    explicit GruPrimitive(const GruDesc& desc);

    // out: the input's layout with D*OC columns, padding zeroed. h0 [D, N, OC] or null (zeros);
    // last [D, N, OC] or null.
    void forward(const float* x, const GruWeightsView& w, const float* h0, float* out,
                 float* last) const;

    int64_t x_rows() const { return x_rows_; }  // rows of x (and of out)
    int64_t sentences() const { return n_; }
    int64_t ic() const { return d_.ic; }
    int64_t oc() const { return d_.oc; }
    int64_t directions() const { return d_.directions; }

   private:
    int64_t row_of(int64_t s, int64_t w) const { return base_[s] + w * step_; }
    int threads_for_recurrence(int64_t directions) const;
    // gproj row gbase_[s] + t = x row of word t of sentence s @ Wx, both directions side by side.
    void project(const float* const* xrow, const float* wx, float* gproj) const;

    const GruKernels& k_;
    GruDesc d_;
    int64_t n_, words_ = 0, x_rows_ = 0, ocp_, blocks_, max_len_ = 0;
    // Input/output row of word w of sentence s = base_[s] + w * step_ (in x and out alike).
    std::vector<int64_t> base_;
    int64_t step_ = 1;
    std::vector<int64_t> gbase_;    // row of sentence s's first word in the projected input
    std::vector<int64_t> order_;    // sentences by length, longest first (stable)
    std::vector<int64_t> active_;   // active_[t]: sentences with more than t words
    std::vector<int64_t> first_;    // first_[t]: sum of active_ before t
};

}  // namespace fusebridge
