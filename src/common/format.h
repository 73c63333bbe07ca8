// SPDX-License-Identifier: MIT
// format.h - THE trace format, shared by the agent (writer) and the analyzer (reader).
// Change it only together with src/agent/encode.c and src/analyze/reader.c, and bump
// HL_TRACE_VERSION: the unit tests' traces (tests/unit/trace_builder.h) catch any drift.
//
// A trace is a 16-byte file header followed by chunks, so a trace cut short (SIGKILL, full
// disk) stays readable up to its last complete chunk:
//
//   file header   +--------------------+----------------+----------------+
//                 | "HLTRACE\0" (8 B)  | version u32 LE | flags u32 LE   |
//                 +--------------------+----------------+----------------+
//   chunk         +------------+----------------+-------------+----------------+------------+
//                 | "HLCK" u32 | stored_len u32 | raw_len u32 | checksum u32   | stored_len |
//                 |            |                |             | of the raw     | bytes      |
//                 |            |                |             | bytes (below)  |            |
//                 +------------+----------------+-------------+----------------+------------+
//
// The chunks of one file are the consecutive flushed parts of ONE zstd stream: a few frames one
// after the other (each larger window the writer takes starts a new one at a chunk's start, and
// so does the small one it takes for the exit scan's records once it gives the long one back; the
// last frame ends when the trace is closed, and a trace cut short has no frame end). The
// stream's first 32 KiB of records are not compressed: each chunk of them is a whole frame of
// one raw block (the short processes of a build never start a compressor), and the first
// compressed frame starts where they end, in the chunk that passes them. Each chunk
// decompresses to exactly raw_len bytes with the same decompression context, given every chunk
// before it. This
// is what lets zstd find a program's repeating patterns across chunks (a loop of 500 KiB of
// records costs a few bytes the second time), and why a damaged chunk ends the readable trace.
// The checksum is hl_checksum32 (src/common/checksum.h) of the chunk's decompressed bytes.
//
// A chunk's raw bytes are a sequence of records: one tag byte, then fields. Every integer is
// a LEB128 varint (src/common/varint.h); "s" marks a zigzag-signed varint; a string is a
// varint length and that many bytes. Records never straddle chunks.
//
// Time. Records marked "dt" carry their time: microseconds since the agent started,
// delta-coded against the previous record of the chunk that carried one (0 at a chunk's start).
// Heap events (ALLOC, FREE, MMAP, MUNMAP) carry none: they happened at the time of the last
// timed record before them, to within HL_TIME_STEP_US (the writer puts a TIME record before an
// event whenever the event is that much later than the last time written). In a process with one
// thread the agent reads the clock for one event in 64, so an event that comes alone after a
// pause may be placed up to one writer pass (the sample period, 10 ms) early.
//
// Thread. Heap events belong to the current thread, set by SWITCH (the writer states it again
// at the start of every chunk). Events of different threads are in time order across threads
// to within HL_MERGE_SLACK_US: the writer takes a run of one thread's events while they are
// no later than that past the other threads' next event, so concurrent threads do not
// alternate record by record.
//
// Allocation sites. The k-th distinct (size, stack) pair named by an ALLOC or INHERIT record
// of the trace is "site" k (k = 1, 2, ...; counted over the whole file, across chunks). A FREE
// names the site of the block it releases: which block, or where it lay, is not recorded.
// Everything the reports tell (levels, peak, per-stack live bytes, temporary allocations)
// follows from sizes and stacks; leaks come with their addresses in VERDICT records.
#ifndef HL_FORMAT_H
#define HL_FORMAT_H

#include <stdint.h>

#define HL_TRACE_MAGIC "HLTRACE" // 8 bytes with its NUL
#define HL_TRACE_VERSION 4u
// The oldest version read: 3 lacks only the function codes of a realloc of NULL (hl_fn), which
// it records as a realloc.
#define HL_TRACE_VERSION_OLDEST 3u
#define HL_CHUNK_MAGIC 0x4b434c48u // "HLCK" little-endian
#define HL_FILE_HEADER_SIZE 16
// The header's flags describe the traced machine, so that a collector on another machine (or a
// reader of the file anywhere) knows what it holds: the pointer size in bytes (0 in traces from
// before this field: 8) and the byte order. Everything in a trace is little-endian varints
// whatever the target's order, so this informs; it does not change decoding.
#define HL_HDR_WORD_SIZE_MASK 0xffu
#define HL_HDR_BIG_ENDIAN 0x100u
#define HL_CHUNK_HEADER_SIZE 16
#define HL_CHUNK_RAW_MAX (4u << 20)
#define HL_TIME_STEP_US 2000u
#define HL_MERGE_SLACK_US 20u

