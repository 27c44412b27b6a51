// Kernels that test the CUDA emulator itself (tests/cuda/test_emulator.py). Plain CUDA C++:
// NVRTC would compile them as they are. The first group is correct; the second has the bugs
// the emulator must report.

// As fusebridge/cuda/csrc/common.cuh: the emulator defines its own, one buffer per block.
#ifndef FB_DYNAMIC_SHARED
#define FB_DYNAMIC_SHARED(T, name) \
    extern __shared__ __align__(16) unsigned char fb_dynamic_shared_[]; \
    T* name = reinterpret_cast<T*>(fb_dynamic_shared_)
#endif

// ---- correct kernels ------------------------------------------------------------------------

extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x,
                                 float* __restrict__ y) {
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = a * x[i] + y[i];
}

// In place, x and y may alias: no __restrict__.
extern "C" __global__ void axpy_alias(long long n, double a, const double* x, double* y) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i] + y[i];
}

// Where each thread of a 3-D launch is: out[global linear id] = (block linear, thread linear).
extern "C" __global__ void thread_ids(uint2* out) {
    const unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    out[b * blockDim.x * blockDim.y * blockDim.z + t] = make_uint2(b, t);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, d);
    return v;
}

// out[w] = sum of x over the 32 lanes of global warp w; every lane gets the sum, lane 0 stores.
extern "C" __global__ void warp_sums(const float* x, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float s = warp_sum(x[i]);
    if ((threadIdx.x & 31) == 0) out[i / 32] = s;
}

// out[blockIdx.x] = sum of x over a grid-stride share; a tree in shared memory, any block size.
extern "C" __global__ void block_sums(int n, const float* x, float* out) {
    __shared__ float partial[1024];
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += x[i];
    const unsigned t = threadIdx.x;
    partial[t] = s;
    __syncthreads();
    for (unsigned half = 512; half > 0; half /= 2) {
        if (t < half && t + half < blockDim.x) partial[t] += partial[t + half];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

// Bit i of words (LSB first) = x[i] > threshold; each warp packs 32 predicates per iteration.
extern "C" __global__ void ballot_pack(int n, const float* x, float threshold, uint32_t* words) {
    const int lane = threadIdx.x & 31;
    const int warps = gridDim.x * (blockDim.x / 32);
    for (int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w * 32 < n; w += warps) {
        const int i = w * 32 + lane;
        const unsigned bits = __ballot_sync(0xFFFFFFFFu, i < n && x[i] > threshold);
        if (lane == 0) words[w] = bits;
    }
}

// words |= 1 << idx for every idx (the bits of many threads share words).
extern "C" __global__ void set_bits(int n, const int* idx, unsigned* words) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicOr(&words[idx[i] >> 5], 1u << (idx[i] & 31));
}

extern "C" __global__ void histogram(int n, const int* v, unsigned long long* counts) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&counts[v[i]], 1ull);
}

// Every shuffle mode on 64-bit values, and votes; out holds 7 values per thread.
extern "C" __global__ void shuffles(const long long* x, long long* out, int src, int delta,
                                    int lane_mask, int width) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const long long v = x[i];
    long long* o = out + 7 * i;
    o[0] = __shfl_sync(0xFFFFFFFFu, v, src, width);
    o[1] = __shfl_up_sync(0xFFFFFFFFu, v, delta, width);
    o[2] = __shfl_down_sync(0xFFFFFFFFu, v, delta, width);
    o[3] = __shfl_xor_sync(0xFFFFFFFFu, v, lane_mask, width);
    o[4] = __any_sync(0xFFFFFFFFu, v < 0);
    o[5] = __all_sync(0xFFFFFFFFu, v < 0);
    o[6] = __syncthreads_count(v < 0);
}

// Shuffles within the lower half-warp only, on doubles: lanes 16..31 stay out.
extern "C" __global__ void half_warp_max(const double* x, double* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if ((threadIdx.x & 31) >= 16) return;
    double v = x[i];
    for (int d = 8; d > 0; d /= 2) v = max(v, __shfl_down_sync(0x0000FFFFu, v, d, 16));
    if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}

extern "C" __global__ void bit_tricks(const unsigned* x, unsigned* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned v = x[i];
    unsigned* o = out + 6 * i;
    o[0] = __popc(v);
    o[1] = __clz(int(v));
    o[2] = __brev(v);
    o[3] = __ffs(int(v));
    o[4] = __umulhi(v, 0x9E3779B9u);
    o[5] = unsigned(__umul64hi((unsigned long long)v << 32 | v, 0x9E3779B97F4A7C15ull));
}

// Reductions by atomics every thread applies: r = {max, min}, u = {and, xor, sum by CAS}.
extern "C" __global__ void atomic_reductions(int n, const int* v, int* r, unsigned* u) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicMax(&r[0], v[i]);
        atomicMin(&r[1], v[i]);
        atomicAnd(&u[0], unsigned(v[i]));
        atomicXor(&u[1], unsigned(v[i]));
        unsigned old = u[2], assumed;
        do {
            assumed = old;
            old = atomicCAS(&u[2], assumed, assumed + unsigned(v[i]));
        } while (old != assumed);
    }
}

// ---- cooperative launches and dynamic shared memory -----------------------------------------

