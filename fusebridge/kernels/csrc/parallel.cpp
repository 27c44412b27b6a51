#include "parallel.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <mutex>
#include <system_error>
#include <thread>

namespace fusebridge {

namespace {

// The state word: the job's generation (high 32 bits) and its next unclaimed part (low 32
// bits). One word, so that a claim (compare-exchange) fails once the job it read is over.
constexpr int64_t kMaxParts = (int64_t(1) << 31) - 1;
constexpr uint64_t kPartMask = 0xFFFFFFFFu;
// How long a worker keeps looking for the next job before it sleeps: long enough to span the
// gaps inside a model's run (an ONNX Runtime partition between two GRUs, a GRU's steps), short
// enough to leave the core to others soon after (ONNX Runtime's and libgomp's workers spin
// longer).
constexpr auto kSpin = std::chrono::microseconds(1000);

thread_local bool t_in_job = false;  // a pool worker, or a caller inside its own job

inline void relax() { __builtin_ia32_pause(); }

uint32_t generation(uint64_t state) { return uint32_t(state >> 32); }

// Every part on the calling thread, in order.
void in_turn(int64_t parts, detail::PartFn fn, const void* ctx) {
    for (int64_t p = 0; p < parts; ++p) fn(ctx, p, 0);
}

// Sleeping and waking on a 32-bit word without a lock (Linux futex): the caller never blocks on
// a mutex a waking worker holds, and a wake with nobody asleep costs one short system call.
void sleep_while(std::atomic<uint32_t>& word, uint32_t value) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, value, nullptr,
            nullptr, 0);
}
void wake_all(std::atomic<uint32_t>& word) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
}

class Pool {
   public:
    void run(int64_t parts, int threads, detail::PartFn fn, const void* ctx) {
        std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
        if (!job.owns_lock()) return in_turn(parts, fn, ctx);
        const uint32_t gen = generation(state_.load(std::memory_order_relaxed)) + 1;
        threads = 1 + start_workers(int(std::min<int64_t>(threads, parts)) - 1, gen - 1);
        if (threads <= 1) return in_turn(parts, fn, ctx);
        done_.store(0, std::memory_order_relaxed);
        fn_.store(fn, std::memory_order_relaxed);
        ctx_.store(ctx, std::memory_order_relaxed);
        parts_.store(parts, std::memory_order_relaxed);
        threads_.store(threads, std::memory_order_relaxed);
        state_.store(uint64_t(gen) << 32);
        published_.store(gen);  // seq_cst, then sleepers_: against a worker going to sleep
        // One wake until a worker is up: on a VM, waking a parked vCPU costs tens of
        // microseconds a call, and the worker may take milliseconds to come.
        if (sleepers_.load() > 0 && !wake_sent_.exchange(true)) {
            caller_cpu_.store(sched_getcpu(), std::memory_order_relaxed);
            wake_all(published_);
        }
        t_in_job = true;
        work(gen, 0);
        t_in_job = false;
        // Every part is claimed: wait for those that other threads are still computing.
        for (int spins = 0; done_.load(std::memory_order_acquire) < parts; ++spins) {
            if (spins < 4096) relax();
            else std::this_thread::yield();
        }
    }

    int workers() const { return started_.load(); }