// Record tags and their fields, in order.
enum hl_record_tag {
    // pid, ppid, start_realtime_ns, depth, guard_bytes, flags(HL_INFO_*), exe:string,
    // argv:string (NUL-separated), trace_generation (0 = first image of this pid)
    REC_INFO = 1,
    // id, bias, path:string, build_id:string, nseg, nseg x (vaddr, memsz, pflags)
    REC_MODULE = 2,
    // id
    REC_MODULE_GONE = 3,
    // index, tid
    REC_THREAD = 4,
    // id:s, id - parent, ip:s. Stacks are a prefix tree: node id is the stack whose innermost
    // frame is ip and whose callers are the stack `parent` (0: none; parent < id). id and ip
    // are delta-coded against the previous STACK record of the chunk. A parent always comes
    // before its children.
    REC_STACK = 5,
    // (6 and 7 were version 2's ALLOC and FREE)
    // addr, length, prot, flags, stack (current thread and time)
    REC_MMAP = 8,
    // addr, length (current thread and time)
    REC_MUNMAP = 9,
    // dt:s, heap_bytes, heap_blocks, mapped_bytes, rss_bytes
    REC_SAMPLE = 10,
    // kind(HL_ERR_*), thread, dt:s, call_stack, addr, fn(HL_FN_*),
    // has_block, [size, alloc_stack, alloc_fn, free_stack]
    REC_ERROR = 11,
    // addr, size, stack, fn: a block alive when this trace began (inherited across fork, or
    // allocated before attach). Names a site like ALLOC.
    REC_INHERIT = 12,
    // dt:s, flags(HL_SCAN_*), live_blocks: a reachability scan begins; VERDICT records follow,
    // one per block live at the scan, in address order
    REC_SCAN = 13,
    // kind(HL_LEAK_*), addr:s (against the previous VERDICT's addr, 0 for the scan's first),
    // size, stack, fn, leader: for an indirectly lost block, the address of the definitely
    // lost block it is reached through (one of this scan's VERDICTs, maybe a later one); else 0
    REC_VERDICT = 14,
    // dt:s, how(HL_END_*), value (exit code or signal number)
    REC_END = 15,
    // dt:s, path:string: the image called exec; if the exec fails, records go on
    REC_EXEC = 16,
    // thread, dt:s, name:string
    REC_THREAD_NAME = 17,
    // dt:s: the time of the heap events that follow
    REC_TIME = 18,
    // thread: the thread of the heap events that follow
    REC_SWITCH = 19,
    // fn(HL_FN_*), temporary (0/1), size, stack: a FREE whose site the writer could not name
    // (its ALLOC is not written yet: another thread's block, released in the same instant)
    REC_FREE_EXPLICIT = 20,
    // offset:s, length, n, n x seen byte, n x expected byte: what the ERROR record just before
    // it found changed (red zone, guard or painted bytes of a released block): the first changed
    // byte's offset from the block's start (negative: before it), the span of changed bytes
    // from there to the last, and the first n (at most HL_CHANGE_BYTES) bytes of that span as
    // they were found and as the agent left them
    REC_ERROR_CHANGE = 21,
    // what(HL_NOTE_*), a, b: the program called the heaplens API on the current thread (at the
    // current time): a pause or resume of its recording, a mark (a, b = the low and high halves
    // of its 64-bit count), a tag for its next allocations (a = type, b = location) or its end,
    // a block it wants never reported (a = its site; 0 when the writer could not name it). Only
    // in traces of programs that use the API.
    REC_NOTE = 22,
    // dt:s, source(HL_AS_SRC_*), available (bit k: value k is the allocator's or the kernel's
    // figure; a clear bit's value is 0 and means "not available", never zero), n, n x value
    // (HL_AS_* below, in that order; a later version may add values after them, which a reader
    // skips), arenas (how many the allocator has), m, fields, m x fields x arena value
    // (HL_AS_ARENA_* in that order; m <= HL_AS_ARENAS_MAX, fields <= HL_AS_ARENA_FIELDS_MAX):
    // the allocator's own statistics and the process's memory, sampled by --allocator-stats.
    // Added within version 3 (only traces of that option hold it; a reader from before it stops
    // there with "an unknown tag"); its counts let later versions add values and arena fields.
    REC_ALLOC_STATS = 23,

