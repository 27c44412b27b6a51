#include "gru.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "aligned.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "parallel.hpp"
#include "runtime.hpp"

namespace fusebridge {

namespace {

// Split by hidden units, a step ends when all its parts are done (microseconds on this VM): a
// thread joins that recurrence only when it gets at least this many multiply-adds per step.
constexpr double kMinFmaPerThread = 16384;
// Split by sentences (and directions), threads never wait for each other within a call: each
// owns classes of at least this many sentences (an AVX2 register tile's rows, half an AVX-512
// one) and the multiply-adds of the whole call make handing it a unit worth it. Preferred
// wherever the batch allows it.
constexpr int64_t kMinClassRows = 4;
constexpr double kMinFmaPerOwner = 1 << 17;
// The packed Wh a thread may stream every step and still find in its own L2 (half of this
// machine's 2 MiB). When both directions together exceed it, they run one after the other,
// each on all threads: a thread then holds a share of one direction's weights, not of both.
constexpr double kWeightBytesPerThread = 1 << 20;
// A projection of the whole batch larger than this (a quarter of L2) is made step by step
// instead, where one thread runs each step of its rows (GruPrimitive::forward).
constexpr double kProjectionBytesUpFront = 1 << 19;
// Past that size, an owner streams its direction's whole Wh each step for however few rows it
// holds: from the step where owners hold at most this many rows each, threads split the steps
// by hidden units instead (each streams its share of Wh). At hidden 512 (3 MB), 4 rows take
// about as long to compute as the whole Wh takes to stream.
constexpr int64_t kTailRowsPerOwner = 4;
// Rows of one projection work item (see project()), and the multiply-adds that make waking a
// thread for the projection (one job, no steps) worth it.
constexpr int64_t kProjectChunk = 64;
constexpr double kMinProjectFmaPerThread = 1 << 19;

// Work memory of one executing thread, kept between calls: primitives are shared by threads
// (they live in a process-wide cache), so scratch cannot live in them, and fresh multi-megabyte
// buffers every call would cost page faults (oneDNN's per-thread scratchpad does the same).
struct Scratch {
    AlignedVector<float> f;  // the projected gates, then u and rh, each from a 64-byte boundary
    std::vector<const float*> in;
    std::vector<float*> out;
};

}  // namespace

GruPrimitive::GruPrimitive(const GruDesc& desc) : k_(gru_kernels_for(desc.isa)), d_(desc) {
    const char* op = "fusion_gru";
    if (d_.ic < 1 || d_.oc < 1 || d_.ic > INT32_MAX || d_.oc > INT32_MAX)
        fail(op, "input and hidden size must lie in [1, 2**31)");
    if (d_.directions != 1 && d_.directions != 2) fail(op, "directions must be 1 or 2");
    if (int(d_.layout) < 0 || int(d_.layout) > 2)
        fail(op, "layout must be 0 (lod), 1 (tnc) or 2 (ntc)");
    if (!d_.projection && d_.ic != 3 * d_.directions * d_.oc)
        fail(op, "without projection x holds the gates: ic must be D * 3 * OC = " +
                     std::to_string(3 * d_.directions * d_.oc) + ", got " +
                     std::to_string(d_.ic));
    ocp_ = (d_.oc + kGruBlock - 1) / kGruBlock * kGruBlock;
    blocks_ = ocp_ / kGruBlock;
}

void GruPlan::build(const GruDesc& d, const int64_t* lens, int64_t n, int64_t steps) {
    const char* op = "fusion_gru";
    const bool padded = d.layout != SeqLayout::lod;
    if (n < 0) fail(op, "the number of sentences must be >= 0, got " + std::to_string(n));
    if (padded && steps < 0) fail(op, "steps must be >= 0, got " + std::to_string(steps));
    words_ = check_lengths(lens, n, padded ? steps : -1, op);
    n_ = n, steps_ = padded ? steps : 0;
    x_rows_ = padded ? mul_size(steps, n, op, "steps * sentences") : words_;
    // Sizes below 2**31 keep the products of one size with the directions and gates far from
    // overflow (module.cpp checks those of two sizes: the weights); the rows times the widest
    // row (x, out, the projected gates) bound the other buffers the binding checks and the
    // scratch forward() allocates, so that product is checked here.
    const int64_t ocp = (d.oc + kGruBlock - 1) / kGruBlock * kGruBlock;
    mul_size(x_rows_, std::max(d.ic, 3 * d.directions * ocp), op, "rows * columns");

    lens_.assign(lens, lens + n);
    max_len_ = 0;
    for (int64_t len : lens_) max_len_ = std::max(max_len_, len);
    gbase_.resize(size_t(n));
    for (int64_t s = 0, row = 0; s < n; row += lens_[s], ++s) gbase_[s] = row;
    base_.resize(size_t(n));
    switch (d.layout) {
        case SeqLayout::lod: std::copy(gbase_.begin(), gbase_.end(), base_.begin()), step_ = 1; break;
        case SeqLayout::tnc:
            for (int64_t s = 0; s < n; ++s) base_[s] = s;
            step_ = n;
            break;
        case SeqLayout::ntc:
            for (int64_t s = 0; s < n; ++s) base_[s] = s * steps;
            step_ = 1;
            break;
    }

    // Counting sort by length, longest first, ties in input order (a stable sort's order,
    // without its temporary buffer): slot_[len] counts the sentences of each length, then
    // active_[t] sums those longer than t, which is where sentences of length t start.
    slot_.assign(size_t(max_len_ + 1), 0);
    for (int64_t len : lens_) ++slot_[len];
    active_.resize(size_t(max_len_));
    for (int64_t t = max_len_ - 1, longer = 0; t >= 0; --t) active_[t] = longer += slot_[t + 1];
    for (int64_t len = 0; len <= max_len_; ++len) slot_[len] = len < max_len_ ? active_[len] : 0;
    order_.resize(size_t(n));
    for (int64_t s = 0; s < n; ++s) order_[slot_[lens_[s]]++] = s;
    first_.resize(size_t(max_len_));
    for (int64_t t = 0, sum = 0; t < max_len_; sum += active_[t], ++t) first_[t] = sum;
}

const GruPlan& GruPrimitive::plan(const int64_t* lens, int64_t n, int64_t steps) const {
    thread_local GruPlan p;
    p.build(d_, lens, n, steps);
    return p;
}

int GruPrimitive::threads_for_recurrence(const GruPlan& p, int64_t directions) const {
    const int avail = max_threads();
    if (avail <= 1 || p.max_len_ == 0) return 1;
    const int64_t tiles = (p.active_[0] + k_.lbr.rows - 1) / k_.lbr.rows;
    const int64_t items = directions * tiles * blocks_;
    const double fma = double(p.active_[0]) * directions * d_.oc * 3.0 * d_.oc;
    const int64_t by_work = std::max<int64_t>(1, int64_t(fma / kMinFmaPerThread));
    return int(std::min<int64_t>({avail, items, by_work}));
}

GruPrimitive::Owners GruPrimitive::owners(const GruPlan& p) const {
    const int avail = max_threads();
    const int64_t D = d_.directions;
    if (avail <= 1 || p.max_len_ == 0) return {1, 1};
    const int64_t classes =
        std::max<int64_t>(1, std::min<int64_t>(avail / D, p.active_[0] / kMinClassRows));
    const int64_t units = D * classes;  // (direction, class) pairs, one owner each
    const double fma = double(p.words_) * D * d_.oc * 3.0 * d_.oc;
    const int64_t by_work = std::max<int64_t>(1, int64_t(fma / kMinFmaPerOwner));
    // Each owner streams its direction's whole Wh every step, past its L2 from hidden ~290 on:
    // at hidden 512 (3 MB) that ran as fast as the split by hidden units on this machine
    // (docs/performance.md, "Measurements behind the code"), and no step of it waits for
    // another thread.
    const int nt = int(std::min<int64_t>({avail, units, by_work}));
    return nt < 2 ? Owners{1, 1} : Owners{nt, classes};
}

double GruPrimitive::wh_bytes() const { return double(ocp_) * d_.oc * 3 * sizeof(float); }

int64_t GruPrimitive::tail_step(const GruPlan& p, int64_t classes) const {
    if (wh_bytes() <= kWeightBytesPerThread) return p.max_len_;
    int64_t t = p.max_len_;
    while (t > 0 && p.active_[t - 1] <= kTailRowsPerOwner * classes) --t;
    return t;
}

void GruPrimitive::forward(const GruPlan& p, const float* x, const GruWeightsView& w,
                           const float* h0, float* out, float* last) const {
    const int64_t D = d_.directions, OC = d_.oc, G3 = 3 * OC, cols = D * OC;
    const int64_t n = p.n_, words = p.words_, max_len = p.max_len_;
    const int64_t* lens = p.lens_.data();
    p.zero_padding(cols, out);

    auto is_reverse = [&](int64_t d) { return D == 2 ? d == 1 : d_.reverse; };
    if (words > 0) {
        Scratch& sc = *[] {
            thread_local Scratch s;
            return &s;
        }();
        // Without projection the gates are x's own rows: nothing to project into.
        // Sizes in whole blocks (ocp_ is one), so that u and rh start on 64-byte boundaries.
        const int64_t gsize =
            d_.projection ? (words * D * G3 + kGruBlock - 1) / kGruBlock * kGruBlock : 0;
        const int64_t usize = D * n * ocp_;
        float* gproj = at_least(sc.f, size_t(gsize + 2 * usize + ocp_));
        float* u = gproj + gsize;
        float* rh = u + usize;
        float* zeros = rh + usize;
        std::fill(zeros, zeros + ocp_, 0.0f);

        // Threads that own sentences never wait for each other; else threads split each step's
        // hidden units (below). Either way every row's arithmetic is the same: same bits.
        const Owners own = owners(p);
        const int64_t classes = own.classes;
        const int64_t tail = own.threads > 1 ? tail_step(p, classes) : 0;
        // Where one thread runs each step of its rows (owners to the last step, or one thread),
        // it projects the rows of the next steps just before them, in step-major order: the
        // gates are then read from L2, where a projection of the whole batch up front (6 MB
        // for 64 sentences of LAC) left them in L3 for every step to wait on (64 sentences,
        // hidden 128: 1.24-1.29x faster, 16: 1.18-1.44x). A small batch keeps the projection
        // up front, on all threads (one sentence: 0.95x so). Same bits: a projected row's
        // arithmetic does not depend on its tile.
        const bool by_step =
            d_.projection &&
            double(words) * double(D * G3) * sizeof(float) > kProjectionBytesUpFront &&
            (own.threads > 1 ? tail == max_len : max_threads() <= 1);

        // Row addresses: every word's input row in projection order, then every (direction,
        // step, active sentence) in step-major order: its state, gates, and (by_step) input.
        const float** xrow = at_least(sc.in, size_t((3 * D + 1) * words));
        const float** hprev = xrow + words;
        const float** grow = hprev + D * words;
        const float** xstep = grow + D * words;
        float** hout = at_least(sc.out, size_t(D * words));
        if (d_.projection && !by_step) {
            for (int64_t s = 0; s < n; ++s)
                for (int64_t t = 0; t < lens[s]; ++t)
                    xrow[p.gbase_[s] + t] = x + p.row_of(s, t) * d_.ic;
            project(p, xrow, w.wx, gproj);
        }
        // Row of the gates of word `word` of sentence s: projected, or x's own (ic = D*G3).
        auto gates = [&](int64_t s, int64_t word) {
            return d_.projection ? gproj + (p.gbase_[s] + word) * D * G3
                                 : x + p.row_of(s, word) * d_.ic;
        };
        for (int64_t d = 0; d < D; ++d) {
            const bool rev = is_reverse(d);
            for (int64_t t = 0; t < max_len; ++t)
                for (int64_t i = 0; i < p.active_[t]; ++i) {
                    const int64_t s = p.order_[i], len = lens[s];
                    const int64_t word = rev ? len - 1 - t : t;
                    const int64_t slot =
                        class_offset(p.active_[t], i % classes, classes) + i / classes;
                    const int64_t q = d * words + p.first_[t] + slot;
                    hout[q] = out + p.row_of(s, word) * cols + d * OC;
                    if (by_step) {
                        xstep[q] = x + p.row_of(s, word) * d_.ic;
                        grow[q] = gproj + q * G3;
                    } else {
                        grow[q] = gates(s, word) + d * G3;
                    }
                    if (t > 0)
                        hprev[q] = out + p.row_of(s, rev ? word + 1 : word - 1) * cols + d * OC;
                    else
                        hprev[q] = h0 ? h0 + (d * n + s) * OC : zeros;
                }
        }

        const int passes = d_.linear_before_reset ? 1 : 2;
        // Step t's rows of sentence class c (c < 0: of every class): how many, the slot of the
        // first, and its scratch row in direction d0.
        struct Span {
            int64_t rows, off, scratch;
        };
        auto span = [&](int64_t d0, int64_t c, int64_t t) -> Span {
            if (c < 0) return {p.active_[t], 0, d0 * n};
            // Scratch rows of the class as at step 0 (its most): owners run steps apart, so
            // per-step offsets would overlap another class's rows of another step.
            return {class_rows(p.active_[t], c, classes), class_offset(p.active_[t], c, classes),
                    d0 * n + class_offset(p.active_[0], c, classes)};
        };
        // Pass `pass` of step t of directions [d0, d0 + nd), class c: part `part` of `parts` (a
        // contiguous range of the pass's items).
        auto pass_part = [&](int64_t d0, int64_t nd, int64_t c, int64_t t, int pass, int64_t part,
                             int64_t parts) {
            const auto [rows, off, scratch] = span(d0, c, t);
            const GruTile<GruStep> tile_fn = d_.linear_before_reset ? k_.lbr
                                             : pass == 0            ? k_.update_reset
                                                                    : k_.candidate;
            const int64_t tr = tile_fn.rows, tiles = (rows + tr - 1) / tr;
            // One active row: two blocks an item (more independent sums), same bits.
            const int64_t nb = rows <= tile_fn.pair_rows ? 2 : 1;
            const int64_t per_dir = tiles * ((blocks_ + nb - 1) / nb);
            const auto [lo, hi] = part_range(nd * per_dir, part, parts);
            // Consecutive items share a weight block, so a thread keeps its blocks hot.
            for (int64_t it = lo; it < hi; ++it) {
                const int64_t d = d0 + it / per_dir, block = it % per_dir / tiles * nb;
                const int64_t tile = it % tiles, q = d * words + p.first_[t] + off;
                const GruStep st{OC,
                                 ocp_,
                                 hprev + q,
                                 hout + q,
                                 grow + q,
                                 w.wh + d * blocks_ * OC * kGruPackStride,
                                 w.bx + d * 3 * ocp_,
                                 w.bhc + d * ocp_,
                                 u + (scratch + (d - d0) * n) * ocp_,
                                 rh + (scratch + (d - d0) * n) * ocp_,
                                 d_.act,
                                 d_.gate,
                                 d_.origin_mode};
                const auto fn = nb == 2 && block + 1 < blocks_ ? tile_fn.pair : tile_fn.fn;
                fn(st, tile * tr, std::min(tr, rows - tile * tr), block);
            }
        };
        // by_step: the gates of steps [ta, tb)'s rows of class c in direction d, into gproj rows
        // q. Each block of Wx serves every row of the steps before the next is read.
        auto project_steps = [&](int64_t d, int64_t c, int64_t ta, int64_t tb) {
            const int64_t tr = k_.project.rows;
            const GruProjection pr{d_.ic, d_.oc, xstep, gproj, G3,
                                   w.wx + d * blocks_ * d_.ic * kGruPackStride};
            for (int64_t block = 0; block < blocks_; ++block)
                for (int64_t t = ta; t < tb; ++t) {
                    const Span sp = span(d, c, t);
                    const int64_t q0 = d * words + p.first_[t] + sp.off, q1 = q0 + sp.rows;
                    for (int64_t r = q0; r < q1; r += tr)
                        k_.project.fn(pr, r, std::min(tr, q1 - r), block);
                }
        };
        // Steps [t0, t1) of directions [d0, d0 + nd), class c; each pass cut into `parts` parts
        // for as many threads, all done before the next pass begins.
        auto run = [&](int64_t d0, int64_t nd, int64_t c, int parts, int64_t t0, int64_t t1) {
            // The longest sentences come first: a class ends at its first empty step.
            for (int64_t t = t0, ready = t0; t < t1 && span(d0, c, t).rows > 0; ++t) {
                if (by_step && t == ready) {
                    // Steps enough for kProjectChunk rows: a step of few rows would stream all
                    // of Wx from L2 for them (one sentence: 0.8-0.95x the time up front).
                    for (int64_t rows = 0; ready < t1 && rows < kProjectChunk; ++ready) {
                        const int64_t r = span(d0, c, ready).rows;
                        if (r == 0) break;
                        rows += r;
                    }
                    for (int64_t d = d0; d < d0 + nd; ++d) project_steps(d, c, t, ready);
                }
                for (int pass = 0; pass < passes; ++pass)
                    parallel_for(parts, parts, [&](int64_t part, int) {
                        pass_part(d0, nd, c, t, pass, part, parts);
                    });
            }
        };
        // Every class's steps [t0, max_len), each step on the threads of the split by hidden
        // units; both directions at once where their weights fit the threads' caches.
        auto run_split = [&](int64_t t0) {
            const int both = threads_for_recurrence(p, D);
            if (D * wh_bytes() <= kWeightBytesPerThread * both)
                run(0, D, -1, both, t0, max_len);
            else
                for (int64_t d = 0; d < D; ++d)
                    run(d, 1, -1, threads_for_recurrence(p, 1), t0, max_len);
        };
        if (own.threads > 1) {
            // Unit (d, c) on one thread, alone on its rows, up to the tail (tail_step()).
            parallel_for(D * classes, own.threads, [&](int64_t unit, int) {
                run(unit / classes, 1, unit % classes, 1, 0, tail);
            });
            if (tail < max_len) run_split(tail);
        } else {
            run_split(0);
        }
    }

    if (last) p.last_states(D, OC, d_.reverse, out, h0, last);
}

void GruPlan::zero_padding(int64_t cols, float* out) const {
    if (steps_ == 0) return;  // lod, or no steps
    for (int64_t s = 0; s < n_; ++s)
        for (int64_t t = lens_[s]; t < steps_; ++t)
            std::memset(out + row_of(s, t) * cols, 0, size_t(cols) * sizeof(float));
}

void GruPlan::last_states(int64_t directions, int64_t oc, bool reverse, const float* out,
                          const float* h0, float* last) const {
    const int64_t cols = directions * oc;
    for (int64_t d = 0; d < directions; ++d)
        for (int64_t s = 0; s < n_; ++s) {
            float* dst = last + (d * n_ + s) * oc;
            const int64_t len = lens_[s];
            const bool rev = directions == 2 ? d == 1 : reverse;
            if (len > 0)
                std::memcpy(dst, out + row_of(s, rev ? 0 : len - 1) * cols + d * oc,
                            size_t(oc) * sizeof(float));
            else if (h0)
                std::memcpy(dst, h0 + (d * n_ + s) * oc, size_t(oc) * sizeof(float));
            else
                std::fill(dst, dst + oc, 0.0f);
        }
}

void GruPrimitive::project(const GruPlan& p, const float* const* xrow, const float* wx,
                           float* gproj) const {
    const int64_t words = p.words_;
    const int64_t D = d_.directions, G3 = 3 * d_.oc;
    // Items of kProjectChunk rows x one block of one direction: a thread keeps a chunk of x
    // and a block of Wx in cache. Which thread takes an item never changes a bit.
    const int64_t chunks = (words + kProjectChunk - 1) / kProjectChunk;
    const int64_t items = chunks * D * blocks_;
    const double fma = double(words) * double(D * G3) * double(d_.ic);
    const int nt = int(std::min<double>(
        {double(max_threads()), double(items), std::max(1.0, fma / kMinProjectFmaPerThread)}));
    const int64_t tr = k_.project.rows;
    parallel_ranges(items, nt, [&](int64_t lo, int64_t hi, int) {
        for (int64_t item = lo; item < hi; ++item) {
            const int64_t chunk = item / (D * blocks_), d = item / blocks_ % D;
            const int64_t block = item % blocks_;
            const GruProjection p{d_.ic, d_.oc, xrow, gproj + d * G3, D * G3,
                                  wx + d * blocks_ * d_.ic * kGruPackStride};
            const int64_t end = std::min(words, (chunk + 1) * kProjectChunk);
            for (int64_t r = chunk * kProjectChunk; r < end; r += tr)
                k_.project.fn(p, r, std::min(tr, end - r), block);
        }
    });
}

namespace {
// w [D, K, 3*OC] (canonical gate order) into [D, OCp/16, K, 3, 16], zero past OC.
void pack_blocks(const float* w, int64_t directions, int64_t k, int64_t oc, float* out) {
    const int64_t B = kGruBlock, blocks = (oc + B - 1) / B, G3 = 3 * oc;
    std::fill(out, out + directions * blocks * k * 3 * B, 0.0f);
    for (int64_t d = 0; d < directions; ++d)
        for (int64_t i = 0; i < k; ++i)
            for (int64_t gate = 0; gate < 3; ++gate)
                for (int64_t u = 0; u < oc; ++u)
                    out[(((d * blocks + u / B) * k + i) * 3 + gate) * B + u % B] =
                        w[(d * k + i) * G3 + gate * oc + u];
}
}  // namespace

GruPackedSizes gru_packed_sizes(int64_t directions, int64_t ic, int64_t oc) {
    const char* op = "pack_gru_weights";
    if (directions != 1 && directions != 2) fail(op, "directions must be 1 or 2");
    if (ic < 0 || oc < 1 || ic > INT32_MAX || oc > INT32_MAX)
        fail(op, "the input size must lie in [0, 2**31) and the hidden size in [1, 2**31)");
    const int64_t ocp = (oc + kGruBlock - 1) / kGruBlock * kGruBlock;
    const int64_t gates = directions * 3 * ocp;
    return {mul_size(gates, ic, op, "wx"), mul_size(gates, oc, op, "wh"), gates,
            directions * ocp};
}

void pack_gru_weights(int64_t directions, int64_t ic, int64_t oc, const float* wx,
                      const float* wh, const float* bias, const float* bias_h, float* out_wx,
                      float* out_wh, float* out_bx, float* out_bhc) {
    gru_packed_sizes(directions, ic, oc);  // checks the sizes
    if (wx != nullptr) pack_blocks(wx, directions, ic, oc, out_wx);
    pack_blocks(wh, directions, oc, oc, out_wh);
    pack_gru_bias(directions, oc, bias, bias_h, out_bx, out_bhc);
}

void pack_gru_bias(int64_t directions, int64_t oc, const float* bias, const float* bias_h,
                   float* out_bx, float* out_bhc) {
    const int64_t ocp = (oc + kGruBlock - 1) / kGruBlock * kGruBlock, G3 = 3 * oc;
    std::fill(out_bx, out_bx + directions * 3 * ocp, 0.0f);
    std::fill(out_bhc, out_bhc + directions * ocp, 0.0f);
    for (int64_t d = 0; d < directions; ++d)
        for (int64_t gate = 0; gate < 3; ++gate)
            for (int64_t u = 0; u < oc; ++u) {
                const float b = bias ? bias[d * G3 + gate * oc + u] : 0.0f;
                const float bh = bias_h ? bias_h[d * G3 + gate * oc + u] : 0.0f;
                // Update and reset add their recurrent bias; the candidate's stays apart,
                // inside r * (...) with linear_before_reset.
                out_bx[(d * 3 + gate) * ocp + u] = gate < 2 ? b + bh : b;
                if (gate == 2) out_bhc[d * ocp + u] = bh;
            }
}

}  // namespace fusebridge
