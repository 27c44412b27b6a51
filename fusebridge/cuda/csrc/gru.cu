// The fused GRU on the GPU: an input projection of our own (a tiled GEMM over the words that
// exist, never padding) and one persistent launch for the whole recurrence.
//
// The recurrence keeps each block's slice of Wh in shared memory for every step (Persistent
// RNNs, Diamos et al. 2016; cuDNN's persistent algorithm): block b of direction d owns hidden
// units [b*units, (b+1)*units), and the blocks of both directions step together through a grid
// barrier of our own (an arrival counter and a generation word), so the launch must have every
// block resident at once: a cooperative launch.
//
// What an output is, bit for bit, depends on the shapes alone (IC, OC and the step), never on
// the grid, the block or the other sentences of the batch: each projected gate is one sum over
// k in ascending order, and each recurrent dot product is one warp's (lane l sums k = l, l+32,
// ... in order, then a fixed xor butterfly), whichever block or warp computes it.
#include "common.cuh"

namespace fusebridge {
namespace cuda {

enum GruAct { kSigmoid = 0, kTanh = 1, kRelu = 2, kIdentity = 3 };

__device__ __forceinline__ float activate(int act, float v) {
    switch (act) {
    case kSigmoid: return 1.0f / (1.0f + expf(-v));
    case kTanh: return tanhf(v);
    case kRelu: return v > 0.0f ? v : 0.0f;
    default: return v;
    }
}

__device__ __forceinline__ float lanes_sum(float v) {
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, m);
    return v;
}

// Every block of the launch arrives; none goes on before all have. `generation` counts the
// barriers passed; `passed` is this block's count (the same in all of its threads).
__device__ __forceinline__ void grid_barrier(unsigned* arrived, unsigned* generation,
                                             unsigned& passed) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // this block's writes before its arrival
        if (atomicAdd(arrived, 1u) == gridDim.x - 1) {
            atomicExch(arrived, 0u);
            __threadfence();
            atomicAdd(generation, 1u);
        } else {
            const volatile unsigned* gen = generation;
            while (*gen == passed) __nanosleep(64);
        }
        __threadfence();  // the other blocks' writes after the barrier
    }
    ++passed;
    __syncthreads();
}

}  // namespace cuda
}  // namespace fusebridge

using namespace fusebridge::cuda;

constexpr int kTile = 64;      // projection outputs per tile side
constexpr int kTileK = 16;     // k per shared-memory stage
constexpr int kUnitsPass = 4;  // hidden units a warp carries per pass over k

// gates[i, c] = sum_k x[xrows[i], k] * wx[k, c] + bias[c] over the `rows` words that exist
// (xrows: their rows of x), c < cols = D*3*OC. Without wx, x already holds the projected gates
// and the kernel adds the bias. 256 threads; any grid (tiles grid-stride).
extern "C" __global__ void __launch_bounds__(256)
    gru_projection(const float* __restrict__ x, long long x_cols,
                   const long long* __restrict__ xrows, long long rows,
                   const float* __restrict__ wx, const float* __restrict__ bias, long long cols,
                   float* __restrict__ gates) {
    if (wx == nullptr) {
        const long long n = rows * cols;
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
             i += (long long)gridDim.x * blockDim.x) {
            const long long r = i / cols, c = i - r * cols;
            gates[i] = x[xrows[r] * x_cols + c] + bias[c];
        }
        return;
    }
    __shared__ float xs[kTileK][kTile];
    __shared__ float ws[kTileK][kTile];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const long long row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
    for (long long tile = blockIdx.x; tile < row_tiles * col_tiles; tile += gridDim.x) {
        const long long r0 = (tile / col_tiles) * kTile, c0 = (tile % col_tiles) * kTile;
        float acc[4][4] = {};
        for (long long k0 = 0; k0 < x_cols; k0 += kTileK) {
            // Out of range reads 0: adding 0 * 0 leaves every sum as it was.
            for (int e = threadIdx.x; e < kTileK * kTile; e += 256) {
                const int kk = e / kTile, rr = e % kTile;
                const long long k = k0 + kk, r = r0 + rr, c = c0 + rr;
                xs[kk][rr] = k < x_cols && r < rows ? x[xrows[r] * x_cols + k] : 0.0f;
                ws[kk][rr] = k < x_cols && c < cols ? wx[k * cols + c] : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < kTileK; ++kk)
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        acc[i][j] = fmaf(xs[kk][ty + 16 * i], ws[kk][tx + 16 * j], acc[i][j]);
            __syncthreads();
        }
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j) {
                const long long r = r0 + ty + 16 * i, c = c0 + tx + 16 * j;
                if (r < rows && c < cols) gates[r * cols + c] = acc[i][j] + bias[c];
            }
    }
}

