// A CPU emulation of the CUDA device environment, for tests only: g++ compiles an unchanged
// CUDA C++ kernel source (one NVRTC accepts) after this header, and emu::launch runs the grid
// on the CPU, so that the sanitizers (-fsanitize=address,undefined) check the kernel's logic
// on machines without a GPU.
//
// Execution model. The blocks of a launch run one after another (z, y, x order, x fastest),
// never concurrently, all on the calling OS thread. Each thread of the running block is a
// fiber (ucontext) with its own malloc'ed stack; the scheduler runs the fibers round-robin,
// each until it reaches a collective (__syncthreads, __syncwarp, shuffles, votes), calls
// __nanosleep (which only yields) or returns. A collective completes when every participant
// of its block has arrived; any mistake that would leave it waiting forever, or that CUDA
// leaves undefined, aborts with the kernel, block, thread and what went wrong: a participant
// that has exited, lanes of a warp meeting at different collectives or with different masks,
// a mask naming lanes the block does not have, a shuffle reading a lane outside its mask, a
// deadlock, or a spin wait that never ends (see kSpinRounds).
//
// A cooperative launch (launch_named(..., cooperative = true)) runs the fibers of every block
// together, round-robin, so that blocks may wait for each other through global memory (a grid
// barrier spinning on a volatile load with __nanosleep in the loop). The collectives stay per
// block. Its stacks, kMaxCooperativeThreads at most, are allocated once for the launch.
//
// Since the fibers take turns on one OS thread, `__shared__` is `static`: function-static
// storage is shared by the fibers of the running block (and keeps its contents from block to
// block, which CUDA leaves undefined). In a cooperative launch that storage would be shared by
// all the blocks at once, which is wrong and goes unnoticed: cooperative kernels must use
// FB_DYNAMIC_SHARED only. Atomics are plain read-modify-writes for the same reason.
//
// Dynamic shared memory: FB_DYNAMIC_SHARED(T, name) (fusebridge/cuda/csrc/common.cuh spells
// it for the GPU) declares `T* name`, the running block's own malloc of exactly the launch's
// dynamic shared bytes, filled with 0xA5 so that reads of unwritten bytes show in results and
// ASan reports any access past its end. With 0 bytes it points to a 0-byte allocation: any
// access is an overflow. Not emulated: `extern __shared__` arrays, `static __shared__` (the
// expansion says static twice), __activemask, and the memory model (no reordering).
#pragma once

// Every standard header first: the CUDA keywords below are macros, and the kernel sources'
// own includes of these then expand to nothing (include guards).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <math.h>
#include <memory>
#include <stdint.h>
#include <tuple>
#include <type_traits>
#include <ucontext.h>
#include <utility>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

