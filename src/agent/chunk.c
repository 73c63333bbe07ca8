// SPDX-License-Identifier: MIT
// chunk.c - chunk framing and compression (chunk.h). The chunks of a trace are flushed parts of
// one zstd stream with a long window (format.h): a program's repeating patterns cost bytes once
// per trace, not once per chunk. Writer thread only (or under the writer lock).
#define _GNU_SOURCE
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "../common/checksum.h"
#include "chunk.h"
#include "log.h"
#include "os.h"

// The long window grows with the program: its buffer fills as the trace passes through it and
// stays resident, so a fixed 8 MiB was a quarter more memory for a program of 32 MiB (sqlite3
// inserting rows) and twice that of a small one. It is the largest RSS the writer has sampled
// (chunk_note_rss: this image's own, where the kernel's peak would be a forking parent's) over
// HL_WINDOW_RSS_SHARE, between 1 MiB (the traces of the bench's programs are at most 7% larger
// than with 8) and 8 MiB (a loop whose records fill a few MiB still finds its previous round).
// A 64th: with a 32nd, the window and its tables were 3 MiB of the 19 MiB that tracing added to
// gcc's LTO back end (74 MiB), whose trace is no larger with half the window (cc1 -O2 of 30,000
// lines: 2% larger).
// A larger one starts a new frame at a chunk's end; a window never shrinks. When zstd cannot
// have the memory for a larger one, the new frame takes the window before it and the window
// grows no more (the trace goes on: a process near RLIMIT_AS must not lose it to a window).
#define HL_ZSTD_WINDOW_LOG_MIN 20
#define HL_ZSTD_WINDOW_LOG_MAX 23
#define HL_WINDOW_RSS_SHARE 64 // about 1.5% of the program's memory
// Most processes a build or a test suite starts write a few KiB of trace in all: the long
// window's context (tables cleared before the first byte, 1.3 ms per process on a virtual
// machine for an 8 MiB window) is theirs only once they have written HL_SMALL_FRAME_RAW. Until
// then the stream is a first frame with a 128 KiB window and no long-distance matcher; that
// frame then ends at a chunk's end and the rest of the trace is long-window frames. A reader's
// zstd stream goes from one frame to the next by itself.
// The first frame's match table is one page (HL_ZSTD_SMALL_HASH_LOG), not level 1's 32 KiB: a
// process clears it, and a fork child copies its parent's pages of it, before its first byte
// (a traced bash running 500 commands: paired 0.966; its traces 0.3% larger, those of cxx and
// sqlite3 smaller).
#define HL_ZSTD_SMALL_WINDOW_LOG 17
#define HL_ZSTD_SMALL_HASH_LOG 10 // 1024 entries of 4 bytes: one page
#define HL_SMALL_FRAME_RAW (1u << 20)
// Before that, the first HL_STORED_RAW bytes of a stream are not compressed at all: each chunk
// of them is one zstd frame of one raw block (stored_*, below), written here without zstd. Most
// processes of a build or a shell script write less than that in all (a shell's child before its
// exec writes 16 KiB: the blocks it inherited and their stacks; a small program 0.5 KiB), and
// never create a compression context: none of zstd's code is paged in (264 KiB of the agent's
// text), none of its memory is cleared, and a fork child copies none of its parent's (zstd's
// code and pages were a tenth of the page faults a traced bash's children took). A traced bash
// running 200 programs: paired 0.894, 8% fewer page faults; a small program's peak RSS 2.1 ->
// 1.9 MiB. What it costs is at most HL_STORED_RAW bytes of the trace not compressed, once (the
// trace of a shell's child: 7.7 -> 16 KB).
#define HL_STORED_RAW (32u << 10)
#define ZSTD_FRAME_MAGIC 0xFD2FB528u
#define ZSTD_BLOCK_HEADER 3
#define ZSTD_RAW_BLOCK_MAX (128u << 10) // a block's largest size, and the stored frames' window
#define ZSTD_STORED_FRAME_HEADER 6      // magic, descriptor (no sizes, no checksum), window

