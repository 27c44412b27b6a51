// Argument checks shared by the compiled kernels. The Python faces check every argument first;
// these hold the kernels to the same rules when _C is called directly, so that no size derived
// from an argument overflows and no offset or length makes a kernel read outside a buffer.
// A failed check throws std::invalid_argument, which module.cpp turns into
// fusebridge.errors.ArgumentError.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fusebridge {

[[noreturn]] inline void fail(const std::string& op, const std::string& what) {
    throw std::invalid_argument(op + ": " + what);
}

// a * b for sizes (a, b >= 0), or an error naming `what` when the product overflows int64.
inline int64_t mul_size(int64_t a, int64_t b, const char* op, const char* what) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
        fail(op, std::string(what) + " (" + std::to_string(a) + " * " + std::to_string(b) +
                     ") is negative or overflows int64");
    return r;
}

// The number of elements of `dims`, every one >= 0, without overflow.
inline int64_t numel_of(const std::vector<int64_t>& dims, const char* op, const char* what) {
    int64_t n = 1;
    for (int64_t d : dims) {
        if (d < 0) fail(op, std::string(what) + " has a negative dimension " + std::to_string(d));
        n = mul_size(n, d, op, what);
    }
    return n;
}

// Paddle's level-1 LoD: offsets [size] run from 0 to `rows`, nondecreasing. Compared entry by
// entry, never subtracted, so extreme values cannot wrap into a valid-looking sentence; once
// this holds, every offset lies in [0, rows] and every difference is a sentence length.
inline void check_offsets(const int64_t* offsets, int64_t size, int64_t rows, const char* op) {
    if (size < 1) fail(op, "offsets must have N+1 >= 1 entries, got none");
    if (offsets[0] != 0) fail(op, "offsets must start at 0, got " + std::to_string(offsets[0]));
    for (int64_t s = 1; s < size; ++s)
        if (offsets[s] < offsets[s - 1])
            fail(op, "offsets must be nondecreasing, got " + std::to_string(offsets[s - 1]) +
                         " then " + std::to_string(offsets[s]) + " at index " +
                         std::to_string(s - 1));
    if (offsets[size - 1] != rows)
        fail(op, "offsets must end at the number of rows (" + std::to_string(rows) + "), got " +
                     std::to_string(offsets[size - 1]));
}

// Sentence lengths, each in [0, steps] (steps < 0: no padded length bounds them); returns
// their sum, which must fit int64.
inline int64_t check_lengths(const int64_t* lens, int64_t n, int64_t steps, const char* op) {
    int64_t total = 0;
    for (int64_t s = 0; s < n; ++s) {
        const int64_t len = lens[s];
        if (len < 0 || (steps >= 0 && len > steps))
            fail(op, "sentence " + std::to_string(s) + " has length " + std::to_string(len) +
                         (steps >= 0 ? ", outside [0, " + std::to_string(steps) + "]"
                                     : ", below 0"));
        if (__builtin_add_overflow(total, len, &total))
            fail(op, "the sentence lengths sum past int64");
    }
    return total;
}

}  // namespace fusebridge
