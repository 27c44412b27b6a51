// The process's one cache of primitives, keyed by their descriptors (oneDNN's primitive cache,
// src/common/primitive_cache.hpp): the key holds every field a primitive is built from and never
// the data it runs on. It lives in libfusebridge_kernels.so, so fusebridge.kernels._C and the
// framework op libraries (which load the same library) share it. LRU; capacity 0 turns caching
// off; a primitive several threads ask for at once is built once, by the first, while the
// others wait for it; a build that throws leaves nothing behind.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace fusebridge {

struct CacheStats {
    int64_t capacity, size, hits, misses, evictions;
};

std::shared_ptr<const void> cached_primitive(const std::string& key,
                                             const std::function<std::shared_ptr<const void>()>& build);
CacheStats cache_stats();
void set_cache_capacity(int64_t capacity);  // >= 0; evicts down to it
void clear_cache();                         // the entries and the counters

namespace detail {
template <class T>
void append_field(std::string& key, const T& v) {
    if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
        append_field(key, int64_t(v.size()));
        key.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
    } else {
        static_assert(std::is_trivially_copyable_v<T>, "a descriptor field must be plain data");
        key.append(reinterpret_cast<const char*>(&v), sizeof(T));
    }
}
}  // namespace detail

// The primitive of type Prim built from `desc` (Prim(desc)), from the cache or built now.
template <class Prim, class Desc>
std::shared_ptr<const Prim> primitive(const Desc& desc) {
    // The type's name first: two primitive types built from the same descriptor differ.
    std::string key = typeid(Prim).name();
    key.push_back('\0');
    Desc::for_each_field([&](const char*, auto member) { detail::append_field(key, desc.*member); });
    return std::static_pointer_cast<const Prim>(
        cached_primitive(key, [&] { return std::make_shared<const Prim>(desc); }));
}

}  // namespace fusebridge