    // Heap events with the function in the tag's low 5 bits (fn = tag & 31):
    // size, stack: an allocation by the current thread
    REC_ALLOC = 0x40,
    // site: a release by the current thread
    REC_FREE = 0x60,
    // (no fields): a release of the block the current thread allocated last, before it
    // allocated anything else (a temporary allocation). Its site is that of the current
    // thread's latest ALLOC: a loop of malloc/free pairs costs one byte per free.
    REC_FREE_TEMP = 0x80,
};

#define HL_REC_FN_MASK 31
static inline int hl_rec_kind(int tag) {
    return tag >= REC_ALLOC && tag < REC_FREE_TEMP + 32 ? tag & ~HL_REC_FN_MASK : tag;
}

enum hl_note_kind {
    HL_NOTE_PAUSE = 1, // this thread's allocations are not recorded until HL_NOTE_RESUME
    HL_NOTE_RESUME = 2,
    HL_NOTE_MARK = 3,
    HL_NOTE_TAG = 4,
    HL_NOTE_UNTAG = 5,
    HL_NOTE_IGNORE = 6,   // a = the site of a live block the program wants never reported
    HL_NOTE_UNIGNORE = 7, // a = the site of such a block, released or resized (a new block)
};

// REC_ALLOC_STATS's values: glibc's mallinfo2() (arena .. keepcost), then /proc/self/status.
enum hl_alloc_stat {
    HL_AS_ARENA = 0,   // bytes the allocator took from the system with brk/sbrk (all arenas)
    HL_AS_IN_USE,      // bytes in blocks handed out (uordblks; with glibc, tcache blocks too)
    HL_AS_FREE,        // bytes in free chunks the allocator keeps (fordblks)
    HL_AS_FAST_FREE,   // ... of which in fastbins (fsmblks)
    HL_AS_MMAPPED,     // bytes in blocks mapped one by one (hblkhd)
    HL_AS_MMAP_COUNT,  // how many such blocks (hblks)
    HL_AS_KEEPCOST,    // free bytes at the top of the main heap, releasable by malloc_trim
    HL_AS_VM_RSS,      // VmRSS
    HL_AS_VM_HWM,      // VmHWM: the peak VmRSS
    HL_AS_VM_SWAP,     // VmSwap
    HL_AS_RSS_ANON,    // RssAnon: the resident anonymous memory (the heap is in here)
    HL_AS_COUNT
};
#define HL_AS_ALLOCATOR_MASK ((1u << HL_AS_VM_RSS) - 1) // the allocator's values
enum hl_alloc_stat_arena {
    HL_AS_ARENA_SYSTEM = 0, // malloc_info's <system type="current">: bytes the arena holds
    HL_AS_ARENA_MAX,        // <system type="max">: the most it ever held
    HL_AS_ARENA_FREE,       // free bytes in its bins, fastbins and top chunk
    HL_AS_ARENA_FREE_BLOCKS,
    HL_AS_ARENA_FIELDS
};
// A record lists this many arenas at most (glibc makes up to 8 per core); `arenas` says how
// many there were. The reader refuses more fields per arena than this.
#define HL_AS_ARENAS_MAX 64
#define HL_AS_ARENA_FIELDS_MAX 16
#define HL_AS_VALUES_MAX 64 // values per record a reader accepts (this version writes HL_AS_COUNT)
// Where the allocator's values come from.
enum hl_alloc_stat_source {
    HL_AS_SRC_NONE = 0,      // the allocator underneath has no such figures (jemalloc, mimalloc)
    HL_AS_SRC_MALLINFO2 = 1, // glibc's mallinfo2(), and malloc_info() for the arenas
    HL_AS_SRC_MALLINFO = 2,  // the allocator's own mallinfo() (tcmalloc): int-sized figures
};

enum hl_info_flags {
    HL_INFO_FROM_START = 1, // loaded before main: every allocation is seen
    HL_INFO_TSC = 2,
    // The program's allocator is defined ahead of the agent (in the executable): calls from
    // other modules are routed to the agent, calls inside the defining module are not seen.
    HL_INFO_HEAP_PARTIAL = 4,
    // The same, and no allocating call could be routed: the trace holds no heap events.
    HL_INFO_HEAP_UNTRACED = 8,
};

