// SPDX-License-Identifier: MIT
// test_chunk.c - the agent's chunk framing (src/agent/chunk.c) without preloading: the bytes it
// is fed come back out of a zstd decoder exactly, chunk by chunk, as the analyzer's reader takes
// them; a stream's first HL_STORED_RAW bytes are stored frames (one raw block each, written by
// chunk.c itself, no compression context made); past them the stream is zstd's, compressed, in
// the same chunk when the share runs out in one; and a new stream (a fork child's) is stored
// again.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../../src/agent/chunk.h"
#include "../../src/common/checksum.h"
#include "harness.h"

#define STORED_SHARE (32u << 10) // chunk.c's HL_STORED_RAW
#define ZSTD_MAGIC 0xFD2FB528u
#define RAW_MAX (1u << 20)

static uint32_t get_u32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Records much like a trace's: compressible, never the same twice.
static size_t records(uint8_t* out, size_t len, unsigned seed) {
    size_t n = 0;
    char line[64];
    while (n < len) {
        int k = snprintf(line, sizeof line, "alloc %u size %u stack %u\n", seed, seed % 97 * 16,
                         seed % 13);
        seed++;
        size_t take = (size_t)k < len - n ? (size_t)k : len - n;
        memcpy(out + n, line, take);
        n += take;
    }
    return n;
}

// One trace stream being read back as the reader does (src/analyze/reader.c).
typedef struct stream_s {
    ZSTD_DCtx* z;
    uint8_t out[RAW_MAX];
} stream_t;

// The chunk chunk_end handed out: header sane, payload decompressed to exactly the raw bytes
// fed, checksum theirs. Returns 1 when all of that holds.
static int chunk_reads_back(stream_t* s, const uint8_t* chunk, size_t len, const uint8_t* raw,
                            size_t raw_len) {
    if (len < 16 || get_u32(chunk) != 0x4b434c48u || get_u32(chunk + 4) != len - 16 ||
        get_u32(chunk + 8) != raw_len)
        return 0;
    ZSTD_inBuffer in = {chunk + 16, len - 16, 0};
    ZSTD_outBuffer out = {s->out, sizeof s->out, 0};
    while (in.pos < in.size) {
        size_t rc = ZSTD_decompressStream(s->z, &out, &in);
        if (ZSTD_isError(rc))
            return 0;
    }
    // What zstd holds back of the chunk's bytes comes out without more input.
    for (size_t before = out.pos + 1; out.pos != before;) {
        before = out.pos;
        if (ZSTD_isError(ZSTD_decompressStream(s->z, &out, &in)))
            return 0;
    }
    hl_checksum_t c;
    hl_checksum_init(&c);
    hl_checksum_update(&c, raw, raw_len);
    return out.pos == raw_len && memcmp(s->out, raw, raw_len) == 0 &&
           get_u32(chunk + 12) == hl_checksum_final(&c);
}

// The frames a payload that starts with one begins, walked block by block (the last may go on
// in the next chunk): how many, and of the first, whether all its blocks are raw ones (type
// 0). -1 when it does not parse.
static int frames_in(const uint8_t* p, size_t n, int* first_is_raw) {
    size_t at = 0;
    int frames = 0;
    *first_is_raw = 1;
    while (at < n) {
        if (at + 6 > n || get_u32(p + at) != ZSTD_MAGIC)
            return -1;
        uint8_t fhd = p[at + 4];
        at += 5;
        if (!(fhd & 0x20))
            at++; // window descriptor
        static const int dict_bytes[] = {0, 1, 2, 4};
        at += (size_t)dict_bytes[fhd & 3];
        int fcs = fhd >> 6;
        at += fcs == 0 ? (fhd & 0x20 ? 1 : 0) : fcs == 1 ? 2 : fcs == 2 ? 4 : 8;
        for (int last = 0; !last;) {
            if (at == n)
                return frames + 1; // a frame that goes on
            if (at + 3 > n)
                return -1;
            uint32_t h = (uint32_t)p[at] | (uint32_t)p[at + 1] << 8 | (uint32_t)p[at + 2] << 16;
            last = h & 1;
            int type = (h >> 1) & 3;
            size_t size = h >> 3;
            if (frames == 0 && type != 0)
                *first_is_raw = 0;
            at += 3 + (type == 1 ? 1 : size);
        }
        if (fhd & 4)
            at += 4; // content checksum
        frames++;
    }
    return at == n ? frames : -1;
}

static uint8_t raw[4 * STORED_SHARE + 65536];

// Feeds raw[from, to) in pieces of `piece`, then ends the chunk; checks it reads back.
static const uint8_t* chunk_of(stream_t* s, size_t from, size_t to, size_t piece, size_t* len) {
    for (size_t at = from; at < to; at += piece)
        EXPECT_EQ_I(chunk_feed(raw + at, (to - at < piece ? to - at : piece)), 0);
    const uint8_t* out = NULL;
    EXPECT_EQ_I(chunk_end(&out, len), 0);
    if (!out) { // nothing to look at: the rest of the test cannot go on
        fprintf(stderr, "  %s:%d: chunk_end gave no chunk\n", __FILE__, __LINE__);
        exit(1);
    }
    EXPECT_TRUE(chunk_reads_back(s, out, *len, raw + from, to - from));
    return out;
}

