// The kernels' threads: one pool for the process, whose workers claim parts of a job; the
// calling thread never waits for a worker that has not started.
//
// Why not OpenMP (which the kernels used before): a parallel region ends at a barrier that every
// thread of the team must reach, so one worker the OS has not scheduled yet holds the whole call.
// On a VM a worker asleep for a while can take far longer to wake than a call takes (the host
// parks its vCPU), and the first call after idle waited for it (docs/performance.md,
// "Measurements behind the code"). Another runtime's spinning pool on the same cores (ONNX
// Runtime spins after a run) stalls the barriers the same way. Here the
// caller works through the parts itself while the workers wake, and a worker that arrives late
// finds nothing left (as in Eigen's and ONNX Runtime's pools). Which thread computes a part
// never changes a bit of it: kernels cut their work by shapes.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <utility>

namespace fusebridge {

namespace detail {
using PartFn = void (*)(const void* ctx, int64_t part, int slot);
void run_parts(int64_t parts, int threads, PartFn fn, const void* ctx);
}  // namespace detail

// Calls fn(part, slot) once for every part in [0, parts), on at most `threads` threads: the
// caller (slot 0) and pool workers (slots 1 .. threads-1), each taking the next part nobody has
// taken. Returns when all are done. Runs on the caller alone when threads or parts are <= 1,
// inside another parallel_for (nesting), or while another thread's job holds the pool (two
// Python threads in kernels at once share the cores instead of oversubscribing them).
//
// An exception thrown by a part (std::bad_alloc from a scratch buffer, a check) is caught on the
// thread that ran it, the parts not started yet are skipped, and the first one caught is thrown
// again on the calling thread once every started part has returned: no exception leaves a pool
// worker (which would end the process), and the caller's own handlers (the Python binding's
// translator, the framework glues' catch) see it as if the loop had run on their thread.
template <class F>
void parallel_for(int64_t parts, int threads, const F& fn) {
    struct Job {
        explicit Job(const F& f) : fn(f) {}
        const F& fn;
        mutable std::atomic<bool> failed{false};
        mutable std::exception_ptr error;  // written once, by the part that set `failed` first
    } job(fn);
    detail::run_parts(
        parts, threads,
        [](const void* ctx, int64_t part, int slot) noexcept {
            const Job& j = *static_cast<const Job*>(ctx);
            if (j.failed.load(std::memory_order_relaxed)) return;
            try {
                j.fn(part, slot);
            } catch (...) {
                if (!j.failed.exchange(true)) j.error = std::current_exception();
            }
        },
        &job);
    // run_parts returned after every part's end (a release/acquire pair): `error` is visible.
    if (job.error) std::rethrow_exception(job.error);
}

// [begin, end) of part p of `items` cut into `parts` contiguous parts of near-equal size.
inline std::pair<int64_t, int64_t> part_range(int64_t items, int64_t p, int64_t parts) {
    return {items * p / parts, items * (p + 1) / parts};
}

// fn(begin, end, slot) over [0, items) in min(threads, items) contiguous ranges, as OpenMP's
// static schedule cuts a loop: a thread keeps neighbouring items (and their data) together.
template <class F>
void parallel_ranges(int64_t items, int threads, const F& fn) {
    const int64_t parts = items < threads ? items : threads;
    if (parts <= 1) {
        if (items > 0) fn(int64_t(0), items, 0);
        return;
    }
    parallel_for(parts, int(parts), [&](int64_t p, int slot) {
        const auto [begin, end] = part_range(items, p, parts);
        fn(begin, end, slot);
    });
}

// Worker threads started so far (each starts at the first job that wants it), each named
// kWorkerName (at most 15 characters: Linux's limit).
int pool_workers();
inline constexpr const char* kWorkerName = "fusebridge-pool";

}  // namespace fusebridge
