#include "fused_dropout.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include "aligned.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "parallel.hpp"
#include "runtime.hpp"

namespace fusebridge {

namespace {

// Elements of one softmax work item: a block of rows (or of columns over a strided axis) that
// stays in L1 from the first read to the dropout.
constexpr int64_t kSoftmaxBlock = 4096;
// Below this many elements one thread does it all: waking others costs more.
constexpr int64_t kParallelMin = 1 << 15;

// One BLAS call computes a tile of at most this many outputs (1 MiB, half of a 2 MiB L2), so
// the bias and the dropout find it in cache. Tiles halve the wider side, never below 64 rows or
// 256 columns unless forced, since each call packs its panels of a and b again: a row split packs
// b's panel once more, a column split a's, so the split repeats the smaller operand. A square
// tile splits its rows: whole rows give the dropout one contiguous range, and measured at
// [512, 512] x [512, 512] the row halves ran at numpy's speed, the column halves at 0.81-0.94x.
constexpr int64_t kTileElems = 1 << 18;
// A GEMM of at least this many multiply-adds is split into two tiles or more, so two threads
// can share it. Tiles depend on the shapes only, never on the thread count: OpenBLAS's results
// depend on how a product is cut into calls, and ours must not depend on the threads.
constexpr double kSplitFma = 1 << 21;
// Threads get at least this many multiply-adds each (as runtime.cpp's sgemm).
constexpr double kMinFmaPerThread = 1 << 19;
// Whole small matrices are computed by one strided-batch call per group of up to this many
// outputs (OpenBLAS gives each matrix of a strided batch the bits of a plain call).
constexpr int64_t kGroupElems = 1 << 16;

// per_thread floats of scratch for each of `threads` threads (a part's slot picks its slice),
// allocated before the parallel_for: an exception (bad_alloc included) must not escape a part,
// where it would terminate the process. Slices are 64-byte aligned so vector loads never split
// cache lines.
class TeamScratch {
   public:
    TeamScratch(int threads, int64_t per_thread)
        : stride_((per_thread + 15) / 16 * 16),
          buf_(size_t(mul_size(threads, stride_, "softmax_dropout", "scratch"))) {}
    float* of(int thread) { return buf_.data() + thread * stride_; }