// Dot products of one sentence's row h [OC] (read through `volatile`: other blocks wrote it
// before the last barrier, and L1 is not coherent) with gates g0..g0+ngates-1 of `units` hidden
// units of the block's Wh slice sw [units][3][OC]; lane 0..units-1 of the warp gets unit `lane`'s
// sums. A pass carries kUnitsPass units, so the registers do not grow with the slice.
template <int kGates>
__device__ __forceinline__ void warp_dots(const volatile float* h, const float* sw, int oc,
                                          int g0, int units, float (&out)[kGates]) {
    const int lane = threadIdx.x % 32;
    for (int u0 = 0; u0 < units; u0 += kUnitsPass) {
        float acc[kUnitsPass][kGates] = {};
        for (int k = lane; k < oc; k += 32) {
            const float hk = h[k];
#pragma unroll
            for (int u = 0; u < kUnitsPass; ++u)
#pragma unroll
                for (int g = 0; g < kGates; ++g)
                    if (u0 + u < units)
                        acc[u][g] = fmaf(hk, sw[((u0 + u) * 3 + g0 + g) * oc + k], acc[u][g]);
        }
#pragma unroll
        for (int u = 0; u < kUnitsPass; ++u)
#pragma unroll
            for (int g = 0; g < kGates; ++g) {
                const float s = lanes_sum(acc[u][g]);
                if (lane == u0 + u) out[g] = s;
            }
    }
}

