// The dropout primitive: created once from an immutable descriptor, executed many times with
// runtime arguments (buffers, seed, offset). Creation derives everything the loops need.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "descriptor.hpp"
#include "dropout_kernels.hpp"
#include "isa.hpp"

namespace fusebridge {

enum class DropoutMode : int { upscale_in_train = 0, downgrade_in_infer = 1 };

// What a dropout primitive is built from; seed and offset are arguments of each call.
#define FUSEBRIDGE_DROPOUT_DESC(F)                                                             \
    F(std::vector<int64_t>, shape)         /* the local data (the block passed in) */           \
    F(std::vector<int64_t>, global_shape)  /* the whole tensor (== shape without sharding) */   \
    F(std::vector<int64_t>, start)         /* where the block starts in the whole tensor */     \
    F(std::vector<int64_t>, mask_shape)    /* mask shape of the whole tensor (1 on shared axes) */ \
    F(DType, dtype)                                                                            \
    F(float, p)                                                                                \
    F(DropoutMode, mode)                                                                       \
    F(bool, training)                                                                          \
    F(Isa, isa)                                                                                \
    F(int64_t, stream_min_bytes)  /* outputs at least this large use non-temporal stores */

struct DropoutDesc {
    FUSEBRIDGE_DESCRIPTOR(DropoutDesc, FUSEBRIDGE_DROPOUT_DESC)
};

// One dimension after merging: `len` elements, `stride` in the index space it maps into.
struct Dim {
    int64_t len, stride;
};

class DropoutPrimitive {
   public:
    explicit DropoutPrimitive(const DropoutDesc& desc);

    // y = dropout(x); the local packed mask goes to `mask` when it is not null. x and y may
    // alias exactly. x == y == nullptr generates the mask alone.
    void forward(const void* x, void* y, uint8_t* mask, uint64_t seed, uint64_t offset) const;
    // y = x * the scale where `mask` (local, packed) keeps, 0 elsewhere.
    void apply_mask(const void* x, void* y, const uint8_t* mask) const;

    // For the fused kernels, whose mask shape is the data shape: dropout of the local elements
    // [pos, pos + n), read from x and written to y (pointers to element pos; x may equal y).
    // The bits also go to `mask` when it is not null; it must start zeroed, so that ranges on
    // different threads can share a byte (see or_bits_shared).
    void forward_range(const void* x, void* y, int64_t pos, int64_t n, uint8_t* mask,
                       uint64_t seed, uint64_t offset) const;
    // The same with the bits read from the local packed mask.
    void apply_mask_range(const void* x, void* y, int64_t pos, int64_t n,
                          const uint8_t* mask) const;
    // Keeps everything unscaled: forward is a copy.
    bool identity() const { return keep_ == Keep::all && scale_ == 1.0; }

    int64_t numel() const { return numel_; }
    int64_t itemsize() const { return itemsize_; }  // bytes of one data element
    int64_t mask_numel() const { return mask_numel_; }
    int64_t mask_bytes() const { return mask_numel_ / 8 + (mask_numel_ % 8 != 0); }  // no +7 wrap

   private:
    // The keep bits of local elements [pos, pos + n), n <= kRangeMax: element pos + i is bit
    // shift + i of `words` (kRangeWords long), and the shift is returned. The bits also go to
    // `mask` as in forward_range.
    static constexpr int64_t kRangeMax = 8192;
    static constexpr int64_t kRangeWords = kRangeMax / 64 + 2;
    int64_t range_bits(uint64_t seed, uint64_t offset, int64_t pos, int64_t n, uint64_t* words,
                       uint8_t* mask) const;
    void generate(const void* x, void* y, uint8_t* mask, uint64_t seed, uint64_t offset,
                  bool apply) const;
    void apply_run(const void* x, void* y, int64_t n, const uint8_t* bits, int64_t pos) const;
    void fill_words(uint64_t seed, uint64_t offset, uint64_t group0, int64_t nwords,
                    uint64_t* out, const char* data) const;

    const DropoutKernels& k_;
    DType dtype_;
    int64_t itemsize_;
    int64_t numel_ = 1, mask_numel_ = 1;
    enum class Keep { some, all, none } keep_ = Keep::some;
    uint32_t threshold_ = 0;
    double scale_ = 1.0;
    bool stream_ = false;
    // Generation over the local mask: rows of `run_` elements whose global indices are
    // contiguous; a row's first global index is gbase_ + sum(coord * stride) over gen_outer_.
    int64_t run_ = 1, gbase_ = 0;
    std::vector<Dim> gen_outer_;
    // Application over the data: rows of `arun_` elements reading mask bits with step
    // arun_step_ (1, or 0 where the mask is shared); a row's first bit from app_outer_.
    bool direct_ = true;  // mask shape == data shape: generate and apply in one pass
    int64_t arun_ = 1, arun_step_ = 1;
    std::vector<Dim> app_outer_;
};

}  // namespace fusebridge