namespace emu {

constexpr size_t kStackSize = 256 * 1024;
// Every thread of a cooperative launch has its stack at once: 16384 of them reserve 4 GiB of
// address space and take about 800 MiB under ASan (50 KiB each, 13 KiB without).
constexpr uint64_t kMaxCooperativeThreads = 16384;
// The most dynamic shared memory any GPU gives a block (sm_90: 227 KiB).
constexpr size_t kMaxDynamicShared = 227 * 1024;
constexpr unsigned char kSharedPoison = 0xA5;
// A spin wait that never ends: this many scheduler rounds in a row in which every thread that
// ran only called __nanosleep, and no thread arrived at a collective, exited or changed memory
// by an atomic. A grid barrier that does end costs a round or two: its last arrival is an
// atomic, and the spinners leave in the next round. Taken for a hang would be only threads
// that release each other by plain stores alone (no atomic, collective or exit) for this many
// rounds, e.g. a barrier of flags met 10000 times. Finding a hang costs this many switches per
// spinning thread, about 0.7 us each under ASan: a second for 150 threads, two minutes for
// 16384, within the Python side's timeout.
constexpr int kSpinRounds = 10000;

// Block-wide collectives first: is_block_op relies on the order.
enum class Op { none, syncthreads, syncthreads_count, syncthreads_and, syncthreads_or,
                syncwarp, shfl, shfl_up, shfl_down, shfl_xor, ballot, any, all };

inline const char* op_name(Op op) {
    static const char* const names[] = {
        "(none)", "__syncthreads", "__syncthreads_count", "__syncthreads_and",
        "__syncthreads_or", "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
        "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync"};
    return names[int(op)];
}

inline bool is_block_op(Op op) { return op >= Op::syncthreads && op <= Op::syncthreads_or; }

struct Block;

struct Fiber {
    ucontext_t ctx;
    Block* block = nullptr;  // the block this thread belongs to
    char* stack = nullptr;
    void* fake_stack = nullptr;  // ASan's fake stack of this fiber while switched out
    uint3 tid{};
    int index = 0;  // linear thread index in the block, x fastest
    enum State { runnable, waiting, done } state = runnable;
    // The collective this fiber waits at, its own operands and, once complete, its result.
    Op op = Op::none;
    unsigned mask = 0;  // warp collectives only
    uint64_t value = 0;
    int arg = 0, width = 32;
    uint64_t result = 0;
};

// One block of the launch: its threads and the state of its block-wide collectives.
struct Block {
    uint3 idx{};
    Fiber* fibers = nullptr;  // the launch's, nthreads of them
    unsigned char* shared = nullptr;  // dynamic shared memory, the launch's bytes
    // Counters, so that a barrier of 1024 threads costs O(n), not O(n^2).
    int exited = 0;
    int at_barrier = 0;  // threads waiting at barrier_op, a block-wide collective
    Op barrier_op = Op::none;
};

struct Launch {
    const char* kernel = "?";
    dim3 grid, block;
    size_t shared_bytes = 0;
    int nthreads = 0;  // per block
    int nfibers = 0;  // the threads of the blocks that run together: one block, or the grid
    std::unique_ptr<Fiber[]> fibers;  // never moved: a saved ucontext_t points into itself
    std::unique_ptr<Block[]> blocks;  // one, or the grid's in a cooperative launch
    Fiber* current = nullptr;
    ucontext_t sched_ctx;
    void (*body)(void*) = nullptr;  // runs the kernel once, in the current fiber
    void* body_arg = nullptr;
    const void* sched_stack_bottom = nullptr;
    size_t sched_stack_size = 0;
    // Arrivals at collectives, exits and atomics that changed memory: what a round of the
    // scheduler without any (only __nanosleep) cannot show.
    uint64_t events = 0;
};

inline Launch* g_launch = nullptr;

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void fail(const char* fmt, ...) {
    std::fprintf(stderr, "cuda emulator: ");
    if (const Launch* L = g_launch) {
        std::fprintf(stderr, "kernel %s", L->kernel);
        if (const Fiber* f = L->current)
            std::fprintf(stderr, ", block (%u,%u,%u), thread (%u,%u,%u) [warp %d lane %d]",
                         f->block->idx.x, f->block->idx.y, f->block->idx.z, f->tid.x, f->tid.y,
                         f->tid.z, f->index / 32, f->index % 32);
        std::fprintf(stderr, ": ");
    }
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "\n");
    std::abort();
}

inline Launch& launch_state() {
    if (!g_launch) fail("a CUDA device function was called outside emu::launch");
    return *g_launch;
}

inline Fiber& cur() {
    Launch& L = launch_state();
    if (!L.current) fail("a CUDA device function was called outside a kernel thread");
    return *L.current;
}

// Stack switches, annotated so that ASan knows which stack is live (no false reports).
inline void resume(Launch& L, Fiber& f) {
    L.current = &f;
    void* fake = nullptr;
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(&fake, f.stack, kStackSize);
#endif
    swapcontext(&L.sched_ctx, &f.ctx);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    (void)fake;
    L.current = nullptr;
}

inline void to_scheduler(Launch& L, Fiber& f, bool finished) {
#if defined(__SANITIZE_ADDRESS__)
    // A finished fiber passes no fake-stack slot: ASan then frees its fake stack.
    __sanitizer_start_switch_fiber(finished ? nullptr : &f.fake_stack, L.sched_stack_bottom,
                                   L.sched_stack_size);
#endif
    (void)finished;
    swapcontext(&f.ctx, &L.sched_ctx);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(f.fake_stack, nullptr, nullptr);
#endif
}

// Whether thread `idx` takes part in the collective that fiber w waits at.
inline bool includes(const Fiber& w, int idx) {
    if (is_block_op(w.op)) return true;
    return idx / 32 == w.index / 32 && ((w.mask >> (idx % 32)) & 1u);
}

