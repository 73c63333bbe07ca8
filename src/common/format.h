// SPDX-License-Identifier: MIT
// format.h - THE trace format, shared by the agent (writer) and the analyzer (reader).
// Change it only together with src/agent/encode.c and src/analyze/reader.c, and bump
// HL_TRACE_VERSION: the golden traces in tests/data catch any drift.
//
// A trace is a 16-byte file header followed by independent chunks, so a trace cut short
// (SIGKILL, full disk) stays readable up to its last complete chunk:
//
//   file header   +--------------------+----------------+----------------+
//                 | "HLTRACE\0" (8 B)  | version u32 LE | flags u32 LE   |
//                 +--------------------+----------------+----------------+
//   chunk         +------------+-----------------+------------+--------------------------+
//                 | "HLCK" u32 | stored_len u32  | raw_len u32| stored_len bytes:         |
//                 |            |                 |            | zstd frame with checksum |
//                 +------------+-----------------+------------+--------------------------+
//
// A chunk's raw bytes are a sequence of records: one tag byte, then fields. Every integer is
// a LEB128 varint (src/common/varint.h); "s" marks a zigzag-signed varint; a string is a
// varint length and that many bytes. Times are microseconds since the agent started,
// delta-coded against the previous timed record ("dt", signed). Addresses in ALLOC and FREE
// are delta-coded against the previous ALLOC address ("s").
#ifndef HL_FORMAT_H
#define HL_FORMAT_H

#include <stdint.h>

#define HL_TRACE_MAGIC "HLTRACE"   // 8 bytes with its NUL
#define HL_TRACE_VERSION 2u
#define HL_CHUNK_MAGIC 0x4b434c48u // "HLCK" little-endian
#define HL_FILE_HEADER_SIZE 16
#define HL_CHUNK_HEADER_SIZE 12
#define HL_CHUNK_RAW_MAX (4u << 20)

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
    // thread, dt:s, addr:s, size, stack, fn(HL_FN_*). The block's id is (thread, n): n counts
    // the ALLOC records of that thread so far, starting at 1.
    REC_ALLOC = 6,
    // thread, dt:s, owner_thread, back, fn(HL_FN_*): release of block (owner_thread, n - back)
    // where n is the number of ALLOC records of owner_thread so far (back = 0: its latest)
    REC_FREE = 7,
    // thread, dt:s, addr, length, prot, flags, stack
    REC_MMAP = 8,
    // thread, dt:s, addr, length
    REC_MUNMAP = 9,
    // dt:s, heap_bytes, heap_blocks, mapped_bytes, rss_bytes
    REC_SAMPLE = 10,
    // kind(HL_ERR_*), thread, dt:s, call_stack, addr, fn(HL_FN_*),
    // has_block, [owner_thread, owner_seq, size, alloc_stack, alloc_fn, free_stack]
    REC_ERROR = 11,
    // owner_thread, owner_seq, addr, size, stack, fn: a block alive when this trace began
    // (inherited across fork, or allocated before attach)
    REC_INHERIT = 12,
    // dt:s, flags(HL_SCAN_*), live_blocks: a reachability scan begins; VERDICT records follow
    REC_SCAN = 13,
    // owner_thread, owner_seq, kind(HL_LEAK_*), leader_thread, leader_seq
    // (the leader is the definitely lost block through which an indirect one is reached;
    // 0,0 for others)
    REC_VERDICT = 14,
    // dt:s, how(HL_END_*), value (exit code or signal number)
    REC_END = 15,
    // dt:s, path:string: the image called exec; if the exec fails, records go on
    REC_EXEC = 16,
    // thread, dt:s, name:string
    REC_THREAD_NAME = 17,
};

enum hl_info_flags {
    HL_INFO_FROM_START = 1, // loaded before main: every allocation is seen
    HL_INFO_TSC = 2,
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
    HL_ERR_COUNT
};

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
};

enum hl_end_how { HL_END_EXIT = 1, HL_END_SIGNAL = 2 };

#endif
