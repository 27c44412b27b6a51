// Buffers the vector kernels stream, on 64-byte boundaries (a cache line, one AVX-512 vector),
// as oneDNN allocates its own. malloc gives 16 bytes: a 64-byte load from 16 bytes past a line
// reads two lines (the GRU's two-pass step at hidden 512 ran much slower with its packed
// weights so placed: docs/performance.md, "Measurements behind the code").
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace fusebridge {

constexpr std::size_t kAlignBytes = 64;

template <class T>
struct CacheAligned {
    using value_type = T;
    CacheAligned() = default;
    template <class U>
    CacheAligned(const CacheAligned<U>&) {}
    T* allocate(std::size_t n) {
        return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlignBytes)));
    }
    void deallocate(T* p, std::size_t) noexcept {
        ::operator delete(p, std::align_val_t(kAlignBytes));
    }
    friend bool operator==(const CacheAligned&, const CacheAligned&) { return true; }
    friend bool operator!=(const CacheAligned&, const CacheAligned&) { return false; }
};

template <class T>
using AlignedVector = std::vector<T, CacheAligned<T>>;

// Work memory kept between calls: v grown to at least n elements (never shrunk), its data.
template <class T, class Alloc>
T* at_least(std::vector<T, Alloc>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

}  // namespace fusebridge