// The whole recurrence of one call, every step, in one cooperative launch of
// D * blocks_per_dir blocks. Sentences are in the caller's order of decreasing length (`order`:
// their index in the batch), so the `active[t]` sentences longer than t are a prefix and step t
// touches no other. Sentence s's word p has its projected gates at row gstart[s] + p of `gates`
// and its output at row obase[s] + p * ostride of `out` (columns d*OC..: forward half first).
// state [2, D, N, OC] holds h of the last and the next step; mid [D, N, OC] u and mid2 r*h
// between the two passes of the linear_before_reset = 0 form. barrier: 2 words, zero.
extern "C" __global__ void __launch_bounds__(256)
    gru_recurrence(const float* __restrict__ gates, const float* __restrict__ wh,
                   const float* __restrict__ bias_hc, const float* __restrict__ h0,
                   const int* __restrict__ lens, const int* __restrict__ order,
                   const long long* __restrict__ gstart, const long long* __restrict__ obase,
                   long long ostride, const int* __restrict__ active, float* __restrict__ out,
                   float* __restrict__ last, float* state, float* mid, float* mid2,
                   unsigned* barrier, int directions, int oc, int n, int steps,
                   int blocks_per_dir, int units, int reverse, int linear_before_reset,
                   int origin_mode, int act, int gate_act) {
    FB_DYNAMIC_SHARED(float, sw);  // [units][3][OC]: this block's columns of Wh
    const int d = blockIdx.x / blocks_per_dir;
    const int j0 = (blockIdx.x % blocks_per_dir) * units;
    const int mine = j0 < oc ? min(units, oc - j0) : 0;  // units this block owns
    const bool backwards = directions == 2 ? d == 1 : reverse != 0;
    const long long plane = (long long)n * oc, width = 3LL * oc * directions;
    const float* w = wh + (long long)d * oc * 3 * oc;
    for (int e = threadIdx.x; e < mine * 3 * oc; e += blockDim.x) {
        const int u = e / (3 * oc), g = (e / oc) % 3, k = e % oc;
        sw[e] = w[(long long)k * 3 * oc + g * oc + j0 + u];
    }
    unsigned* arrived = barrier;
    unsigned* generation = barrier + 1;
    unsigned passed = 0;
    float* h_init = state + d * plane;
    for (long long e = threadIdx.x; e < (long long)n * mine; e += blockDim.x) {
        const int s = int(e / mine), j = j0 + int(e % mine), b = order[s];
        const float v = h0 ? h0[d * plane + (long long)b * oc + j] : 0.0f;
        h_init[(long long)s * oc + j] = v;
        if (last && lens[s] == 0) last[d * plane + (long long)b * oc + j] = v;
    }
    grid_barrier(arrived, generation, passed);

    const int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = threadIdx.x % 32;
    const float* bhc = bias_hc + (long long)d * oc;
    for (int t = 0; t < steps; ++t) {
        const float* h_prev = state + ((t & 1) * directions + d) * plane;
        float* h_next = state + (((t + 1) & 1) * directions + d) * plane;
        const int rows = active[t];
        if (linear_before_reset) {
            for (int s = warp; s < rows && mine; s += warps) {
                const int p = backwards ? lens[s] - 1 - t : t;
                const float* g = gates + (gstart[s] + p) * width + (long long)d * 3 * oc;
                float sums[3] = {};
                warp_dots<3>(h_prev + (long long)s * oc, sw, oc, 0, mine, sums);
                if (lane < mine) {
                    const int j = j0 + lane;
                    const float u = activate(gate_act, g[j] + sums[0]);
                    const float r = activate(gate_act, g[oc + j] + sums[1]);
                    const float c = activate(act, g[2 * oc + j] + r * (sums[2] + bhc[j]));
                    const float hp = ((const volatile float*)h_prev)[(long long)s * oc + j];
                    const float hn = origin_mode ? u * hp + (1.0f - u) * c
                                                 : (1.0f - u) * hp + u * c;
                    h_next[(long long)s * oc + j] = hn;
                    out[(obase[s] + p * ostride) * oc * directions + (long long)d * oc + j] = hn;
                    if (last && t == lens[s] - 1) last[d * plane + (long long)order[s] * oc + j] = hn;
                }
            }
            grid_barrier(arrived, generation, passed);
            continue;
        }
        // Paddle's form: c = act(x_c + (r * h) @ Wh_c + b_hc) needs r of every unit first.
        float* u_all = mid + d * plane;
        float* rh_all = mid2 + d * plane;
        for (int s = warp; s < rows && mine; s += warps) {
            const int p = backwards ? lens[s] - 1 - t : t;
            const float* g = gates + (gstart[s] + p) * width + (long long)d * 3 * oc;
            float sums[2] = {};
            warp_dots<2>(h_prev + (long long)s * oc, sw, oc, 0, mine, sums);
            if (lane < mine) {
                const int j = j0 + lane;
                const float hp = ((const volatile float*)h_prev)[(long long)s * oc + j];
                u_all[(long long)s * oc + j] = activate(gate_act, g[j] + sums[0]);
                rh_all[(long long)s * oc + j] = activate(gate_act, g[oc + j] + sums[1]) * hp;
            }
        }
        grid_barrier(arrived, generation, passed);
        for (int s = warp; s < rows && mine; s += warps) {
            const int p = backwards ? lens[s] - 1 - t : t;
            const float* g = gates + (gstart[s] + p) * width + (long long)d * 3 * oc;
            float sums[1] = {};
            warp_dots<1>(rh_all + (long long)s * oc, sw, oc, 2, mine, sums);
            if (lane < mine) {
                const int j = j0 + lane;
                const float c = activate(act, g[2 * oc + j] + sums[0] + bhc[j]);
                const float u = u_all[(long long)s * oc + j];
                const float hp = ((const volatile float*)h_prev)[(long long)s * oc + j];
                const float hn = origin_mode ? u * hp + (1.0f - u) * c : (1.0f - u) * hp + u * c;
                h_next[(long long)s * oc + j] = hn;
                out[(obase[s] + p * ostride) * oc * directions + (long long)d * oc + j] = hn;
                if (last && t == lens[s] - 1) last[d * plane + (long long)order[s] * oc + j] = hn;
            }
        }
        grid_barrier(arrived, generation, passed);
    }
}