   private:
    int64_t stride_;
    AlignedVector<float> buf_;
};

// The team size of a softmax region: fixed before it, since its scratch is sized for it.
int softmax_team(int64_t numel, int64_t items) {
    return numel >= kParallelMin && items > 1 ? max_threads() : 1;
}

// The dropout of a fused op's output of `shape` (descriptor fields of
// FUSEBRIDGE_OUTPUT_DROPOUT_FIELDS): float32, the mask the whole output's.
template <class Desc>
DropoutDesc output_dropout(const Desc& d, std::vector<int64_t> shape) {
    return DropoutDesc{std::move(shape), d.global_shape, d.start, d.global_shape, DType::f32,
                       d.p, d.mode, d.training, d.isa, d.stream_min_bytes};
}

// m, n, k of op(a) @ op(b) and the output shape [broadcast batch..., m, n].
struct MatmulDims {
    int64_t m, n, k;
    std::vector<int64_t> out;
};

MatmulDims matmul_dims(const MatmulDropoutDesc& d) {
    const char* op = "matmul_dropout";
    const std::vector<int64_t>&a = d.a_shape, &b = d.b_shape;
    if (a.size() < 2 || b.size() < 2) fail(op, "a and b must be at least 2-D");
    const size_t ra = a.size() - 2, rb = b.size() - 2, rank = std::max(ra, rb);
    const int64_t m = d.transpose_a ? a[ra + 1] : a[ra], k = d.transpose_a ? a[ra] : a[ra + 1];
    const int64_t kb = d.transpose_b ? b[rb + 1] : b[rb], n = d.transpose_b ? b[rb] : b[rb + 1];
    if (k != kb) fail(op, "op(a) and op(b) do not chain");
    std::vector<int64_t> out(rank + 2);
    for (size_t i = 0; i < rank; ++i) {  // batch dimensions, aligned on the right
        const int64_t x = i + ra >= rank ? a[i + ra - rank] : 1;
        const int64_t y = i + rb >= rank ? b[i + rb - rank] : 1;
        if (x != y && x != 1 && y != 1) fail(op, "the batch dimensions do not broadcast");
        out[i] = x == 1 ? y : x;
    }
    out[rank] = m, out[rank + 1] = n;
    return {m, n, k, out};
}

// Element offset of each output batch's matrix (batch dims `batch`) in an operand of `shape`
// [..., rows, cols], broadcast along the dims where it has 1 or none; none for an empty
// output, whose empty operands may broadcast to any number of batches.
std::vector<int64_t> batch_offsets(const std::vector<int64_t>& shape,
                                   const std::vector<int64_t>& out) {
    const size_t nb = out.size() - 2, own = shape.size() - 2;
    const int64_t count = numel_of(out, "matmul_dropout", "the output") == 0
                              ? 0
                              : numel_of({out.begin(), out.end() - 2}, "matmul_dropout", "batches");
    std::vector<int64_t> offsets(static_cast<size_t>(count));
    const int64_t matrix = shape[own] * shape[own + 1];
    for (int64_t flat = 0; flat < count; ++flat) {
        int64_t rest = flat, offset = 0, stride = matrix;
        for (size_t i = nb; i-- > 0;) {
            const int64_t idx = rest % out[i];
            rest /= out[i];
            if (i + own >= nb) {  // the operand has this axis (aligned on the right)
                const int64_t dim = shape[i + own - nb];
                if (dim != 1) offset += idx * stride;
                stride *= dim;
            }
        }
        offsets[size_t(flat)] = offset;
    }
    return offsets;
}

int threads_for(double work, double per_thread, int64_t items) {
    const double by_work = std::max(1.0, work / per_thread);
    return int(std::min<double>({double(max_threads()), double(std::max<int64_t>(items, 1)),
                                 by_work}));
}

}  // namespace

// ---- softmax ------------------------------------------------------------------------------

SoftmaxDropoutPrimitive::SoftmaxDropoutPrimitive(const SoftmaxDropoutDesc& desc)
    : k_(fused_kernels_for(desc.isa)), drop_(output_dropout(desc, desc.shape)) {
    const int64_t nd = int64_t(desc.shape.size());
    if (desc.axis < 0 || desc.axis >= nd)
        throw std::invalid_argument("softmax_dropout: bad shape or axis");
    for (int64_t d = 0; d < nd; ++d) {
        const int64_t n = desc.shape[size_t(d)];
        if (d < desc.axis) outer_ *= n;
        else if (d == desc.axis) len_ = n;
        else inner_ *= n;
    }
    block_rows_ = std::max<int64_t>(1, kSoftmaxBlock / std::max<int64_t>(len_, 1));
    // Whole vectors, and at least one mask word per dropout run.
    const int64_t cols = kSoftmaxBlock / std::max<int64_t>(len_, 1) / 16 * 16;
    block_cols_ = std::min(inner_, std::max<int64_t>(64, cols));
}

// e = exp(x - max) of `rows` contiguous rows of len_ (rows <= block_rows_), inv = 1 / their
// sums. Phase by phase over the rows, not row by row: the rows' reductions are independent, so
// the core overlaps their latencies instead of waiting out each row's max, then its sum.
void SoftmaxDropoutPrimitive::exp_rows(const float* x, int64_t rows, float* e, float* inv) const {
    for (int64_t r = 0; r < rows; ++r) inv[r] = k_.row_max(x + r * len_, len_);
    for (int64_t r = 0; r < rows; ++r)
        inv[r] = 1.0f / k_.exp_row(x + r * len_, len_, inv[r], e + r * len_);
}

// p = softmax of `rows` contiguous rows (p may be x).
void SoftmaxDropoutPrimitive::probs_rows(const float* x, int64_t rows, float* p) const {
    float inv[kSoftmaxBlock];
    exp_rows(x, rows, p, inv);
    for (int64_t r = 0; r < rows; ++r) k_.scale_row(p + r * len_, len_, inv[r], p + r * len_);
}

// p[l * width + j] = softmax over l of x[l * inner_ + j], j < width; m and s are scratch.
void SoftmaxDropoutPrimitive::probs_cols(const float* x, int64_t width, float* p, float* m,
                                         float* s) const {
    std::fill(m, m + width, -INFINITY);
    std::fill(s, s + width, 0.0f);
    for (int64_t l = 0; l < len_; ++l) k_.max_cols(m, x + l * inner_, width);
    for (int64_t l = 0; l < len_; ++l) k_.exp_cols(x + l * inner_, m, width, p + l * width, s);
    for (int64_t j = 0; j < width; ++j) s[j] = 1.0f / s[j];
    for (int64_t l = 0; l < len_; ++l) k_.scale_cols(p + l * width, s, width, p + l * width);
}

void SoftmaxDropoutPrimitive::forward(const float* x, float* y, uint8_t* mask, uint64_t seed,
                                      uint64_t offset) const {
    const int64_t numel = drop_.numel();
    if (numel == 0) return;
    // Plain softmax (p = 0, no mask wanted): the probabilities go straight to y.
    const bool plain = drop_.identity() && !mask;
    if (inner_ == 1) {
        const int64_t items = (outer_ + block_rows_ - 1) / block_rows_;
        const int nt = softmax_team(numel, items);
        // Normalized in an L1 scratch, then dropped on the way to y: the dropout's own pass,
        // whose non-temporal stores need a whole contiguous block to align once.
        TeamScratch scratch(nt, plain ? 0 : block_rows_ * len_);
        parallel_ranges(items, nt, [&](int64_t lo, int64_t hi, int slot) {
            float* buf = scratch.of(slot);
            for (int64_t item = lo; item < hi; ++item) {
                const int64_t r0 = item * block_rows_;
                const int64_t rows = std::min(block_rows_, outer_ - r0);
                const int64_t pos = r0 * len_;
                if (plain) {
                    probs_rows(x + pos, rows, y + pos);
                } else {
                    probs_rows(x + pos, rows, buf);
                    drop_.forward_range(buf, y + pos, pos, rows * len_, mask, seed, offset);
                }
            }
        });
        return;
    }
    const int64_t per_outer = (inner_ + block_cols_ - 1) / block_cols_;
    const int64_t items = outer_ * per_outer;
    const int nt = softmax_team(numel, items);
    TeamScratch scratch(nt, (len_ + 2) * block_cols_);
    parallel_ranges(items, nt, [&](int64_t lo, int64_t hi, int slot) {
        float* p = scratch.of(slot);
        float* m = p + len_ * block_cols_;
        float* s = m + block_cols_;
        for (int64_t item = lo; item < hi; ++item) {
            const int64_t j0 = (item % per_outer) * block_cols_;
            const int64_t width = std::min(block_cols_, inner_ - j0);
            const int64_t base = (item / per_outer) * len_ * inner_ + j0;
            probs_cols(x + base, width, p, m, s);
            for (int64_t l = 0; l < len_; ++l) {
                const int64_t pos = base + l * inner_;
                if (plain)
                    std::memcpy(y + pos, p + l * width, size_t(width) * sizeof(float));
                else
                    drop_.forward_range(p + l * width, y + pos, pos, width, mask, seed, offset);
            }
        }
    });
}

void SoftmaxDropoutPrimitive::backward(const float* dy, const float* src, bool from_x,
                                       const uint8_t* mask, uint64_t seed, uint64_t offset,
                                       float* dx) const {
    const int64_t numel = drop_.numel();
    if (numel == 0) return;
    // g = the gradient at softmax's output: dy through the dropout's keep bits and scale.
    auto dropped = [&](const float* from, float* to, int64_t pos, int64_t n) {
        if (mask) drop_.apply_mask_range(from, to, pos, n, mask);
        else drop_.forward_range(from, to, pos, n, nullptr, seed, offset);
    };
    if (inner_ == 1) {
        const int64_t items = (outer_ + block_rows_ - 1) / block_rows_;
        const int nt = softmax_team(numel, items);
        const int64_t gsize = (block_rows_ * len_ + 15) / 16 * 16;  // p after g, aligned
        TeamScratch scratch(nt, gsize + (from_x ? len_ : 0));
        parallel_ranges(items, nt, [&](int64_t lo, int64_t hi, int slot) {
            float* g = scratch.of(slot);
            float* p = g + gsize;
            for (int64_t item = lo; item < hi; ++item) {
                const int64_t r0 = item * block_rows_;
                const int64_t rows = std::min(block_rows_, outer_ - r0);
                dropped(dy + r0 * len_, g, r0 * len_, rows * len_);
                for (int64_t r = r0; r < r0 + rows; ++r) {
                    const float* pr = src + r * len_;
                    if (from_x) probs_rows(pr, 1, p), pr = p;
                    const float* gr = g + (r - r0) * len_;
                    k_.grad_row(pr, gr, len_, k_.dot_row(gr, pr, len_), dx + r * len_);
                }
            }
        });
        return;
    }
    const int64_t per_outer = (inner_ + block_cols_ - 1) / block_cols_;
    const int64_t items = outer_ * per_outer;
    const int nt = softmax_team(numel, items);
    const int64_t block = len_ * block_cols_;
    TeamScratch scratch(nt, 2 * block + 2 * block_cols_);
    parallel_ranges(items, nt, [&](int64_t lo, int64_t hi, int slot) {
        float* g = scratch.of(slot);
        float* p = g + block;
        float* m = p + block;
        float* s = m + block_cols_;
        for (int64_t item = lo; item < hi; ++item) {
            const int64_t j0 = (item % per_outer) * block_cols_;
            const int64_t width = std::min(block_cols_, inner_ - j0);
            const int64_t base = (item / per_outer) * len_ * inner_ + j0;
            for (int64_t l = 0; l < len_; ++l)
                dropped(dy + base + l * inner_, g + l * width, base + l * inner_, width);
            // Probability rows: recomputed into p (stride width), or read in place (inner_).
            int64_t pstride = width;
            const float* pl = p;
            if (from_x) probs_cols(src + base, width, p, m, s);
            else pl = src + base, pstride = inner_;
            std::fill(s, s + width, 0.0f);
            for (int64_t l = 0; l < len_; ++l)
                k_.dot_cols(g + l * width, pl + l * pstride, width, s);
            for (int64_t l = 0; l < len_; ++l)
                k_.grad_cols(pl + l * pstride, g + l * width, s, width, dx + base + l * inner_);
        }
    });
}

// ---- matmul -------------------------------------------------------------------------------

MatmulDropoutPrimitive::MatmulDropoutPrimitive(const MatmulDropoutDesc& desc)
    : MatmulDropoutPrimitive(desc, batch_offsets(desc.a_shape, matmul_dims(desc).out),
                             batch_offsets(desc.b_shape, matmul_dims(desc).out)) {}

MatmulDropoutPrimitive::MatmulDropoutPrimitive(const MatmulDropoutDesc& desc,
                                               std::vector<int64_t> a_offsets,
                                               std::vector<int64_t> b_offsets)
    : k_(fused_kernels_for(desc.isa)),
      drop_(output_dropout(desc, matmul_dims(desc).out)),
      batches_(int64_t(a_offsets.size())),
      trans_a_(desc.transpose_a),
      trans_b_(desc.transpose_b),
      bias_(desc.bias),
      a_off_(std::move(a_offsets)),
      b_off_(std::move(b_offsets)),
      a_size_(numel_of(desc.a_shape, "matmul_dropout", "a")),
      b_size_(numel_of(desc.b_shape, "matmul_dropout", "b")) {
    const MatmulDims dims = matmul_dims(desc);
    m_ = dims.m, n_ = dims.n, k_dim_ = dims.k;
    const char* op = "matmul_dropout";
    if (b_off_.size() != a_off_.size() || m_ < 0 || n_ < 0 || k_dim_ < 0 ||
        a_size_ < 0 || b_size_ < 0)
        fail(op, "inconsistent descriptor");
    // First the 32-bit bounds: they keep the matrix products below 2**62.
    if (m_ > INT_MAX || n_ > INT_MAX || k_dim_ > INT_MAX || m_ * k_dim_ > INT_MAX ||
        k_dim_ * n_ > INT_MAX || m_ * n_ > INT_MAX)
        fail(op, "dimensions exceed the 32-bit BLAS interface");
    if (mul_size(batches_, m_ * n_, op, "batches * m * n") != drop_.numel())
        fail(op, "output shape and m, n, batches differ");
    // off > size - extent, not off + extent > size: the sum could wrap.
    for (int64_t i = 0; i < batches_; ++i)
        if (a_off_[size_t(i)] < 0 || a_off_[size_t(i)] > a_size_ - m_ * k_dim_ ||
            b_off_[size_t(i)] < 0 || b_off_[size_t(i)] > b_size_ - k_dim_ * n_)
            fail(op, "batch " + std::to_string(i) + " lies outside a or b");

    // A shared b and an unbroadcast, untransposed a: the batches are the rows of one matrix,
    // and the output's flat index is the same either way. (m * batches <= INT_MAX keeps
    // i * m * k below 2**62.)
    bool fold = !trans_a_ && batches_ > 1 && m_ * batches_ <= INT_MAX;
    for (int64_t i = 1; fold && i < batches_; ++i)
        fold = b_off_[size_t(i)] == b_off_[0] && a_off_[size_t(i)] == a_off_[0] + i * m_ * k_dim_;
    if (fold) {
        m_ *= batches_;
        batches_ = 1;
        a_off_.resize(1);
        b_off_.resize(1);
    }

    auto halve = [](int64_t v) { return ((v + 1) / 2 + 15) / 16 * 16; };
    int64_t r = m_, c = n_;
    for (;;) {
        const int64_t count = batches_ * ((m_ + r - 1) / std::max<int64_t>(r, 1)) *
                              ((n_ + c - 1) / std::max<int64_t>(c, 1));
        const bool split = r * c > kTileElems ||
                           (count < 2 && double(m_) * double(n_) * double(k_dim_) >= kSplitFma);
        if (!split) break;
        if (c > r && c > 256) c = halve(c);
        else if (r > 64) r = halve(r);
        else if (c > 64) c = halve(c);
        else break;
    }
    tile_rows_ = std::max<int64_t>(r, 1);
    tile_cols_ = std::max<int64_t>(c, 1);
}

std::vector<MatmulDropoutPrimitive::Tile> MatmulDropoutPrimitive::tiles(int threads) const {
    std::vector<Tile> out;
    if (tile_rows_ >= m_ && tile_cols_ >= n_) {
        // Whole matrices: consecutive ones with even strides share one strided-batch call.
        // Grouping never changes bits, so it may follow the thread count.
        const int64_t per_group = std::max<int64_t>(
            1, std::min(kGroupElems / std::max<int64_t>(m_ * n_, 1),
                        (batches_ + threads - 1) / threads));
        for (int64_t i = 0; i < batches_;) {
            const size_t at = size_t(i);
            int64_t count = 1;
            if (i + 1 < batches_) {
                const int64_t sa = a_off_[at + 1] - a_off_[at], sb = b_off_[at + 1] - b_off_[at];
                const bool fits = sa >= 0 && sb >= 0 && sa <= INT_MAX && sb <= INT_MAX;
                while (fits && count < per_group && i + count < batches_ &&
                       a_off_[at + size_t(count)] - a_off_[at + size_t(count) - 1] == sa &&
                       b_off_[at + size_t(count)] - b_off_[at + size_t(count) - 1] == sb)
                    ++count;
            }
            out.push_back(Tile{i, count, 0, 0});
            i += count;
        }
        return out;
    }
    // Row tiles innermost: consecutive tiles of one thread reuse b's panel from cache.
    for (int64_t i = 0; i < batches_; ++i)
        for (int64_t c = 0; c < n_; c += tile_cols_)
            for (int64_t r = 0; r < m_; r += tile_rows_) out.push_back(Tile{i, 1, r, c});
    return out;
}

void MatmulDropoutPrimitive::run_tile(const Tile& t, const float* a, const float* b,
                                      const float* bias, float* y, uint8_t* mask, uint64_t seed,
                                      uint64_t offset) const {
    const int64_t rows = std::min(tile_rows_, m_ - t.row), cols = std::min(tile_cols_, n_ - t.col);
    const int64_t K = k_dim_;
    float* c = y + t.batch * m_ * n_ + t.row * n_ + t.col;
    if (K == 0) {
        for (int64_t i = 0; i < t.count; ++i)
            for (int64_t r = 0; r < rows; ++r)
                std::fill_n(c + i * m_ * n_ + r * n_, cols, 0.0f);
    } else {
        const float* ap = a + a_off_[size_t(t.batch)] + (trans_a_ ? t.row : t.row * K);
        const float* bp = b + b_off_[size_t(t.batch)] + (trans_b_ ? t.col * K : t.col);
        const int lda = int(trans_a_ ? m_ : K), ldb = int(trans_b_ ? K : n_);
        const auto ta = trans_a_ ? CblasTrans : CblasNoTrans;
        const auto tb = trans_b_ ? CblasTrans : CblasNoTrans;
        if (t.count == 1) {
            scipy_cblas_sgemm(CblasRowMajor, ta, tb, int(rows), int(cols), int(K), 1.0f, ap, lda,
                              bp, ldb, 0.0f, c, int(n_));
        } else {
            const int64_t sa = a_off_[size_t(t.batch) + 1] - a_off_[size_t(t.batch)];
            const int64_t sb = b_off_[size_t(t.batch) + 1] - b_off_[size_t(t.batch)];
            scipy_cblas_sgemm_batch_strided(CblasRowMajor, ta, tb, int(m_), int(n_), int(K), 1.0f,
                                            ap, lda, int(sa), bp, ldb, int(sb), 0.0f, c, int(n_),
                                            int(m_ * n_), int(t.count));
        }
    }
    if (bias_)
        for (int64_t i = 0; i < t.count; ++i)
            for (int64_t r = 0; r < rows; ++r)
                k_.add_cols(c + i * m_ * n_ + r * n_, bias + t.col, cols);
    if (drop_.identity() && !mask) return;
    const int64_t pos = t.batch * m_ * n_ + t.row * n_ + t.col;
    if (cols == n_)  // whole rows (of whole matrices when count > 1): one contiguous range
        return drop_.forward_range(c, c, pos, t.count * rows * n_, mask, seed, offset);
    for (int64_t r = 0; r < rows; ++r)
        drop_.forward_range(c + r * n_, c + r * n_, pos + r * n_, cols, mask, seed, offset);
}

void MatmulDropoutPrimitive::forward(const float* a, const float* b, const float* bias, float* y,
                                     uint8_t* mask, uint64_t seed, uint64_t offset) const {
    if (drop_.numel() == 0) return;
    const double fma =
        double(batches_) * double(m_) * double(n_) * double(std::max<int64_t>(k_dim_, 1));
    const std::vector<Tile> work = tiles(max_threads());
    const int nt = threads_for(fma, kMinFmaPerThread, int64_t(work.size()));
    // Each tile is one single-threaded OpenBLAS call (its own pool stays at one thread).
    parallel_ranges(int64_t(work.size()), nt, [&](int64_t lo, int64_t hi, int) {
        for (size_t i = size_t(lo); i < size_t(hi); ++i)
            run_tile(work[i], a, b, bias, y, mask, seed, offset);
    });
}

}  // namespace fusebridge