static ZSTD_CCtx* cctx;
static int has_failed;
static uint8_t* out_buf; // the open chunk: header, then its compressed bytes so far
static size_t out_cap;
static size_t out_len;    // compressed bytes of the open chunk
static size_t chunk_raw;  // raw bytes fed into it
static int is_long_frame; // the stream is past its small first frame
static int window_log;    // of the frame being written
static uint64_t rss_peak; // bytes: the largest RSS noted (chunk_note_rss)
static int window_fixed;  // a larger window could not be had: frames stay as they are
static int window_to_release; // chunk_release_window: the open chunk ends the long frame
static int fallback_is_long, fallback_log; // the frame before a larger one, while it may fail
static int may_fall_back;       // the frame just set is larger, and no byte went into it yet
static size_t frame_raw;        // raw bytes fed into the frame being written
static hl_checksum_t chunk_sum; // of those bytes
static int is_stored = 1;   // the stream is still in its stored frames (HL_STORED_RAW)
static size_t stored_raw;   // raw bytes the stream has had in them
static size_t stored_block; // where the open chunk's last raw block starts, 0: no stored frame

// zstd 1.5 lays its compression workspace out as its objects, the match tables and the
// long-distance matcher's table (512 KiB for an 8 MiB window, an eighth of that for 1 MiB), then
// the buffers: it clears the tables before the first byte goes in, and the buffers fill as
// input comes. The tables are made present with one call (a fault per page cost 128 faults, 1.3
// ms on a virtual machine, per traced process); should another version place them elsewhere,
// they fault in as before. The workspace is the one allocation at least the window's size.
#define HL_ZSTD_TABLES_FIXED (96u << 10) // objects and level 1's match tables
#define HL_ZSTD_LDM_TABLE(log) ((512u << 10) >> (HL_ZSTD_WINDOW_LOG_MAX - (log)))
#define HL_ZALLOC_HEADER 16 // the mapping's size, kept before what zstd gets

// zstd's working memory comes from agent pages: the host's heap never sees it.
static void* zalloc(void* opaque, size_t size) {
    (void)opaque;
    size_t* p = os_map(size + HL_ZALLOC_HEADER);
    if (!p)
        return NULL;
    p[0] = size + HL_ZALLOC_HEADER;
    if (is_long_frame && size >= (size_t)1 << window_log)
        os_populate(p, HL_ZSTD_TABLES_FIXED + HL_ZSTD_LDM_TABLE(window_log));
    return (uint8_t*)p + HL_ZALLOC_HEADER;
}
static void zfree(void* opaque, void* addr) {
    (void)opaque;
    if (!addr)
        return;
    size_t* p = (size_t*)((uint8_t*)addr - HL_ZALLOC_HEADER);
    os_unmap(p, p[0]);
}

static void put_u32(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

void chunk_file_header(uint8_t out[HL_FILE_HEADER_SIZE]) {
    memset(out, 0, HL_FILE_HEADER_SIZE);
    memcpy(out, HL_TRACE_MAGIC, 8);
    out[8] = (uint8_t)HL_TRACE_VERSION;
    uint32_t flags = (uint32_t)sizeof(void*) & HL_HDR_WORD_SIZE_MASK;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    flags |= HL_HDR_BIG_ENDIAN;
#endif
    for (int i = 0; i < 4; i++) // little-endian, as every fixed field of the format
        out[12 + i] = (uint8_t)(flags >> (8 * i));
}

// Room for `more` compressed bytes after the open chunk's header and what it holds so far.
static int out_reserve(size_t more) {
    size_t need = HL_CHUNK_HEADER_SIZE + out_len + more;
    if (need <= out_cap)
        return 0;
    size_t cap = out_cap ? out_cap : (1u << 20);
    while (cap < need)
        cap *= 2;
    uint8_t* fresh = os_map(cap);
    if (!fresh)
        return -1;
    if (out_buf) {
        memcpy(fresh, out_buf, HL_CHUNK_HEADER_SIZE + out_len);
        os_unmap(out_buf, out_cap);
    }
    out_buf = fresh;
    out_cap = cap;
    return 0;
}

static int fail_stream(void) {
    if (!has_failed++)
        hl_log("compressing the trace failed; tracing stops here, the program goes on");
    return -1;
}

void chunk_note_rss(uint64_t bytes) {
    if (bytes > rss_peak)
        rss_peak = bytes;
}

// The long window the program's largest RSS allows (HL_WINDOW_RSS_SHARE).
static int window_log_for_rss(void) {
    int log = HL_ZSTD_WINDOW_LOG_MIN;
    while (log < HL_ZSTD_WINDOW_LOG_MAX &&
           ((uint64_t)1 << (log + 1)) <= rss_peak / HL_WINDOW_RSS_SHARE)
        log++;
    return log;
}

// The parameters of the next frame: the small first one, or a long-window one.
static void set_frame_params(int is_long, int log) {
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
    // Long-distance matching finds a repeat megabytes back at level 1's speed; the frame's own
    // checksum would only come at its end, which a killed process never writes: chunks carry one.
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_enableLongDistanceMatching,
                           is_long ? ZSTD_ps_enable : ZSTD_ps_disable);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, log);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, is_long ? 0 : HL_ZSTD_SMALL_HASH_LOG); // 0: level's
    // Only repeats of 256 bytes and more go to the long-distance matcher (its default, 64,
    // lets short accidental repeats break long ones: sqlite3's trace is 30% smaller this way).
    if (is_long)
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_ldmMinMatch, 256);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
    is_long_frame = is_long;
    window_log = log;
    frame_raw = 0;
}