// The participants of f's collective, in thread order.
inline std::vector<Fiber*> participants(Launch& L, const Fiber& f) {
    std::vector<Fiber*> out;
    for (int i = is_block_op(f.op) ? 0 : f.index & ~31; i < L.nthreads; ++i) {
        if (!is_block_op(f.op) && i >= (f.index & ~31) + 32) break;
        if (includes(f, i)) out.push_back(&f.block->fibers[i]);
    }
    return out;
}

// PTX shfl.sync: the lane whose value `lane` receives, or `lane` itself out of its segment.
inline int shfl_source(Op op, int lane, int b, int width) {
    const int seg = (32 - width) & 31, min_lane = lane & seg;
    const int max_lane = min_lane | (op == Op::shfl_up ? 0 : 31 & ~seg);
    int j = lane;
    bool ok = false;
    if (op == Op::shfl_up) j = lane - (b & 31), ok = j >= max_lane;
    if (op == Op::shfl_down) j = lane + (b & 31), ok = j <= max_lane;
    if (op == Op::shfl_xor) j = lane ^ (b & 31), ok = j <= max_lane;
    if (op == Op::shfl) j = min_lane | (b & 31 & ~seg), ok = j <= max_lane;
    return ok ? j : lane;
}

// Every participant has arrived: the results, then all of them may run on.
inline void complete(Launch& L, const std::vector<Fiber*>& group) {
    const Fiber& first = *group.front();
    uint64_t count = 0, ballot = 0;
    for (const Fiber* p : group) {
        count += p->value != 0;
        if (p->value) ballot |= uint64_t(1) << (p->index % 32);
    }
    const uint64_t n = group.size();
    for (Fiber* p : group) {
        switch (first.op) {
        case Op::syncthreads_count: p->result = count; break;
        case Op::syncthreads_and: case Op::all: p->result = count == n; break;
        case Op::syncthreads_or: case Op::any: p->result = count != 0; break;
        case Op::ballot: p->result = ballot; break;
        case Op::shfl: case Op::shfl_up: case Op::shfl_down: case Op::shfl_xor: {
            const int lane = p->index % 32;
            const int src = shfl_source(p->op, lane, p->arg, p->width);
            if (!((p->mask >> src) & 1u)) {
                L.current = p;
                fail("%s(mask 0x%08x) reads lane %d, which is not in the mask", op_name(p->op),
                     p->mask, src);
            }
            p->result = p->block->fibers[(p->index & ~31) + src].value;
            break;
        }
        default: p->result = 0;
        }
    }
    for (Fiber* p : group) p->op = Op::none, p->state = Fiber::runnable;
}

[[noreturn]] inline void fail_mismatch(const Fiber& f, const Fiber& p) {
    fail("threads meet at different collectives: this one at %s(mask 0x%08x), thread "
         "(%u,%u,%u) [lane %d] at %s(mask 0x%08x)", op_name(f.op), f.mask, p.tid.x, p.tid.y,
         p.tid.z, p.index % 32, op_name(p.op), p.mask);
}

[[noreturn]] inline void fail_exited(const Fiber& f, const Fiber& p) {
    fail("%s: thread (%u,%u,%u) [lane %d] has already exited, so it can never arrive (CUDA "
         "leaves this undefined)", op_name(f.op), p.tid.x, p.tid.y, p.tid.z, p.index % 32);
}

// Fiber f has arrived at a block-wide collective (its op set): wait for every thread.
inline void arrive_block(Launch& L, Fiber& f) {
    Block& B = *f.block;
    if (B.exited)
        for (int i = 0; i < L.nthreads; ++i)
            if (B.fibers[i].state == Fiber::done) fail_exited(f, B.fibers[i]);
    // A lane of this warp waiting at a warp collective that names this one: each waits for
    // the other, neither can go on. Other warps' collectives cannot name this thread.
    for (int i = f.index & ~31; i < std::min(L.nthreads, (f.index & ~31) + 32); ++i) {
        const Fiber& p = B.fibers[i];
        if (p.state == Fiber::waiting && !is_block_op(p.op) && includes(p, f.index))
            fail_mismatch(f, p);
    }
    if (B.at_barrier && f.op != B.barrier_op)
        for (int i = 0; i < L.nthreads; ++i)
            if (B.fibers[i].state == Fiber::waiting && B.fibers[i].op == B.barrier_op)
                fail_mismatch(f, B.fibers[i]);
    B.barrier_op = f.op;
    if (++B.at_barrier < L.nthreads) return to_scheduler(L, f, false);
    B.at_barrier = 0;
    std::vector<Fiber*> all(L.nthreads);
    for (int i = 0; i < L.nthreads; ++i) all[i] = &B.fibers[i];
    complete(L, all);
}

