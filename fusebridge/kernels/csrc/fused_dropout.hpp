// Dropout fused into the op that makes its input: softmax (one pass per block of rows) and
// matmul (BLAS per output tile, the dropout applied while the tile is in cache). Both are
// bit-identical to the plain op followed by the standalone dropout: the plain op is the same
// primitive with p = 0, and the dropout is the standalone's own code over ranges of the output.
#pragma once
#include <cstdint>
#include <vector>

#include "dropout.hpp"
#include "fused_kernels.hpp"

namespace fusebridge {

// The dropout of a fused op's output: float32, its mask the whole output's (never shared).
#define FUSEBRIDGE_OUTPUT_DROPOUT_FIELDS(F)                                                    \
    F(std::vector<int64_t>, global_shape)  /* the whole output (== the output unsharded) */     \
    F(std::vector<int64_t>, start)         /* where this output starts in it */                 \
    F(float, p)                                                                                \
    F(DropoutMode, mode)                                                                       \
    F(bool, training)                                                                          \
    F(Isa, isa)                                                                                \
    F(int64_t, stream_min_bytes)

#define FUSEBRIDGE_SOFTMAX_DROPOUT_DESC(F)                                                     \
    F(std::vector<int64_t>, shape)                                                             \
    F(int64_t, axis)  /* in [0, rank) */                                                       \
    FUSEBRIDGE_OUTPUT_DROPOUT_FIELDS(F)

struct SoftmaxDropoutDesc {
    FUSEBRIDGE_DESCRIPTOR(SoftmaxDropoutDesc, FUSEBRIDGE_SOFTMAX_DROPOUT_DESC)
};

class SoftmaxDropoutPrimitive {
   public:
    explicit SoftmaxDropoutPrimitive(const SoftmaxDropoutDesc& desc);

    // y = dropout(softmax(x)); the local packed mask goes to `mask` (zeroed) when not null.
    // x and y may alias exactly.
    void forward(const float* x, float* y, uint8_t* mask, uint64_t seed, uint64_t offset) const;
    // dx for dy = d(loss)/dy. `src` is softmax(x) (the probabilities) or, with from_x, x itself
    // and the probabilities are recomputed with forward's arithmetic. The keep bits come from
    // `mask`, or from (seed, offset) when it is null. dx may alias dy exactly.
    void backward(const float* dy, const float* src, bool from_x, const uint8_t* mask,
                  uint64_t seed, uint64_t offset, float* dx) const;

    int64_t numel() const { return drop_.numel(); }
    int64_t mask_bytes() const { return drop_.mask_bytes(); }

   private:
    void exp_rows(const float* x, int64_t rows, float* e, float* inv) const;
    void probs_rows(const float* x, int64_t rows, float* p) const;
    void probs_cols(const float* x, int64_t width, float* p, float* m, float* s) const;

    const FusedKernels& k_;
    DropoutPrimitive drop_;
    int64_t outer_ = 1, len_ = 1, inner_ = 1;  // x viewed as [outer, len, inner], axis = len
    int64_t block_rows_ = 1;                   // last axis: rows per work item
    int64_t block_cols_ = 1;                   // other axes: columns per work item
};

// op(a) [..., m, k] @ op(b) [..., k, n] with np.matmul's batch broadcasting.
#define FUSEBRIDGE_MATMUL_DROPOUT_DESC(F)                                                      \
    F(std::vector<int64_t>, a_shape)                                                           \
    F(std::vector<int64_t>, b_shape)                                                           \
    F(bool, transpose_a)                                                                       \
    F(bool, transpose_b)                                                                       \
    F(bool, bias)                                                                              \
    FUSEBRIDGE_OUTPUT_DROPOUT_FIELDS(F)

struct MatmulDropoutDesc {
    FUSEBRIDGE_DESCRIPTOR(MatmulDropoutDesc, FUSEBRIDGE_MATMUL_DROPOUT_DESC)
};

class MatmulDropoutPrimitive {
   public:
    // The batch offsets from the descriptor's shapes (np.matmul's broadcasting).
    explicit MatmulDropoutPrimitive(const MatmulDropoutDesc& desc);
    // a_offsets, b_offsets: per output batch, the element offset of its matrix in a and in b
    // (none for an empty output); checked to lie inside a and b.
    MatmulDropoutPrimitive(const MatmulDropoutDesc& desc, std::vector<int64_t> a_offsets,
                           std::vector<int64_t> b_offsets);

    // y = dropout(op(a) @ op(b) (+ bias)); bias (n floats) may be null. The local packed mask
    // goes to `mask` (zeroed) when not null. y must not overlap the inputs.
    void forward(const float* a, const float* b, const float* bias, float* y, uint8_t* mask,
                 uint64_t seed, uint64_t offset) const;

    int64_t numel() const { return drop_.numel(); }
    int64_t mask_bytes() const { return drop_.mask_bytes(); }
    int64_t a_size() const { return a_size_; }
    int64_t b_size() const { return b_size_; }
    int64_t bias_size() const { return bias_ ? n_ : 0; }
    int64_t tile_rows() const { return tile_rows_; }
    int64_t tile_cols() const { return tile_cols_; }

   private:
    struct Tile {
        int64_t batch, count, row, col;  // `count` whole matrices from `batch`, or one tile
    };
    std::vector<Tile> tiles(int threads) const;
    void run_tile(const Tile& t, const float* a, const float* b, const float* bias, float* y,
                  uint8_t* mask, uint64_t seed, uint64_t offset) const;

    const FusedKernels& k_;
    DropoutPrimitive drop_;
    int64_t m_, n_, k_dim_, batches_;
    bool trans_a_, trans_b_, bias_;
    std::vector<int64_t> a_off_, b_off_;
    int64_t a_size_, b_size_;
    int64_t tile_rows_, tile_cols_;
};

}  // namespace fusebridge
