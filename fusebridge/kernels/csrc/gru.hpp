// The fused GRU primitive: input projection (every word, both directions) plus the recurrence
// over time-major batches sorted by length, so step t works on exactly the sentences still
// active and never on padding. Created once per descriptor (layout, sizes, attributes); the
// sentence lengths are data of each call: plan() lays out the batch per call, in storage the
// calling thread keeps, and forward() runs it.
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

#include "descriptor.hpp"
#include "gru_kernels.hpp"

namespace fusebridge {

enum class SeqLayout : int { lod = 0, tnc = 1, ntc = 2 };

// What a GRU primitive is built from (the lengths are not: they are arguments of each call).
#define FUSEBRIDGE_GRU_DESC(F)                                                                  \
    F(SeqLayout, layout)                                                                        \
    F(int64_t, ic)          /* columns of x: IC, or D * 3 * OC without projection */            \
    F(int64_t, oc)                                                                              \
    F(int64_t, directions)  /* 1 (forward or reverse) or 2 (bidirectional) */                   \
    F(bool, reverse)        /* the single direction runs back to front */                       \
    F(bool, linear_before_reset)                                                                \
    F(bool, origin_mode)                                                                        \
    F(GruAct, act)                                                                              \
    F(GruAct, gate)                                                                             \
    F(bool, projection)     /* x @ Wx first; false: x already holds the gates [u | r | c] */    \
    F(Isa, isa)

struct GruDesc {
    FUSEBRIDGE_DESCRIPTOR(GruDesc, FUSEBRIDGE_GRU_DESC)
};

// Packed weights (see GRUWeights in gru_weights.py): wx [D, OCp/16 blocks, IC, 3, 16];
// wh [D, OCp/16 blocks, OC, 3, 16]; bx [D, 3, OCp]; bhc [D, OCp].
struct GruWeightsView {
    const float *wx, *wh, *bx, *bhc;
};

// Elements of each packed array for D directions, input size IC (0: no projection) and hidden
// size OC; checked (directions 1 or 2, sizes below 2**31, products within int64).
struct GruPackedSizes {
    int64_t wx, wh, bx, bhc;
};
GruPackedSizes gru_packed_sizes(int64_t directions, int64_t ic, int64_t oc);

// Biases into bx [D, 3, OCp] (update and reset with their recurrent bias added) and bhc [D, OCp]
// (the recurrent candidate bias); null bias or bias_h: zeros. Shared with the quantized packer.
void pack_gru_bias(int64_t directions, int64_t oc, const float* bias, const float* bias_h,
                   float* out_bx, float* out_bhc);

// The one writer of the packed layout (fusebridge.kernels.pack_gru_weights and the framework
// glues call it): canonical weights, gate order update, reset, candidate, wx [D, IC, 3*OC]
// (null without projection), wh [D, OC, 3*OC], bias and bias_h [D, 3*OC] (null: zeros), into
// the four arrays of gru_packed_sizes (out_wx unused without projection).
void pack_gru_weights(int64_t directions, int64_t ic, int64_t oc, const float* wx,
                      const float* wh, const float* bias, const float* bias_h, float* out_wx,
                      float* out_wh, float* out_bx, float* out_bhc);

// Of a step's `active` sentences (longest first, positions 0..active-1), class c of `classes`
// holds the positions i with i % classes == c, stored together: class_rows of them from
// class_offset. A sentence keeps its class from step to step, so the thread that owns a class
// reads only the states it wrote (the float and the quantized GRU's owners alike).
inline int64_t class_rows(int64_t active, int64_t c, int64_t classes) {
    return active > c ? (active - c - 1) / classes + 1 : 0;
}
inline int64_t class_offset(int64_t active, int64_t c, int64_t classes) {
    int64_t offset = 0;
    for (int64_t j = 0; j < c; ++j) offset += class_rows(active, j, classes);
    return offset;
}

// The batch plan of one call: where each word's rows lie and which sentences each step works
// on. Its vectors keep their capacity from call to call, so a thread that plans again
// allocates only when a batch outgrows every earlier one.
class GruPlan {
   public:
    int64_t sentences() const { return n_; }
    int64_t words() const { return words_; }
    int64_t x_rows() const { return x_rows_; }  // rows of x (and of out)
    // out's padding rows (padded layouts) zeroed; out has `cols` columns.
    void zero_padding(int64_t cols, float* out) const;
    // last [D, N, OC]: each sentence's final state per direction from out (D*OC columns), h0's
    // (or zeros) for an empty sentence; `reverse`: the single direction runs back to front.
    void last_states(int64_t directions, int64_t oc, bool reverse, const float* out,
                     const float* h0, float* last) const;

   private:
    friend class GruPrimitive;
    friend class QGruPrimitive;
    // Checks the lengths (each in [0, steps] for a padded layout; their sum and the buffers'
    // sizes within int64) and lays the batch out.
    void build(const GruDesc& d, const int64_t* lens, int64_t n, int64_t steps);
    int64_t row_of(int64_t s, int64_t w) const { return base_[s] + w * step_; }

    int64_t n_ = 0, steps_ = 0, words_ = 0, x_rows_ = 0, max_len_ = 0;
    std::vector<int64_t> lens_;     // words per sentence, in the input's order
    // Input/output row of word w of sentence s = base_[s] + w * step_ (in x and out alike).
    std::vector<int64_t> base_;
    int64_t step_ = 1;
    std::vector<int64_t> gbase_;    // row of sentence s's first word in the projected input
    std::vector<int64_t> order_;    // sentences by length, longest first (stable)
    std::vector<int64_t> active_;   // active_[t]: sentences with more than t words
    std::vector<int64_t> first_;    // first_[t]: sum of active_ before t
    std::vector<int64_t> slot_;     // counting sort's next slot per length
};

class GruPrimitive {
   public:
    explicit GruPrimitive(const GruDesc& desc);

    // The plan of a batch of n sentences of lens[s] words (padded layouts: steps T >= every
    // length; lod: steps unused), built into the calling thread's own plan, which stays valid
    // until that thread plans again (primitives are shared by threads through the cache, so
    // the plan cannot live in them).
    const GruPlan& plan(const int64_t* lens, int64_t n, int64_t steps) const;

    // out: the input's layout with D*OC columns, padding zeroed. h0 [D, N, OC] or null (zeros);
    // last [D, N, OC] or null. Without projection w.wx is unused.
    void forward(const GruPlan& p, const float* x, const GruWeightsView& w, const float* h0,
                 float* out, float* last) const;

    const GruDesc& desc() const { return d_; }
    int64_t ocp() const { return ocp_; }  // OC rounded up to kGruBlock

   private:
    // Threads that each own (direction, sentence class) units of the recurrence: threads > 1
    // when the batch has classes of kMinClassRows sentences and the call enough work to hand
    // out; else {1, 1} (the split by hidden units, every step's parts done before the next).
    struct Owners {
        int threads;
        int64_t classes;
    };
    Owners owners(const GruPlan& p) const;
    // The first step of the owners' tail that runs split by hidden units (max_len: none).
    int64_t tail_step(const GruPlan& p, int64_t classes) const;
    double wh_bytes() const;  // one direction's packed Wh
    int threads_for_recurrence(const GruPlan& p, int64_t directions) const;
    // gproj row gbase_[s] + t = x row of word t of sentence s @ Wx, both directions side by side.
    void project(const GruPlan& p, const float* const* xrow, const float* wx, float* gproj) const;

    const GruKernels& k_;
    GruDesc d_;
    int64_t ocp_, blocks_;
};

}  // namespace fusebridge