// Fiber f has arrived at a warp collective (its op and mask set): wait for the lanes of mask.
inline void arrive_warp(Launch& L, Fiber& f) {
    const std::vector<Fiber*> group = participants(L, f);
    bool all_here = true;
    for (const Fiber* p : group) {
        if (p == &f) continue;
        if (p->state == Fiber::done) fail_exited(f, *p);
        if (p->state != Fiber::waiting) {
            all_here = false;
        } else if (p->op != f.op || p->mask != f.mask) {
            all_here = false;
            // Each waits for the other at a different collective: neither can ever go on.
            if (includes(*p, f.index)) fail_mismatch(f, *p);
        }
    }
    if (all_here)
        complete(L, group);
    else
        to_scheduler(L, f, false);
}

// The calling thread arrives at a collective; returns its result once all participants have.
inline uint64_t arrive(Op op, unsigned mask, uint64_t value, int arg = 0, int width = 32) {
    Launch& L = launch_state();
    Fiber& f = cur();
    const int lane = f.index % 32, warp_first = f.index & ~31;
    if (!is_block_op(op)) {
        if (!((mask >> lane) & 1u))
            fail("%s(mask 0x%08x): the mask does not include the calling lane", op_name(op),
                 mask);
        for (int k = 0; k < 32; ++k)
            if (((mask >> k) & 1u) && warp_first + k >= L.nthreads)
                fail("%s(mask 0x%08x) names lane %d, which this block of %d threads lacks",
                     op_name(op), mask, k, L.nthreads);
        const bool shfl = op >= Op::shfl && op <= Op::shfl_xor;
        if (shfl && (width < 1 || width > 32 || (width & (width - 1))))
            fail("%s: width %d is not a power of 2 in 1..32", op_name(op), width);
    }
    f.op = op, f.mask = is_block_op(op) ? 0 : mask, f.value = value, f.arg = arg, f.width = width;
    f.state = Fiber::waiting;
    ++L.events;
    if (is_block_op(op))
        arrive_block(L, f);
    else
        arrive_warp(L, f);
    return f.result;
}

[[noreturn]] inline void fail_waits_for_exited(const Fiber& w) {
    fail("exits while thread (%u,%u,%u) [warp %d lane %d] waits for it at %s (CUDA leaves "
         "this undefined)", w.tid.x, w.tid.y, w.tid.z, w.index / 32, w.index % 32,
         op_name(w.op));
}

inline void fiber_main() {
    Launch& L = *g_launch;
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(nullptr, &L.sched_stack_bottom, &L.sched_stack_size);
#endif
    L.body(L.body_arg);
    Fiber& f = *L.current;
    Block& B = *f.block;
    f.state = Fiber::done;
    ++B.exited, ++L.events;
    for (int i = 0; i < L.nthreads && B.at_barrier; ++i)
        if (B.fibers[i].state == Fiber::waiting && is_block_op(B.fibers[i].op))
            fail_waits_for_exited(B.fibers[i]);
    for (int i = f.index & ~31; i < std::min(L.nthreads, (f.index & ~31) + 32); ++i)
        if (B.fibers[i].state == Fiber::waiting && includes(B.fibers[i], f.index))
            fail_waits_for_exited(B.fibers[i]);
    to_scheduler(L, f, true);
    fail("a finished fiber was resumed");  // never: the scheduler skips done fibers
}

// Thread i of block B, ready to start the kernel. A function of its own: getcontext
// "returns twice" in the compiler's eyes, which must not touch the caller's loop variables.
inline void start_fiber(Launch& L, Fiber& f, Block& B, int i) {
    const unsigned bx = L.block.x, by = L.block.y;
#if defined(__SANITIZE_ADDRESS__)
    // The previous block's frames left their poisoned redzones on this stack. Not on a fresh
    // one: that would write the shadow of all of it (512 MiB for 16384 threads).
    if (f.block) ASAN_UNPOISON_MEMORY_REGION(f.stack, kStackSize);
#endif
    f.block = &B;
    f.index = i;
    f.tid = uint3{i % bx, (i / bx) % by, i / (bx * by)};
    f.state = Fiber::runnable, f.op = Op::none, f.fake_stack = nullptr;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStackSize;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
    // ASan's swapcontext interceptor unpoisons the whole target stack when it knows its size,
    // which would erase the redzones of the frames a waiting fiber holds; only makecontext
    // needed the size.
    f.ctx.uc_stack.ss_size = 0;
}