// One compression context for the life of the process (a new trace resets its session).
static int ensure_cctx(void) {
    if (cctx)
        return 0;
    static const ZSTD_customMem mem = {zalloc, zfree, NULL};
    cctx = ZSTD_createCCtx_advanced(mem);
    if (!cctx)
        return -1;
    set_frame_params(0, HL_ZSTD_SMALL_WINDOW_LOG);
    return 0;
}

// Runs the stream over `raw` (mode ZSTD_e_continue) or flushes what it holds (ZSTD_e_flush).
// Slack beyond zstd's bound, so a flush's block ends fit without another round.
#define HL_STREAM_SLACK 4096
static int stream(const uint8_t* raw, size_t len, ZSTD_EndDirective mode) {
    if (ensure_cctx() != 0)
        return fail_stream();
    ZSTD_inBuffer in = {raw, len, 0};
    for (;;) {
        if (out_reserve(ZSTD_compressBound(len - in.pos) + HL_STREAM_SLACK) != 0)
            return fail_stream();
        ZSTD_outBuffer out = {out_buf + HL_CHUNK_HEADER_SIZE, out_cap - HL_CHUNK_HEADER_SIZE,
                              out_len};
        size_t left = ZSTD_compressStream2(cctx, &out, &in, mode);
        if (ZSTD_isError(left) && may_fall_back && in.pos == 0 && out.pos == out_len &&
            ZSTD_getErrorCode(left) == ZSTD_error_memory_allocation) {
            // The frame's workspace could not be made: nothing went in; the frame starts again
            // with the window before it.
            ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
            set_frame_params(fallback_is_long, fallback_log);
            window_fixed = 1;
            may_fall_back = 0;
            hl_log("no memory for a larger trace window: it stays at %u KiB",
                   1u << (window_log - 10));
            continue;
        }
        may_fall_back = 0;
        out_len = out.pos;
        if (ZSTD_isError(left))
            return fail_stream();
        if (mode != ZSTD_e_continue ? left == 0 : in.pos == len)
            return 0;
    }
}