   private:
    // Takes the parts of job `gen` nobody has taken, until none is left or the job is over.
    void work(uint32_t gen, int slot) {
        for (;;) {
            uint64_t state = state_.load(std::memory_order_acquire);
            const int64_t part = int64_t(state & kPartMask);
            // Read before the claim: a newer job's values fail the claim below.
            if (generation(state) != gen || part >= parts_.load(std::memory_order_relaxed) ||
                slot >= threads_.load(std::memory_order_relaxed))
                return;
            if (!state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire,
                                              std::memory_order_relaxed))
                continue;
            // Claimed: job `gen` cannot end before this part does, so its fn is still here.
            fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), part,
                                                slot);
            done_.fetch_add(1, std::memory_order_release);
        }
    }

    void worker(int slot, uint32_t seen) {
        t_in_job = true;  // a kernel called by a part runs on this thread alone
        for (;;) {
            uint32_t gen = seen;
            const auto until = std::chrono::steady_clock::now() + kSpin;
            for (int n = 1; (gen = generation(state_.load(std::memory_order_acquire))) == seen;
                 ++n) {
                // A yield now and then: a worker the scheduler woke on its caller's core (as
                // this VM did for most wakes after idle) must not spin the caller off it.
                if (n % 16 == 0) std::this_thread::yield();
                else relax();
                if (n % 256 == 0 && std::chrono::steady_clock::now() > until) break;
            }
            if (gen == seen) {
                sleepers_.fetch_add(1);  // seq_cst, then published_: see run()
                while (published_.load() == seen) sleep_while(published_, seen);
                wake_sent_.store(false);
                sleepers_.fetch_sub(1);
                leave_callers_core();
                gen = generation(state_.load(std::memory_order_acquire));
            }
            seen = gen;
            work(gen, slot);
        }
    }

    // The scheduler may wake a worker on the core of the caller that woke it (this VM did so for
    // most wakes after idle): both then take turns on one core while another sits idle. The
    // worker moves itself off that core (allowed everywhere else for a moment, then everywhere
    // again: the move stays, the user's affinity too).
    void leave_callers_core() {
        const int here = sched_getcpu(), caller = caller_cpu_.load(std::memory_order_relaxed);
        if (here < 0 || here != caller) return;
        cpu_set_t allowed, elsewhere;
        if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
        elsewhere = allowed;
        CPU_CLR(here, &elsewhere);
        if (CPU_COUNT(&elsewhere) == 0) return;
        if (sched_setaffinity(0, sizeof(elsewhere), &elsewhere) == 0)
            sched_setaffinity(0, sizeof(allowed), &allowed);
    }

    // Starts workers up to `wanted` (their first job: the one after `gen`); returns how many
    // there are. A thread the system refuses leaves the work to those that exist.
    int start_workers(int wanted, uint32_t gen) {
        if (started_.load() >= wanted) return wanted;
        std::lock_guard<std::mutex> lock(start_mu_);
        while (started_.load() < wanted) {
            try {
                std::thread worker(&Pool::worker, this, started_.load() + 1, gen);
                // Named here, before anyone counts it: a profiler, `top -H` or a test reading
                // /proc/self/task sees the pool.
                pthread_setname_np(worker.native_handle(), kWorkerName);
                worker.detach();
            } catch (const std::system_error&) {
                break;
            }
            started_.fetch_add(1);
        }
        return std::min(wanted, started_.load());
    }

    std::atomic<uint64_t> state_{0};
    std::atomic<uint32_t> published_{0};  // the generation, as a word to sleep on
    std::atomic<detail::PartFn> fn_{nullptr};
    std::atomic<const void*> ctx_{nullptr};
    std::atomic<int64_t> parts_{0};
    std::atomic<int> threads_{0};
    std::atomic<int64_t> done_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> wake_sent_{false};  // a wake is on its way to the sleepers
    std::atomic<int> caller_cpu_{-1};     // where the caller that last woke sleepers ran
    std::atomic<int> started_{0};
    std::mutex job_mu_;    // one job at a time
    std::mutex start_mu_;  // one thread starting workers at a time
};

// Never destroyed: its detached workers wait on it until the process ends. A forked child
// (whose only thread is the one that forked) gets a new pool: the parent's workers are not in it.
std::atomic<Pool*> g_pool{nullptr};

Pool& pool() {
    static const bool once = [] {
        g_pool.store(new Pool);
        pthread_atfork(nullptr, nullptr, [] { g_pool.store(new Pool); });
        return true;
    }();
    (void)once;
    return *g_pool.load();
}

}  // namespace

namespace detail {
void run_parts(int64_t parts, int threads, PartFn fn, const void* ctx) {
    if (threads <= 1 || parts <= 1 || t_in_job || parts > kMaxParts) return in_turn(parts, fn, ctx);
    pool().run(parts, threads, fn, ctx);
}
}  // namespace detail

int pool_workers() { return pool().workers(); }

}  // namespace fusebridge