// Block B, ready to start: its threads, and dynamic shared memory of its own, poisoned.
inline void start_block(Launch& L, Block& B, uint3 idx, Fiber* fibers) {
    B.idx = idx, B.fibers = fibers, B.exited = 0, B.at_barrier = 0;
    B.shared = static_cast<unsigned char*>(std::malloc(L.shared_bytes));
    if (!B.shared && L.shared_bytes)
        fail("out of memory for %zu bytes of dynamic shared memory", L.shared_bytes);
    if (B.shared) std::memset(B.shared, kSharedPoison, L.shared_bytes);
    for (int i = 0; i < L.nthreads; ++i) start_fiber(L, fibers[i], B, i);
}

// Runs the started fibers round-robin until all have returned.
inline void run_fibers(Launch& L) {
    int idle_rounds = 0;
    for (bool ran = true; ran;) {
        ran = false;
        const uint64_t events = L.events;
        for (int i = 0; i < L.nfibers; ++i)
            if (L.fibers[i].state == Fiber::runnable) resume(L, L.fibers[i]), ran = true;
        // Every other way back to the scheduler is an event: these fibers only spun.
        if (!ran || L.events != events) {
            idle_rounds = 0;
        } else if (++idle_rounds == kSpinRounds) {
            int i = 0;
            while (L.fibers[i].state != Fiber::runnable) ++i;
            L.current = &L.fibers[i];
            fail("a spin wait that never ends: for %d scheduler rounds every running thread "
                 "only called __nanosleep (a grid barrier in a launch that is not cooperative, "
                 "where the other blocks run only after this one, or one that some block never "
                 "reaches?)", kSpinRounds);
        }
    }
    for (int i = 0; i < L.nfibers; ++i) {
        Fiber& w = L.fibers[i];
        if (w.state != Fiber::waiting) continue;
        L.current = &w;
        for (const Fiber* p : participants(L, w))
            if (p->state == Fiber::waiting && (p->op != w.op || p->mask != w.mask))
                fail("deadlock: waits at %s(mask 0x%08x) for thread (%u,%u,%u) [lane %d], "
                     "which waits at %s(mask 0x%08x)", op_name(w.op), w.mask, p->tid.x,
                     p->tid.y, p->tid.z, p->index % 32, op_name(p->op), p->mask);
        fail("deadlock: waits at %s(mask 0x%08x) forever", op_name(w.op), w.mask);
    }
}

// Runs the grid: block by block, or all blocks together when `cooperative`.
inline void run_launch(Launch& L, size_t dynamic_smem, bool cooperative) {
    const char* name = L.kernel;
    const dim3 grid = L.grid, block = L.block;
    const uint64_t nthreads = uint64_t(block.x) * block.y * block.z;
    if (nthreads == 0 || nthreads > 1024 || block.z > 64)
        fail("kernel %s: block (%u,%u,%u) is not 1..1024 threads with z <= 64", name, block.x,
             block.y, block.z);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535)
        fail("kernel %s: invalid grid (%u,%u,%u)", name, grid.x, grid.y, grid.z);
    if (dynamic_smem > kMaxDynamicShared)
        fail("kernel %s: %zu bytes of dynamic shared memory, more than a block can have (%zu)",
             name, dynamic_smem, kMaxDynamicShared);
    const uint64_t nblocks = uint64_t(grid.x) * grid.y * grid.z;
    // nblocks first: the product may overflow.
    if (cooperative && (nblocks > kMaxCooperativeThreads ||
                        nblocks * nthreads > kMaxCooperativeThreads))
        fail("kernel %s: a cooperative launch of %llu blocks of %llu threads; the emulator runs "
             "at most %llu threads at once", name, (unsigned long long)nblocks,
             (unsigned long long)nthreads, (unsigned long long)kMaxCooperativeThreads);
    L.shared_bytes = dynamic_smem;
    L.nthreads = int(nthreads);
    L.nfibers = int(cooperative ? nblocks * nthreads : nthreads);
    L.fibers.reset(new Fiber[L.nfibers]);
    L.blocks.reset(new Block[cooperative ? nblocks : 1]);
    for (int i = 0; i < L.nfibers; ++i)
        if (!(L.fibers[i].stack = static_cast<char*>(std::malloc(kStackSize))))
            fail("kernel %s: out of memory for the fiber stacks", name);
    std::memset(&L.sched_ctx, 0, sizeof L.sched_ctx);  // no uc_stack for ASan to clear
    g_launch = &L;
    uint64_t b = 0;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x, ++b) {
                if (!cooperative) {
                    start_block(L, L.blocks[0], uint3{x, y, z}, &L.fibers[0]);
                    run_fibers(L);
                    std::free(L.blocks[0].shared);
                } else {
                    start_block(L, L.blocks[b], uint3{x, y, z}, &L.fibers[b * nthreads]);
                }
            }
    if (cooperative) {
        run_fibers(L);
        for (uint64_t i = 0; i < nblocks; ++i) std::free(L.blocks[i].shared);
    }
    g_launch = nullptr;
    for (int i = 0; i < L.nfibers; ++i) std::free(L.fibers[i].stack);
}