// ---------------------------------------------------------------------------------------------
// Stored frames: zstd's frame format with one raw block (RFC 8878, 3.1.1), which any zstd
// decoder reads as the rest of the stream. One per chunk, ended with it: a chunk always ends a
// frame, and the next chunk starts one, stored or zstd's.
// ---------------------------------------------------------------------------------------------
static void put_u24(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
}
// Block header: last block (bit 0), type (bits 1-2, 0: raw), size (bits 3-23).
static uint32_t block_header(size_t size, int is_last) {
    return (uint32_t)size << 3 | (uint32_t)(is_last != 0);
}
static uint32_t block_size(const uint8_t* header) {
    return ((uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16) >> 3;
}

// Appends raw to the open chunk's stored frame, begun if need be: one raw block, which grows.
_Static_assert(HL_STORED_RAW <= ZSTD_RAW_BLOCK_MAX, "a stream's stored bytes fit one block");
static int stored_put(const uint8_t* raw, size_t len) {
    if (out_reserve(ZSTD_STORED_FRAME_HEADER + ZSTD_BLOCK_HEADER + len) != 0)
        return fail_stream();
    uint8_t* payload = out_buf + HL_CHUNK_HEADER_SIZE;
    if (!stored_block) {
        put_u32(payload + out_len, ZSTD_FRAME_MAGIC);
        payload[out_len + 4] = 0; // descriptor: no content size, no checksum, no dictionary
        payload[out_len + 5] = (uint8_t)((HL_ZSTD_SMALL_WINDOW_LOG - 10) << 3); // window
        out_len += ZSTD_STORED_FRAME_HEADER;
        stored_block = out_len;
        put_u24(payload + out_len, block_header(0, 0));
        out_len += ZSTD_BLOCK_HEADER;
    }
    memcpy(payload + out_len, raw, len);
    out_len += len;
    uint8_t* header = payload + stored_block;
    put_u24(header, block_header(block_size(header) + len, 0));
    return 0;
}

// Ends the open chunk's stored frame: its last block says so.
static void stored_end(void) {
    if (!stored_block)
        return;
    uint8_t* header = out_buf + HL_CHUNK_HEADER_SIZE + stored_block;
    put_u24(header, block_header(block_size(header), 1));
    stored_block = 0;
}

int chunk_feed(const uint8_t* raw, size_t len) {
    if (has_failed)
        return -1;
    if (len == 0)
        return 0;
    if (chunk_raw == 0)
        hl_checksum_init(&chunk_sum);
    if (is_stored && stored_raw + len > HL_STORED_RAW) {
        stored_end(); // zstd's first frame follows it in the same chunk
        is_stored = 0;
    }
    if ((is_stored ? stored_put(raw, len) : stream(raw, len, ZSTD_e_continue)) != 0)
        return -1;
    if (is_stored)
        stored_raw += len;
    else
        frame_raw += len;
    hl_checksum_update(&chunk_sum, raw, len);
    chunk_raw += len;
    return 0;
}

// The open chunk's header, and the chunk handed out.
static int chunk_done(const uint8_t** out, size_t* len) {
    put_u32(out_buf, HL_CHUNK_MAGIC);
    put_u32(out_buf + 4, (uint32_t)out_len);
    put_u32(out_buf + 8, (uint32_t)chunk_raw);
    put_u32(out_buf + 12, hl_checksum_final(&chunk_sum));
    *out = out_buf;
    *len = out_len + HL_CHUNK_HEADER_SIZE;
    out_len = 0;
    chunk_raw = 0;
    return 0;
}

int chunk_end(const uint8_t** out, size_t* len) {
    *out = NULL;
    *len = 0;
    if (has_failed)
        return -1;
    if (chunk_raw == 0)
        return 0;
    if (is_stored) {
        stored_end();
        return chunk_done(out, len);
    }
    // The small first frame ends with the chunk that takes it past HL_SMALL_FRAME_RAW; a long
    // one when the program has grown enough for a larger window.
    int next_log = window_log, ends_frame = 0;
    if (window_to_release) {
        ends_frame = 1;
    } else if (!window_fixed && !is_long_frame && frame_raw >= HL_SMALL_FRAME_RAW) {
        next_log = window_log_for_rss();
        ends_frame = 1;
    } else if (!window_fixed && is_long_frame && window_log < HL_ZSTD_WINDOW_LOG_MAX) {
        next_log = window_log_for_rss();
        ends_frame = next_log > window_log;
    }
    if (stream(NULL, 0, ends_frame ? ZSTD_e_end : ZSTD_e_flush) != 0)
        return -1;
    if (window_to_release) {
        // The next frame, if any, is a small first frame again that stays small (ensure_cctx).
        ZSTD_freeCCtx(cctx);
        cctx = NULL;
        window_to_release = 0;
        window_fixed = 1;
        may_fall_back = 0;
    } else if (ends_frame) { // the frame is over: parameters apply from the next one
        fallback_is_long = is_long_frame;
        fallback_log = window_log;
        set_frame_params(1, next_log);
        may_fall_back = 1;
    }

    return chunk_done(out, len);
}

void chunk_release_window(void) {
    if (cctx && is_long_frame)
        window_to_release = 1;
}

void chunk_restart_stream(void) {
    if (cctx) {
        ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
        // A new trace (a fork child's) starts small again, sized by the child's own memory
        // from its first sample on.
        set_frame_params(0, HL_ZSTD_SMALL_WINDOW_LOG);
    }
    rss_peak = 0;
    window_fixed = 0;
    window_to_release = 0;
    may_fall_back = 0;
    out_len = 0;
    chunk_raw = 0;
    has_failed = 0;
    is_stored = 1;
    stored_raw = 0;
    stored_block = 0;
}
