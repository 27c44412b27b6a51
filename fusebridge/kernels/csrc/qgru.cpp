#include "qgru.hpp"

#include <algorithm>
#include <string>

#include "aligned.hpp"
#include "checks.hpp"
#include "parallel.hpp"
#include "runtime.hpp"

namespace fusebridge {

namespace {

// Threads own (direction, sentence class) units of the recurrence and never wait for each
// other (as the float GRU's owners, gru.cpp): a class holds at least kMinClassRows sentences
// and a unit's share of the call's multiply-adds is worth a thread.
constexpr int64_t kMinClassRows = 4;
constexpr double kMinMacPerOwner = 1 << 17;
// Rows of one projection work item, and the multiply-adds that make waking a thread for it
// worth it.
constexpr int64_t kProjectChunk = 64;
constexpr double kMinProjectMacPerThread = 1 << 19;

const QGruKernels& qgru_kernels_for(Isa isa, unsigned ext, GruPrecision p) {
    switch (isa) {
        case Isa::avx512:
            if (p == GruPrecision::int8 && (ext & kExtVnni)) return qgru_kernels_avx512_vnni(p);
            if (p == GruPrecision::bf16 && (ext & kExtBf16)) return qgru_kernels_avx512_bf16(p);
            return qgru_kernels_avx512(p);
        case Isa::avx2:
            if (p == GruPrecision::int8 && (ext & kExtVnni)) return qgru_kernels_avx2_vnni(p);
            return qgru_kernels_avx2(p);
        default: return qgru_kernels_scalar(p);
    }
}

struct Scratch {
    AlignedVector<uint32_t> groups;  // quantized x rows, then quantized state rows
    AlignedVector<float> gates;      // the projected input
    AlignedVector<float> f;          // row scales, u, rh
    std::vector<const float*> in;
    std::vector<float*> out;
};

// The calling thread's work memory, kept between calls (gru.cpp's Scratch says why).
Scratch& scratch() {
    thread_local Scratch s;
    return s;
}

}  // namespace

QGruPackedSizes qgru_packed_sizes(GruPrecision p, int64_t directions, int64_t ic, int64_t oc) {
    const char* op = "pack_gru_weights";
    if (p != GruPrecision::int8 && p != GruPrecision::bf16)
        fail(op, "precision must be int8 or bf16");
    const GruPackedSizes f = gru_packed_sizes(directions, ic, oc);  // directions, sizes
    if (p == GruPrecision::int8 && (ic > kMaxInt8Depth || oc > kMaxInt8Depth))
        fail(op, "int8 needs input and hidden size <= " + std::to_string(kMaxInt8Depth) +
                     " (so that int32 sums are exact), got " + std::to_string(ic) + " and " +
                     std::to_string(oc));
    const int64_t gates = f.bx;  // D * 3 * OCp
    return {mul_size(gates, q_groups(p, ic), op, "wx"),
            mul_size(gates, q_groups(p, oc), op, "wh"), p == GruPrecision::int8 ? gates : 0,
            gates, f.bhc};
}

QGruPrimitive::QGruPrimitive(const QGruDesc& desc)
    : k_(qgru_kernels_for(desc.isa, desc.extensions, desc.precision)), d_(desc) {
    const char* op = "fusion_gru";
    if (int(d_.isa) > int(best_isa()) || (d_.extensions & ~cpu_extensions(d_.isa)))
        fail(op, std::string("this CPU cannot run the extensions asked for ") +
                     isa_name(d_.isa) + " code (mask " + std::to_string(d_.extensions) + ")");
    qgru_packed_sizes(d_.precision, d_.directions, d_.projection ? d_.ic : 0, d_.oc);
    plan_desc_ = GruDesc{d_.layout, d_.ic,   d_.oc,         d_.directions,
                         d_.reverse, d_.linear_before_reset, d_.origin_mode, d_.act,
                         d_.gate,   d_.projection,           d_.isa};
    const GruPrimitive check(plan_desc_);  // the float GRU's checks of the same shape
    ocp_ = check.ocp();
    blocks_ = ocp_ / kGruBlock;
    gx_ = d_.projection ? q_groups(d_.precision, d_.ic) : 0;
    gh_ = q_groups(d_.precision, d_.oc);
}

const GruPlan& QGruPrimitive::plan(const int64_t* lens, int64_t n, int64_t steps) const {
    thread_local GruPlan p;
    p.build(plan_desc_, lens, n, steps);
    return p;
}

void QGruPrimitive::project(const GruPlan& p, const float* x, const QGruWeightsView& w,
                            float* gproj) const {
    const int64_t words = p.words_, D = d_.directions, G3 = 3 * d_.oc;
    Scratch& sc = scratch();
    uint32_t* ax = at_least(sc.groups, size_t(words * gx_));
    float* ax_scale = at_least(sc.f, size_t(words));
    const int64_t chunks = (words + kProjectChunk - 1) / kProjectChunk;
    const double macs = double(words) * double(D * G3) * double(d_.ic);
    const int nt = int(std::min<double>({double(max_threads()), double(chunks * D * blocks_),
                                         std::max(1.0, macs / kMinProjectMacPerThread)}));
    // Row r = gbase_[s] + t: word t of sentence s, quantized once for both directions.
    parallel_ranges(p.n_, nt, [&](int64_t lo, int64_t hi, int) {
        for (int64_t s = lo; s < hi; ++s)
            for (int64_t t = 0; t < p.lens_[s]; ++t) {
                const int64_t r = p.gbase_[s] + t;
                k_.quantize(x + p.row_of(s, t) * d_.ic, d_.ic, ax + r * gx_, ax_scale + r);
            }
    });
    const int64_t tr = k_.project.rows;
    parallel_ranges(chunks * D * blocks_, nt, [&](int64_t lo, int64_t hi, int) {
        for (int64_t item = lo; item < hi; ++item) {
            const int64_t chunk = item / (D * blocks_), d = item / blocks_ % D;
            const int64_t block = item % blocks_, col = d * 3 * ocp_;
            const QGruProjection args{d_.oc,
                                      gx_,
                                      ax,
                                      gx_,
                                      ax_scale,
                                      gproj + d * G3,
                                      D * G3,
                                      w.wx + d * blocks_ * gx_ * kQGroupStride,
                                      w.wx_scale ? w.wx_scale + col : nullptr,
                                      w.wx_comp ? w.wx_comp + col : nullptr};
            const int64_t end = std::min(words, (chunk + 1) * kProjectChunk);
            for (int64_t r = chunk * kProjectChunk; r < end; r += tr)
                k_.project.fn(args, r, std::min(tr, end - r), block);
        }
    });
}

void QGruPrimitive::forward(const GruPlan& p, const float* x, const QGruWeightsView& w,
                            const float* h0, float* out, float* last) const {
    const int64_t D = d_.directions, OC = d_.oc, G3 = 3 * OC, cols = D * OC;
    const int64_t n = p.n_, words = p.words_;
    p.zero_padding(cols, out);
    auto is_reverse = [&](int64_t d) { return D == 2 ? d == 1 : d_.reverse; };
    if (words > 0) {
        Scratch& sc = scratch();
        float* gproj = d_.projection ? at_least(sc.gates, size_t(words * D * G3)) : nullptr;
        if (d_.projection) project(p, x, w, gproj);
        auto gates = [&](int64_t s, int64_t word) {
            return d_.projection ? gproj + (p.gbase_[s] + word) * D * G3
                                 : x + p.row_of(s, word) * d_.ic;
        };
        // Per state row (D * n of them, a class's rows together): quantized groups, scale,
        // u and r * h_prev, and the row addresses of the step.
        const int64_t rows = D * n;
        uint32_t* ah = at_least(sc.groups, size_t(rows * gh_));
        float* f = at_least(sc.f, size_t(rows * (2 * ocp_ + 1) + ocp_));
        float* u = f;
        float* rh = u + rows * ocp_;
        float* ah_scale = rh + rows * ocp_;
        float* zeros = ah_scale + rows;
        std::fill(zeros, zeros + ocp_, 0.0f);
        const float** hprev = at_least(sc.in, size_t(2 * rows));
        const float** grow = hprev + rows;
        float** hout = at_least(sc.out, size_t(rows));

        const int avail = max_threads();
        const int64_t classes = std::max<int64_t>(
            1, std::min<int64_t>(avail / D, p.active_.empty() ? 0 : p.active_[0] / kMinClassRows));
        const double macs = double(words) * D * OC * 3.0 * OC;
        const int nt = int(std::min<double>(
            {double(avail), double(D * classes), std::max(1.0, macs / kMinMacPerOwner)}));
        auto run_unit = [&](int64_t d, int64_t c) {
            const bool rev = is_reverse(d);
            const int64_t base = d * n + class_offset(p.active_[0], c, classes);
            for (int64_t t = 0; t < p.max_len_; ++t) {
                const int64_t nrows = class_rows(p.active_[t], c, classes);
                if (nrows == 0) break;  // the longest sentences come first
                for (int64_t i = 0; i < nrows; ++i) {
                    const int64_t s = p.order_[c + i * classes], len = p.lens_[s];
                    const int64_t word = rev ? len - 1 - t : t, q = base + i;
                    hout[q] = out + p.row_of(s, word) * cols + d * OC;
                    grow[q] = gates(s, word) + d * G3;
                    if (t > 0)
                        hprev[q] = out + p.row_of(s, rev ? word + 1 : word - 1) * cols + d * OC;
                    else
                        hprev[q] = h0 ? h0 + (d * n + s) * OC : zeros;
                    k_.quantize(hprev[q], OC, ah + q * gh_, ah_scale + q);
                    // The row's gates lie far from the last step's (rows of one sentence are
                    // D * 3 * OC floats apart, and the projection of a batch outgrows L2):
                    // ask for all of them now, before the tiles wait on them one by one.
                    for (int64_t k = 0; k < G3; k += 16) __builtin_prefetch(grow[q] + k);
                }
                const int64_t col = d * 3 * ocp_;
                const QGruStep st{OC,
                                  ocp_,
                                  gh_,
                                  ah + base * gh_,
                                  gh_,
                                  ah_scale + base,
                                  hprev + base,
                                  hout + base,
                                  grow + base,
                                  w.wh + d * blocks_ * gh_ * kQGroupStride,
                                  w.wh_scale ? w.wh_scale + col : nullptr,
                                  w.wh_comp ? w.wh_comp + col : nullptr,
                                  w.bx + col,
                                  w.bhc + d * ocp_,
                                  u + base * ocp_,
                                  rh + base * ocp_,
                                  d_.act,
                                  d_.gate,
                                  d_.origin_mode};
                auto pass = [&](const QGruTile<QGruStep>& tile) {
                    for (int64_t block = 0; block < blocks_; ++block)
                        for (int64_t r = 0; r < nrows; r += tile.rows)
                            tile.fn(st, r, std::min<int64_t>(tile.rows, nrows - r), block);
                };
                if (d_.linear_before_reset) {
                    pass(k_.lbr);
                } else {
                    pass(k_.update_reset);
                    for (int64_t i = 0; i < nrows; ++i)  // r * h_prev, quantized in place of h
                        k_.quantize(rh + (base + i) * ocp_, OC, ah + (base + i) * gh_,
                                    ah_scale + base + i);
                    pass(k_.candidate);
                }
            }
        };
        parallel_for(D * classes, nt, [&](int64_t unit, int) {
            run_unit(unit / classes, unit % classes);
        });
    }
    if (last) p.last_states(D, OC, d_.reverse, out, h0, last);
}

}  // namespace fusebridge