// A cooperative launch runs all blocks at once (cudaLaunchCooperativeKernel).
template <class... P, class... A>
void launch_named(const char* name, void (*kernel)(P...), dim3 grid, dim3 block,
                  size_t dynamic_smem, bool cooperative, A&&... args) {
    using Body = std::pair<void (*)(P...), std::tuple<std::decay_t<P>...>>;
    // Each thread calls the kernel with its own copies of the arguments, as on a GPU.
    Body body{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)};
    if (g_launch) fail("emu::launch of %s inside a kernel (no dynamic parallelism)", name);
    Launch L;
    L.kernel = name, L.grid = grid, L.block = block;
    L.body = [](void* p) {
        Body& b = *static_cast<Body*>(p);
        std::apply(b.first, b.second);
    };
    L.body_arg = &body;
    run_launch(L, dynamic_smem, cooperative);
}

template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t dynamic_smem, A&&... args) {
    launch_named("(unnamed)", kernel, grid, block, dynamic_smem, false,
                 std::forward<A>(args)...);
}

// __nanosleep: the calling thread lets the others run (it stays runnable).
inline void spin() {
    Launch& L = launch_state();
    to_scheduler(L, cur(), false);
}

inline unsigned char* dynamic_shared() { return cur().block->shared; }

// An atomic that changed the bits at p is progress a spinning thread may be waiting for.
template <class T>
T atomic_done(const T* p, T old) {
    if (std::memcmp(p, &old, sizeof old) != 0) ++launch_state().events;
    return old;
}

template <class T>
uint64_t to_bits(T v) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                  "shuffles take trivially copyable values of up to 8 bytes");
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof v);
    return u;
}

template <class T>
T from_bits(uint64_t u) {
    T v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}

template <class To, class From>
To bit_cast(From v) {
    static_assert(sizeof(To) == sizeof(From));
    To t;
    std::memcpy(&t, &v, sizeof t);
    return t;
}

