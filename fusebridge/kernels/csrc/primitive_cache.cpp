#include "primitive_cache.hpp"

#include <cstdlib>
#include <future>
#include <list>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace fusebridge {

namespace {

constexpr int64_t kDefaultCapacity = 1024;

// $FUSEBRIDGE_PRIMITIVE_CACHE_CAPACITY when it is a whole number >= 0, else the default
// (fusebridge.kernels warns about an unreadable value; an op library alone cannot).
int64_t capacity_from_env() {
    const char* env = std::getenv("FUSEBRIDGE_PRIMITIVE_CACHE_CAPACITY");
    if (env == nullptr || *env == '\0') return kDefaultCapacity;
    char* end = nullptr;
    const long long n = std::strtoll(env, &end, 10);
    return *end == '\0' && n >= 0 ? int64_t(n) : kDefaultCapacity;
}

using Built = std::shared_ptr<const void>;

class Cache {
   public:
    Built get(const std::string& key, const std::function<Built()>& build) {
        std::shared_future<Built> ready;
        std::promise<Built> promise;
        uint64_t mine = 0;  // the entry this thread builds, or 0
        {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = index_.find(key);
            if (it != index_.end()) {
                ++hits_;
                lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
                ready = it->second->ready;
            } else {
                ++misses_;
                if (capacity_ == 0) return build();
                ready = promise.get_future().share();
                mine = ++entries_made_;
                lru_.push_front({key, ready, mine});
                index_.emplace(key, lru_.begin());
                evict();
            }
        }
        if (mine == 0) return ready.get();  // built, or being built by another thread
        try {
            promise.set_value(build());
        } catch (...) {
            promise.set_exception(std::current_exception());
            std::lock_guard<std::mutex> lock(mu_);
            auto it = index_.find(key);
            if (it != index_.end() && it->second->id == mine) {  // not evicted and replaced
                lru_.erase(it->second);
                index_.erase(it);
            }
        }
        return ready.get();
    }

    CacheStats stats() {
        std::lock_guard<std::mutex> lock(mu_);
        return {capacity_, int64_t(index_.size()), hits_, misses_, evictions_};
    }

    void set_capacity(int64_t capacity) {
        if (capacity < 0)
            throw std::invalid_argument("set_cache_capacity: capacity must be an integer >= 0, got " +
                                        std::to_string(capacity));
        std::lock_guard<std::mutex> lock(mu_);
        capacity_ = capacity;
        evict();
    }

    void clear() {
        std::lock_guard<std::mutex> lock(mu_);
        lru_.clear();
        index_.clear();
        hits_ = misses_ = evictions_ = 0;
    }

   private:
    void evict() {
        while (int64_t(index_.size()) > capacity_) {
            index_.erase(lru_.back().key);
            lru_.pop_back();
            ++evictions_;
        }
    }

    struct Entry {
        std::string key;
        std::shared_future<Built> ready;
        uint64_t id;
    };
    std::mutex mu_;
    uint64_t entries_made_ = 0;
    std::list<Entry> lru_;
    std::unordered_map<std::string, std::list<Entry>::iterator> index_;
    int64_t capacity_ = capacity_from_env(), hits_ = 0, misses_ = 0, evictions_ = 0;
};

// Never destroyed: op libraries and Python may still ask for primitives while the process
// exits, after this library's static destructors would have run.
Cache& cache() {
    static Cache* c = new Cache;
    return *c;
}

}  // namespace

Built cached_primitive(const std::string& key, const std::function<Built()>& build) {
    return cache().get(key, build);
}
CacheStats cache_stats() { return cache().stats(); }
void set_cache_capacity(int64_t capacity) { cache().set_capacity(capacity); }
void clear_cache() { cache().clear(); }

}  // namespace fusebridge