// Allocation and release functions. The family decides what may release what.
enum hl_fn {
    HL_FN_MALLOC = 1,
    HL_FN_CALLOC,
    HL_FN_REALLOC,
    HL_FN_REALLOCARRAY,
    HL_FN_POSIX_MEMALIGN,
    HL_FN_ALIGNED_ALLOC,
    HL_FN_MEMALIGN,
    HL_FN_VALLOC,
    HL_FN_PVALLOC,
    HL_FN_NEW,
    HL_FN_NEW_ARRAY,
    HL_FN_FREE,
    HL_FN_DELETE,
    HL_FN_DELETE_ARRAY,
    HL_FN_MMAP,
    HL_FN_MUNMAP,
    HL_FN_MREMAP,
    // realloc and reallocarray of NULL (from version 4): an allocation only. Counted and named
    // as realloc and reallocarray; told apart for memcheck's view, which names them malloc.
    HL_FN_REALLOC_OF_NULL,
    HL_FN_REALLOCARRAY_OF_NULL,
    HL_FN_COUNT
};

enum hl_family { HL_FAM_MALLOC = 0, HL_FAM_NEW = 1, HL_FAM_NEW_ARRAY = 2, HL_FAM_MMAP = 3 };

static inline int hl_fn_family(int fn) {
    switch (fn) {
    case HL_FN_NEW:
    case HL_FN_DELETE:
        return HL_FAM_NEW;
    case HL_FN_NEW_ARRAY:
    case HL_FN_DELETE_ARRAY:
        return HL_FAM_NEW_ARRAY;
    case HL_FN_MMAP:
    case HL_FN_MUNMAP:
    case HL_FN_MREMAP:
        return HL_FAM_MMAP;
    default:
        return HL_FAM_MALLOC;
    }
}

enum hl_error_kind {
    HL_ERR_DOUBLE_FREE = 1,
    HL_ERR_INVALID_FREE = 2,
    HL_ERR_MISMATCHED_FREE = 3,
    HL_ERR_OVERFLOW = 4,
    HL_ERR_REALLOC_FREED = 5,
    HL_ERR_UNDERFLOW = 6,        // the red zone before a block was written
    HL_ERR_WRITE_AFTER_FREE = 7, // a released block held back from reuse was written
    // At exit, a live block holds a pointer into a released block held back: call_stack is
    // the holder's allocation stack, fn its allocating function, addr and the block the
    // released one; an ERROR_CHANGE's offset says where in it the pointer points (length 8)
    HL_ERR_DANGLING_POINTER = 8,
    // Faults in a guard page (--guard-pages): call_stack is the faulting instruction's, fn 0;
    // an ERROR_CHANGE of length 0 gives the faulting address's offset from the block's start.
    // A write past the end is an OVERFLOW, a write to a released block a WRITE_AFTER_FREE.
    HL_ERR_READ_AFTER_FREE = 9,
    HL_ERR_READ_OVERFLOW = 10,
    HL_ERR_INVALID_ACCESS = 11, // in the pool, where no block is (no block in the record)
    HL_ERR_READ_UNDERFLOW = 12, // the guard page before a block (--guard-pages-before)
    HL_ERR_COUNT
};

// The changed bytes an ERROR_CHANGE record shows, at most.
#define HL_CHANGE_BYTES 16

// Verdicts, with memcheck's meanings.
enum hl_leak_kind {
    HL_LEAK_DEFINITE = 0,
    HL_LEAK_INDIRECT = 1,
    HL_LEAK_POSSIBLE = 2,
    HL_LEAK_REACHABLE = 3,
    HL_LEAK_COUNT
};

enum hl_scan_flags {
    HL_SCAN_ALL_THREADS = 1, // every thread was stopped and its registers read
    HL_SCAN_AT_EXIT = 2,
    HL_SCAN_NO_MEMORY = 4, // the scan could not get the memory it needs: no VERDICT follows
    HL_SCAN_ONLY_NEW = 8,  // VERDICTs only for the blocks made since an earlier check; the
                           // others were judged too (the same roots), but are not listed
    HL_SCAN_ONLY_LOST = 16, // VERDICTs only for the blocks earlier scans reported lost (and
                            // not released since); the others judged, not listed
};

// DETACH: heaplens detach (or attach's --duration) ended the trace; STOP: a `stop` command of
// heaplens shell did. The process runs on after either.
enum hl_end_how { HL_END_EXIT = 1, HL_END_SIGNAL = 2, HL_END_DETACH = 3, HL_END_STOP = 4 };

#endif