// A grid barrier of the usual kind over sync[0] (arrivals) and sync[1] (generation), both zero
// before the launch: the last to arrive resets the count and advances the generation, the
// others spin on it. Thread 0 of each block arrives for its block, or, with `every_thread`,
// each thread for itself (no __syncthreads: only the atomics show the scheduler progress).
__device__ void grid_barrier(unsigned* sync, bool every_thread) {
    if (!every_thread) __syncthreads();
    if (every_thread || threadIdx.x == 0) {
        const unsigned expected = every_thread ? gridDim.x * blockDim.x : gridDim.x;
        volatile unsigned* generation = sync + 1;
        const unsigned g = *generation;
        __threadfence();
        if (atomicAdd(&sync[0], 1u) == expected - 1) {
            atomicExch(&sync[0], 0u);
            __threadfence();
            *generation = g + 1;
        } else {
            while (*generation == g) __nanosleep(64);
        }
        __threadfence();
    }
    if (!every_thread) __syncthreads();
}

// `phases` rounds over a double buffer data[2][n], n = all threads of a 1-D grid: each thread
// computes its element from one of another block's in the round before (the block k blocks
// on, k = 1 + phase % (blocks - 1)), then the grid meets at the barrier. Block `absent`
// returns at once (a bug: the others then wait for it forever).
extern "C" __global__ void grid_phases(int phases, int every_thread, int absent, unsigned* data,
                                       unsigned* sync) {
    if (int(blockIdx.x) == absent) return;
    const unsigned n = gridDim.x * blockDim.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int p = 0; p < phases; ++p) {
        const unsigned* src = data + (p % 2) * n;
        unsigned* dst = data + (1 - p % 2) * n;
        const unsigned k = gridDim.x > 1 ? 1u + unsigned(p) % (gridDim.x - 1) : 0u;
        dst[i] = src[(i + k * blockDim.x) % n] * 3u + i + unsigned(p);
        grid_barrier(sync, every_thread != 0);
    }
}

// Each thread's blockIdx, read before and after letting the other blocks run.
extern "C" __global__ void block_ids_across_yields(uint2* out) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned before = blockIdx.x;
    __nanosleep(1);
    __syncthreads();
    __nanosleep(1);
    out[i] = make_uint2(before, blockIdx.x);
}

// Each block's dynamic shared memory is its own and fresh: before[i] = what thread i found in
// its slot, after[i] = the slot of its mirror thread once the block wrote blockIdx * 1000 +
// slot into every slot. The __nanosleep lets other blocks of a cooperative launch run between.
extern "C" __global__ void shared_per_block(unsigned* before, unsigned* after) {
    FB_DYNAMIC_SHARED(unsigned, s);
    const unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    before[i] = s[t];
    s[t] = blockIdx.x * 1000u + t;
    __nanosleep(100);
    __syncthreads();
    after[i] = s[blockDim.x - 1 - t];
}

// block_sums with the tree in dynamic shared memory of blockDim.x floats: fit for a
// cooperative launch, where static __shared__ would be shared by the blocks.
extern "C" __global__ void block_sums_dynamic(int n, const float* x, float* out) {
    FB_DYNAMIC_SHARED(float, partial);
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += x[i];
    const unsigned t = threadIdx.x;
    partial[t] = s;
    __syncthreads();
    for (unsigned half = 512; half > 0; half /= 2) {
        if (t < half && t + half < blockDim.x) partial[t] += partial[t + half];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

// ---- buggy kernels: the emulator must report each ---------------------------------------------

// Writes y[n], one past the end.
extern "C" __global__ void write_past_end(int n, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = 1.0f;
}

// Lane 0 leaves; the others shuffle with a full mask that still names it.
extern "C" __global__ void shuffle_after_exit(float* out) {
    const int lane = threadIdx.x & 31;
    if (lane == 0) return;
    out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, 1.0f, 1);
}

// Even lanes shuffle, odd lanes vote: lanes of one warp at different collectives.
extern "C" __global__ void mixed_collectives(unsigned* out) {
    const int lane = threadIdx.x & 31;
    if (lane % 2 == 0)
        out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, 1u, 2);
    else
        out[threadIdx.x] = __ballot_sync(0xFFFFFFFFu, 1);
}

// Thread 0 returns before a __syncthreads the others reach.
extern "C" __global__ void barrier_after_exit(float* out) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

// A full-warp shuffle in a block whose last warp is partial.
extern "C" __global__ void full_mask_partial_warp(float* out) {
    out[threadIdx.x] = __shfl_down_sync(0xFFFFFFFFu, 1.0f, 1);
}

// Indexes shared memory past its end.
extern "C" __global__ void shared_overflow(float* out) {
    __shared__ float tile[32];
    tile[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x];
}

// Signed overflow, undefined: UBSan's report.
extern "C" __global__ void signed_overflow(int start, int* out) {
    out[threadIdx.x] = start + int(threadIdx.x);
}

// Lanes 0, 1, 2 each wait for the next at a __syncwarp of two lanes: a cycle, no pair of them
// at one collective.
extern "C" __global__ void deadlock_cycle(int* out) {
    const int lane = threadIdx.x & 31;
    if (lane == 0) __syncwarp(0x3u);
    if (lane == 1) __syncwarp(0x6u);
    if (lane == 2) __syncwarp(0x5u);
    out[threadIdx.x] = lane;
}

// The lower half-warp shuffles down across the whole warp: lane 15 reads lane 16, not a
// participant.
extern "C" __global__ void shuffle_outside_mask(float* out) {
    if ((threadIdx.x & 31) >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0x0000FFFFu, 1.0f, 1);
}

// Writes dynamic shared memory at index n, one past n floats.
extern "C" __global__ void shared_write_past_end(int n, float* out) {
    FB_DYNAMIC_SHARED(float, s);
    if (int(threadIdx.x) <= n) s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[0];
}
