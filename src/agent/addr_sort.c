// SPDX-License-Identifier: MIT
// addr_sort.c - an in-place radix sort, most significant digit first (an "American flag" sort):
// a digit's counts give each bucket its place, and every element is swapped straight into its
// bucket; each bucket is then sorted by the next digit, a small one by insertion. The digits
// above the highest bit in which the keys differ (the top bits of user space, which a heap's
// addresses share) are passed over. Keys already in order cost one pass.
#include "addr_sort.h"

#define DIGIT_BITS 8
#define DIGITS (1u << DIGIT_BITS)
#define KEY_BITS ((int)sizeof(uintptr_t) * 8)
#define LEVELS ((KEY_BITS + DIGIT_BITS - 1) / DIGIT_BITS)
// A bucket this small is sorted by insertion: two passes of counts over it would cost more.
#define SMALL 32

// One level's buckets: where the next element of each goes, and where each ends.
typedef struct level_s {
    size_t head[DIGITS], tail[DIGITS];
} level_t;

size_t addr_sort_workspace_size(void) {
    return LEVELS * sizeof(level_t);
}

static void insertion(uintptr_t* k, size_t* s, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uintptr_t key = k[i];
        size_t size = s[i];
        size_t j = i;
        for (; j > 0 && k[j - 1] > key; j--) {
            k[j] = k[j - 1];
            s[j] = s[j - 1];
        }
        k[j] = key;
        s[j] = size;
    }
}

static inline unsigned digit(uintptr_t key, int shift) {
    return (unsigned)(key >> shift) & (DIGITS - 1);
}

// Sorts [0, n) by the digit at shift and, bucket by bucket, by the ones below it; lv is this
// level's counts, lv + 1 the next one's.
static void sort_level(uintptr_t* k, size_t* s, size_t n, int shift, level_t* lv) {
    if (n <= SMALL) {
        insertion(k, s, n);
        return;
    }
    for (unsigned d = 0; d < DIGITS; d++)
        lv->tail[d] = 0;
    for (size_t i = 0; i < n; i++)
        lv->tail[digit(k[i], shift)]++;
    size_t at = 0;
    for (unsigned d = 0; d < DIGITS; d++) {
        lv->head[d] = at;
        at += lv->tail[d];
        lv->tail[d] = at;
    }
    // Each element not yet in its bucket is carried there, and the one it displaces on, until
    // one that belongs where the cycle began comes back to it.
    for (unsigned d = 0; d < DIGITS; d++) {
        while (lv->head[d] < lv->tail[d]) {
            size_t i = lv->head[d];
            uintptr_t key = k[i];
            size_t size = s[i];
            for (unsigned dd = digit(key, shift); dd != d; dd = digit(key, shift)) {
                size_t j = lv->head[dd]++;
                uintptr_t tk = k[j];
                size_t ts = s[j];
                k[j] = key;
                s[j] = size;
                key = tk;
                size = ts;
            }
            k[i] = key;
            s[i] = size;
            lv->head[d]++;
        }
    }
    if (shift == 0)
        return;
    size_t start = 0;
    for (unsigned d = 0; d < DIGITS; d++) {
        size_t end = lv->tail[d];
        if (end - start > 1)
            sort_level(k + start, s + start, end - start, shift - DIGIT_BITS, lv + 1);
        start = end;
    }
}

void addr_sort(uintptr_t* keys, size_t* sizes, size_t n, void* workspace) {
    uintptr_t differ = 0;
    int is_sorted = 1;
    for (size_t i = 1; i < n; i++) {
        differ |= keys[i] ^ keys[0];
        is_sorted &= keys[i - 1] <= keys[i];
    }
    if (is_sorted)
        return;
    int shift = 0; // the digit that holds the highest bit in which keys differ
    while (shift + DIGIT_BITS < KEY_BITS && (differ >> (shift + DIGIT_BITS)) != 0)
        shift += DIGIT_BITS;
    sort_level(keys, sizes, n, shift, workspace);
}
