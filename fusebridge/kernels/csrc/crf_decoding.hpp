// Viterbi decoding of a linear-chain CRF over LoD sentences: Paddle's crf_decoding op, with its
// float32 arithmetic and its tie-breaking (the first maximum wins, see crf_decoding.cpp).
#pragma once
#include <cstdint>

namespace fusebridge {

// Buffers with their sizes: crf_decoding checks that they agree before touching any of them.
struct CrfDecodingArgs {
    const float* emission;    // [words, tags]
    int64_t words, tags;
    const float* transition;  // [tags + 2, tags]: start row, end row, then w[from][to]
    int64_t transition_rows, transition_cols;
    const int64_t* offsets;   // [sentences + 1], Paddle's level-1 LoD
    int64_t offsets_size;
    const int64_t* label;     // [words] or null
    int64_t label_size;
    int64_t* path;            // [words]: the best tag of each word, or with a label
    int64_t path_size;        // 1 where it equals the label and 0 elsewhere
};

void crf_decoding(const CrfDecodingArgs& a);

}  // namespace fusebridge