// CUDA's float -> integer conversions saturate, and NaN gives 0 (C++ leaves both undefined).
template <class I>
I saturate(float v) {
    if (std::isnan(v)) return 0;
    if (v <= float(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    if (v >= float(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return I(v);
}

}  // namespace emu

// ---- the CUDA spelling ----------------------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline
#define __noinline__  // empty: glibc and libstdc++ spell __attribute__((__noinline__))
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static  // see the top of this file
// __restrict__ needs nothing: g++ knows it.
// Before the kernels' headers: common.cuh defines the GPU's only where this is not defined.
#define FB_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::emu::dynamic_shared())

#define threadIdx (static_cast<const uint3&>(::emu::cur().tid))
#define blockIdx (static_cast<const uint3&>(::emu::cur().block->idx))
#define blockDim (static_cast<const dim3&>(::emu::launch_state().block))
#define gridDim (static_cast<const dim3&>(::emu::launch_state().grid))
static constexpr int warpSize = 32;

inline void __syncthreads() { emu::arrive(emu::Op::syncthreads, 0, 0); }
inline int __syncthreads_count(int p) {
    return int(emu::arrive(emu::Op::syncthreads_count, 0, p != 0));
}
inline int __syncthreads_and(int p) {
    return int(emu::arrive(emu::Op::syncthreads_and, 0, p != 0));
}
inline int __syncthreads_or(int p) { return int(emu::arrive(emu::Op::syncthreads_or, 0, p != 0)); }
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) { emu::arrive(emu::Op::syncwarp, mask, 0); }
// Spin loops must call it: the emulator switches threads only at collectives and here, so a
// loop without either never lets the thread it waits for run (the Python side's timeout ends it).
inline void __nanosleep(unsigned) { emu::spin(); }
inline unsigned __ballot_sync(unsigned mask, int p) {
    return unsigned(emu::arrive(emu::Op::ballot, mask, p != 0));
}
inline int __any_sync(unsigned mask, int p) { return int(emu::arrive(emu::Op::any, mask, p != 0)); }
inline int __all_sync(unsigned mask, int p) { return int(emu::arrive(emu::Op::all, mask, p != 0)); }

// Any trivially copyable value of up to 8 bytes travels as its bits.
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
    const uint64_t r = emu::arrive(emu::Op::shfl, mask, emu::to_bits(var), src_lane, width);
    return emu::from_bits<T>(r);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    const uint64_t r = emu::arrive(emu::Op::shfl_up, mask, emu::to_bits(var), delta, width);
    return emu::from_bits<T>(r);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    const uint64_t r = emu::arrive(emu::Op::shfl_down, mask, emu::to_bits(var), delta, width);
    return emu::from_bits<T>(r);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
    const uint64_t r = emu::arrive(emu::Op::shfl_xor, mask, emu::to_bits(var), lane_mask, width);
    return emu::from_bits<T>(r);
}

// Atomics: one OS thread runs every fiber, and a fiber is never interrupted between the read
// and the write, so plain read-modify-writes are atomic here. Each returns the old value.
#define EMU_ATOMIC(NAME, T, EXPR) \
    inline T NAME(T* p, T v) { const T old = *p; *p = (EXPR); return emu::atomic_done(p, old); }
#define EMU_ATOMIC_ADD_EXCH(T) \
    EMU_ATOMIC(atomicAdd, T, old + v) EMU_ATOMIC(atomicExch, T, v)
EMU_ATOMIC_ADD_EXCH(int)
EMU_ATOMIC_ADD_EXCH(unsigned)
EMU_ATOMIC_ADD_EXCH(unsigned long long)
EMU_ATOMIC_ADD_EXCH(float)
EMU_ATOMIC(atomicAdd, double, old + v)
EMU_ATOMIC(atomicSub, int, old - v)
EMU_ATOMIC(atomicSub, unsigned, old - v)
#define EMU_ATOMIC_INTEGER(T)                                                         \
    EMU_ATOMIC(atomicOr, T, old | v) EMU_ATOMIC(atomicAnd, T, old & v)                \
    EMU_ATOMIC(atomicXor, T, old ^ v) EMU_ATOMIC(atomicMax, T, old < v ? v : old)     \
    EMU_ATOMIC(atomicMin, T, v < old ? v : old)
EMU_ATOMIC_INTEGER(int)
EMU_ATOMIC_INTEGER(unsigned)
EMU_ATOMIC_INTEGER(long long)
EMU_ATOMIC_INTEGER(unsigned long long)
#undef EMU_ATOMIC_INTEGER
#undef EMU_ATOMIC_ADD_EXCH
#undef EMU_ATOMIC
#define EMU_ATOMIC_CAS(T) \
    inline T atomicCAS(T* p, T compare, T v) {               \
        const T old = *p;                                    \
        if (old == compare) *p = v;                          \
        return emu::atomic_done(p, old);                     \
    }
EMU_ATOMIC_CAS(int)
EMU_ATOMIC_CAS(unsigned)
EMU_ATOMIC_CAS(unsigned long long)
#undef EMU_ATOMIC_CAS
inline unsigned atomicInc(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = old >= v ? 0 : old + 1;
    return emu::atomic_done(p, old);
}
inline unsigned atomicDec(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = (old == 0 || old > v) ? v : old - 1;
    return emu::atomic_done(p, old);
}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

// ---- intrinsics -----------------------------------------------------------------------------

inline unsigned __float_as_uint(float x) { return emu::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return emu::bit_cast<float>(x); }
inline int __float_as_int(float x) { return emu::bit_cast<int>(x); }
inline float __int_as_float(int x) { return emu::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return emu::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return emu::bit_cast<double>(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
// __builtin_clz(0) is undefined; CUDA's __clz(0) is 32.
inline int __clz(int x) { return x ? __builtin_clz(unsigned(x)) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline unsigned long long __brevll(unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i) r |= ((x >> i) & 1ull) << (63 - i);
    return r;
}
inline unsigned __brev(unsigned x) { return unsigned(__brevll(x) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline int __mulhi(int a, int b) { return int((int64_t(a) * b) >> 32); }
namespace emu {
__extension__ typedef unsigned __int128 u128;  // __extension__: no -Wpedantic warning
__extension__ typedef __int128 i128;
}  // namespace emu
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)((emu::u128(a) * b) >> 64);
}
inline long long __mul64hi(long long a, long long b) {
    return (long long)((emu::i128(a) * b) >> 64);
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const uint64_t v = (uint64_t(y) << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= unsigned((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
}
template <class T>
T __ldg(const T* p) { return *p; }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
// glibc declares __expf and friends as aliases of expf; these definitions agree with them.
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline int __float2int_rz(float x) { return emu::saturate<int>(x); }
inline int __float2int_rn(float x) { return emu::saturate<int>(nearbyintf(x)); }
inline int __float2int_rd(float x) { return emu::saturate<int>(floorf(x)); }
inline int __float2int_ru(float x) { return emu::saturate<int>(ceilf(x)); }
inline unsigned __float2uint_rz(float x) { return emu::saturate<unsigned>(x); }
inline unsigned __float2uint_rn(float x) { return emu::saturate<unsigned>(nearbyintf(x)); }
inline float __int2float_rn(int x) { return float(x); }
inline float __uint2float_rn(unsigned x) { return float(x); }

// CUDA's global min and max: exact overloads, preferred over std::min's template where a
// kernel says `using namespace std`. Mixed signedness goes unsigned, as in CUDA.
#define EMU_MIN_MAX(A, B, R)                                          \
    inline R min(A a, B b) {                                          \
        const R x = static_cast<R>(a), y = static_cast<R>(b);         \
        return y < x ? y : x;                                         \
    }                                                                 \
    inline R max(A a, B b) {                                          \
        const R x = static_cast<R>(a), y = static_cast<R>(b);         \
        return x < y ? y : x;                                         \
    }
EMU_MIN_MAX(int, int, int)
EMU_MIN_MAX(unsigned, unsigned, unsigned)
EMU_MIN_MAX(int, unsigned, unsigned)
EMU_MIN_MAX(unsigned, int, unsigned)
EMU_MIN_MAX(long, long, long)
EMU_MIN_MAX(unsigned long, unsigned long, unsigned long)
EMU_MIN_MAX(long long, long long, long long)
EMU_MIN_MAX(unsigned long long, unsigned long long, unsigned long long)
EMU_MIN_MAX(long long, unsigned long long, unsigned long long)
EMU_MIN_MAX(unsigned long long, long long, unsigned long long)
#undef EMU_MIN_MAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// ---- vector types, with CUDA's alignments ---------------------------------------------------

#define EMU_VEC2(T, N, A) \
    struct alignas(A) N##2 { T x, y; }; \
    inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define EMU_VEC3(T, N) \
    inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define EMU_VEC4(T, N, A) \
    struct alignas(A) N##4 { T x, y, z, w; }; \
    inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
struct float3 { float x, y, z; };
struct int3 { int x, y, z; };
EMU_VEC2(float, float, 8) EMU_VEC3(float, float) EMU_VEC4(float, float, 16)
EMU_VEC2(int, int, 8) EMU_VEC3(int, int) EMU_VEC4(int, int, 16)
EMU_VEC2(unsigned, uint, 8) EMU_VEC3(unsigned, uint) EMU_VEC4(unsigned, uint, 16)
EMU_VEC2(double, double, 16)
EMU_VEC2(long long, longlong, 16)
EMU_VEC2(unsigned long long, ulonglong, 16)
EMU_VEC4(unsigned char, uchar, 4)
EMU_VEC4(signed char, char, 4)
#undef EMU_VEC2
#undef EMU_VEC3
#undef EMU_VEC4
