#include "dropout.hpp"

#include <algorithm>
#include <cstring>

#include "bits.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "parallel.hpp"
#include "philox.hpp"
#include "runtime.hpp"

namespace fusebridge {

namespace {

// Elements per work item: a multiple of 64 so that items own whole mask bytes, small enough
// that an item's bits stay in L1 between generation and application.
constexpr int64_t kChunk = 8192;

int64_t dtype_size(DType t) { return t == DType::f64 ? 8 : t == DType::f32 ? 4 : 2; }

// Drops unit dimensions and merges neighbours that are contiguous in the target index space.
std::vector<Dim> merge_dims(const std::vector<Dim>& dims) {
    std::vector<Dim> out;
    for (const Dim& d : dims) {
        if (d.len == 1) continue;
        if (!out.empty() && out.back().stride == d.len * d.stride)
            out.back() = Dim{out.back().len * d.len, d.stride};
        else
            out.push_back(d);
    }
    return out;
}

// Start, in the target index space, of row `row` of a row-major walk over `outer`.
int64_t row_start(const std::vector<Dim>& outer, int64_t row, int64_t base) {
    for (auto d = outer.rbegin(); d != outer.rend(); ++d) {
        base += (row % d->len) * d->stride;
        row /= d->len;
    }
    return base;
}

}  // namespace

DropoutPrimitive::DropoutPrimitive(const DropoutDesc& desc)
    : k_(dropout_kernels_for(desc.isa)), dtype_(desc.dtype), itemsize_(dtype_size(desc.dtype)) {
    const char* op = "dropout";
    const size_t nd = desc.shape.size();
    if (desc.global_shape.size() != nd || desc.start.size() != nd || desc.mask_shape.size() != nd)
        fail(op, "shape, global_shape, start and mask_shape differ in rank");
    std::vector<int64_t> local_mask(nd);
    for (size_t d = 0; d < nd; ++d) {
        const int64_t n = desc.shape[d], g = desc.global_shape[d], m = desc.mask_shape[d];
        // start > g - n, not start + n > g: the sum could wrap.
        if (n < 0 || desc.start[d] < 0 || g < n || desc.start[d] > g - n || (m != g && m != 1))
            fail(op, "inconsistent shard or mask geometry on axis " + std::to_string(d));
        local_mask[d] = (m == 1) ? 1 : n;
    }
    // Element indices are int64 (and the Philox counter's 64 bits): the whole tensor's mask
    // shape must be numbered without overflow, the local data measured in bytes too.
    numel_of(desc.global_shape, op, "the whole tensor");
    numel_of(desc.mask_shape, op, "the whole mask");
    numel_ = numel_of(desc.shape, op, "the data");
    mask_numel_ = numel_of(local_mask, op, "the mask");
    mul_size(numel_, itemsize_, op, "the data's bytes");

    const float p = desc.p;
    if (!(p >= 0.0f && p <= 1.0f)) fail(op, "p must lie in [0, 1]");
    const bool upscale = desc.mode == DropoutMode::upscale_in_train;
    if (!desc.training) {
        keep_ = Keep::all;
        scale_ = upscale ? 1.0 : 1.0 - double(p);
    } else if (p == 0.0f) {
        keep_ = Keep::all;
    } else if (p == 1.0f) {
        keep_ = Keep::none;
    } else {
        threshold_ = keep_threshold(p);
        scale_ = upscale ? 1.0 / (1.0 - double(p)) : 1.0;
    }
    if (dtype_ != DType::f64) scale_ = double(float(scale_));
    stream_ = numel_ * itemsize_ >= desc.stream_min_bytes;

    // Generation geometry: local mask coordinates -> global mask index.
    std::vector<Dim> gen;
    int64_t gstride = 1;
    std::vector<int64_t> gstrides(nd);
    for (size_t d = nd; d-- > 0;) gstrides[d] = gstride, gstride *= desc.mask_shape[d];
    for (size_t d = 0; d < nd; ++d) {
        if (desc.mask_shape[d] == 1) continue;  // shared: every block reads index 0 there
        gbase_ += desc.start[d] * gstrides[d];
        gen.push_back(Dim{local_mask[d], gstrides[d]});
    }
    gen_outer_ = merge_dims(gen);
    if (!gen_outer_.empty() && gen_outer_.back().stride == 1) {
        run_ = gen_outer_.back().len;
        gen_outer_.pop_back();
    }

    // Application geometry: data coordinates -> local mask bit.
    std::vector<Dim> app;
    int64_t lstride = 1;
    std::vector<int64_t> lstrides(nd);
    for (size_t d = nd; d-- > 0;) lstrides[d] = lstride, lstride *= local_mask[d];
    for (size_t d = 0; d < nd; ++d) {
        direct_ = direct_ && local_mask[d] == desc.shape[d];
        app.push_back(Dim{desc.shape[d], local_mask[d] == 1 ? 0 : lstrides[d]});
    }
    app_outer_ = merge_dims(app);
    if (!app_outer_.empty() && app_outer_.back().stride <= 1) {
        arun_ = app_outer_.back().len;
        arun_step_ = app_outer_.back().stride;
        app_outer_.pop_back();
    }
}

void DropoutPrimitive::fill_words(uint64_t seed, uint64_t offset, uint64_t group0, int64_t nwords,
                                  uint64_t* out, const char* data) const {
    if (keep_ == Keep::some)
        return k_.keep_bits(seed, offset, threshold_, group0, nwords, out, data, 64 * itemsize_);
    std::fill(out, out + nwords, keep_ == Keep::all ? ~uint64_t(0) : uint64_t(0));
}

void DropoutPrimitive::apply_run(const void* x, void* y, int64_t n, const uint8_t* bits,
                                 int64_t pos) const {
    const bool stream = stream_ && x != y;
    switch (dtype_) {
        case DType::f32:
            return k_.apply_f32(static_cast<const float*>(x), static_cast<float*>(y), n, bits, pos,
                                float(scale_), stream);
        case DType::f64:
            return k_.apply_f64(static_cast<const double*>(x), static_cast<double*>(y), n, bits,
                                pos, scale_, stream);
        case DType::f16:
            return k_.apply_f16(static_cast<const half_bits*>(x), static_cast<half_bits*>(y), n,
                                bits, pos, float(scale_), stream);
        case DType::bf16:
            return k_.apply_bf16(static_cast<const half_bits*>(x), static_cast<half_bits*>(y), n,
                                 bits, pos, float(scale_), stream);
    }
}

// Work items cover [a, a + kChunk) of the local mask; each walks the generation rows inside
// it, produces their bits into an L1 scratch, and hands them to the mask and (direct case) to
// the data. Items own disjoint whole bytes of the mask, so no two threads touch one byte.
void DropoutPrimitive::generate(const void* x, void* y, uint8_t* mask, uint64_t seed,
                                uint64_t offset, bool apply) const {
    const int64_t items = (mask_numel_ + kChunk - 1) / kChunk;
    const auto* xb = static_cast<const char*>(x);
    auto* yb = static_cast<char*>(y);
    parallel_ranges(items, max_threads(), [&](int64_t lo, int64_t hi, int) {
        for (int64_t item = lo; item < hi; ++item) {
            uint64_t scratch[kChunk / 64 + 2];
            const int64_t end = std::min(mask_numel_, (item + 1) * kChunk);
            for (int64_t pos = item * kChunk; pos < end;) {
                const int64_t row = pos / run_, col = pos % run_;
                const int64_t len = std::min(run_ - col, end - pos);
                const uint64_t first = uint64_t(row_start(gen_outer_, row, gbase_) + col);
                const uint64_t group0 = first & ~uint64_t(3);
                const int64_t shift = int64_t(first - group0);
                const char* data = apply ? xb + (pos - shift) * itemsize_ : nullptr;
                fill_words(seed, offset, group0, (shift + len + 63) / 64, scratch, data);
                if (mask) copy_bits(scratch, shift, mask, pos, len);
                if (apply)
                    apply_run(xb + pos * itemsize_, yb + pos * itemsize_, len,
                              reinterpret_cast<const uint8_t*>(scratch), shift);
                pos += len;
            }
        }
    });
}

int64_t DropoutPrimitive::range_bits(uint64_t seed, uint64_t offset, int64_t pos, int64_t n,
                                     uint64_t* words, uint8_t* mask) const {
    if (!direct_) throw std::logic_error("dropout: range_bits needs an unshared mask");
    if (n > kRangeMax) throw std::logic_error("dropout: range_bits asked for too many bits");
    // The range's global indices are contiguous within a generation row; a shard can make it
    // cross rows, whose bits are then gathered at bit 0.
    const bool one_row = pos % run_ + n <= run_;
    uint64_t scratch[kRangeWords];
    uint64_t* dst = one_row ? words : scratch;
    for (int64_t at = pos, end = pos + n; at < end;) {
        const int64_t row = at / run_, col = at % run_;
        const int64_t len = std::min(run_ - col, end - at);
        const uint64_t first = uint64_t(row_start(gen_outer_, row, gbase_) + col);
        const uint64_t group0 = first & ~uint64_t(3);
        const int64_t shift = int64_t(first - group0);
        fill_words(seed, offset, group0, (shift + len + 63) / 64, dst, nullptr);
        if (mask) or_bits_shared(dst, shift, mask, at, len);
        if (one_row) return shift;
        copy_bits(dst, shift, reinterpret_cast<uint8_t*>(words), at - pos, len);
        at += len;
    }
    return 0;
}

void DropoutPrimitive::forward_range(const void* x, void* y, int64_t pos, int64_t n,
                                     uint8_t* mask, uint64_t seed, uint64_t offset) const {
    uint64_t words[kRangeWords];
    const auto* xb = static_cast<const char*>(x);
    auto* yb = static_cast<char*>(y);
    for (const int64_t end = pos + n; pos < end;) {
        const int64_t len = std::min(end - pos, kRangeMax);
        const int64_t shift = range_bits(seed, offset, pos, len, words, mask);
        apply_run(xb, yb, len, reinterpret_cast<const uint8_t*>(words), shift);
        xb += len * itemsize_, yb += len * itemsize_, pos += len;
    }
}

void DropoutPrimitive::apply_mask_range(const void* x, void* y, int64_t pos, int64_t n,
                                        const uint8_t* mask) const {
    if (!direct_) throw std::logic_error("dropout: apply_mask_range needs an unshared mask");
    apply_run(x, y, n, mask, pos);
}

void DropoutPrimitive::forward(const void* x, void* y, uint8_t* mask, uint64_t seed,
                               uint64_t offset) const {
    if (numel_ == 0) {  // no data, but a shared mask shape may still have elements
        if (mask) generate(nullptr, nullptr, mask, seed, offset, false);
        return;
    }
    if (direct_ || !x) return generate(x, y, mask, seed, offset, x != nullptr);
    std::vector<uint8_t> own;
    if (!mask) own.assign(size_t(mask_bytes()), 0), mask = own.data();
    generate(nullptr, nullptr, mask, seed, offset, false);
    apply_mask(x, y, mask);
}

void DropoutPrimitive::apply_mask(const void* x, void* y, const uint8_t* mask) const {
    if (numel_ == 0) return;
    // A shared mask bit covers a whole row; such rows read this all-ones buffer instead.
    static const std::vector<uint8_t> ones(kChunk / 8 + 8, 0xFF);
    const int64_t items = (numel_ + kChunk - 1) / kChunk;
    const auto* xb = static_cast<const char*>(x);
    auto* yb = static_cast<char*>(y);
    parallel_ranges(items, max_threads(), [&](int64_t lo, int64_t hi, int) {
        for (int64_t item = lo; item < hi; ++item) {
            const int64_t end = std::min(numel_, (item + 1) * kChunk);
            for (int64_t pos = item * kChunk; pos < end;) {
                const int64_t row = pos / arun_, col = pos % arun_;
                const int64_t len = std::min(arun_ - col, end - pos);
                const int64_t bit = row_start(app_outer_, row, 0) + col * arun_step_;
                const char* xi = xb + pos * itemsize_;
                char* yi = yb + pos * itemsize_;
                if (arun_step_ == 1) {
                    apply_run(xi, yi, len, mask, bit);
                } else if ((mask[bit >> 3] >> (bit & 7)) & 1u) {
                    apply_run(xi, yi, len, ones.data(), 0);
                } else {
                    std::memset(yi, 0, size_t(len * itemsize_));
                }
                pos += len;
            }
        }
    });
}

}  // namespace fusebridge