static stream_t* stream_new(void) {
    stream_t* s = malloc(sizeof *s);
    s->z = ZSTD_createDCtx();
    chunk_restart_stream();
    return s;
}
static void stream_free(stream_t* s) {
    ZSTD_freeDCtx(s->z);
    free(s);
}

TEST(a_small_stream_is_stored) {
    stream_t* s = stream_new();
    size_t len;
    // Three chunks, 20 KiB in all: each one frame of one raw block, the bytes as they were fed.
    size_t ends[] = {0, 700, 5700, 20000};
    for (int c = 1; c < 4; c++) {
        const uint8_t* ch = chunk_of(s, ends[c - 1], ends[c], 333, &len);
        size_t n = ends[c] - ends[c - 1];
        EXPECT_EQ_U(len, 16 + 6 + 3 + n); // chunk header, frame header, block header, bytes
        EXPECT_EQ_U(get_u32(ch + 16), ZSTD_MAGIC);
        EXPECT_EQ_U(ch[20], 0);           // no content size, no checksum, no dictionary
        EXPECT_EQ_U(ch[21], (17 - 10) << 3); // a 128 KiB window
        uint32_t block = (uint32_t)ch[22] | (uint32_t)ch[23] << 8 | (uint32_t)ch[24] << 16;
        EXPECT_EQ_U(block, (uint32_t)n << 3 | 1); // raw, last, n bytes
        EXPECT_TRUE(memcmp(ch + 25, raw + ends[c - 1], n) == 0);
    }
    // Nothing fed: no chunk.
    const uint8_t* none = raw;
    EXPECT_EQ_I(chunk_end(&none, &len), 0);
    EXPECT_EQ_U(len, 0);
    stream_free(s);
}

TEST(past_its_share_the_stream_is_compressed_in_the_same_chunk) {
    stream_t* s = stream_new();
    size_t len, n = 20000;
    chunk_of(s, 0, n, 4096, &len); // stored
    // 24 KiB more in pieces of 4 KiB: the share (32 KiB) runs out at the fourth piece. The chunk
    // holds the stored frame of what came before it, ended, then zstd's first frame.
    const uint8_t* ch = chunk_of(s, n, n + 24576, 4096, &len);
    int first_is_raw;
    int frames = frames_in(ch + 16, len - 16, &first_is_raw);
    EXPECT_TRUE(frames >= 1);
    EXPECT_EQ_I(first_is_raw, 1);
    uint32_t block = (uint32_t)ch[22] | (uint32_t)ch[23] << 8 | (uint32_t)ch[24] << 16;
    EXPECT_EQ_U(block, 12288u << 3 | 1); // three pieces stored, then the frame ended
    EXPECT_EQ_U(get_u32(ch + 25 + 12288), ZSTD_MAGIC); // zstd's frame follows at once
    EXPECT_TRUE(len < 16 + 9 + 12288 + 12288); // and compresses the rest
    // From here on, compressed: 64 KiB of records in far fewer bytes.
    n += 24576;
    chunk_of(s, n, n + 65536, 8192, &len);
    EXPECT_TRUE(len < 65536 / 4);
    stream_free(s);
}

TEST(a_first_piece_larger_than_the_share_is_compressed) {
    stream_t* s = stream_new();
    size_t len;
    const uint8_t* ch = chunk_of(s, 0, 2 * STORED_SHARE, 2 * STORED_SHARE, &len);
    EXPECT_EQ_U(get_u32(ch + 16), ZSTD_MAGIC);
    EXPECT_TRUE(len < STORED_SHARE / 2);
    stream_free(s);
}

TEST(a_new_stream_is_stored_again) {
    stream_t* s = stream_new();
    size_t len;
    chunk_of(s, 0, 3 * STORED_SHARE, 16384, &len); // past the share: zstd's now
    stream_free(s);
    s = stream_new(); // a fork child's trace: read by a reader of its own
    const uint8_t* ch = chunk_of(s, 1000, 3000, 2000, &len);
    EXPECT_EQ_U(len, 16 + 9 + 2000);
    EXPECT_EQ_U(get_u32(ch + 16), ZSTD_MAGIC);
    // and leaves its share as the first stream did
    chunk_of(s, 3000, 3000 + STORED_SHARE, 4096, &len);
    chunk_of(s, 3000 + STORED_SHARE, 3000 + 3 * STORED_SHARE, 4096, &len);
    EXPECT_TRUE(len < 2 * STORED_SHARE / 4);
    stream_free(s);
}

int main(void) {
    records(raw, sizeof raw, 1);
    RUN_TEST(a_small_stream_is_stored);
    RUN_TEST(past_its_share_the_stream_is_compressed_in_the_same_chunk);
    RUN_TEST(a_first_piece_larger_than_the_share_is_compressed);
    RUN_TEST(a_new_stream_is_stored_again);
    return TEST_SUMMARY();
}
