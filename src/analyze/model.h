// SPDX-License-Identifier: MIT
// model.h - what a trace says, aggregated while it streams: the process, its modules and
// stacks, totals and peak, heap errors, and leak records by (kind, stack). Memory grows with
// the live blocks and the distinct stacks, never with the number of events.
#ifndef HL_MODEL_H
#define HL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/format.h"
#include "blocks.h"
#include "reader.h"

#define HL_KIND_UNSCANNED HL_LEAK_COUNT // a leak kind for traces that never got their scan
#define HL_NKINDS (HL_LEAK_COUNT + 1)

typedef struct md_module_s {
    uint32_t id;
    uint64_t bias;
    char* path;
    uint8_t* build_id;
    size_t build_id_len;
    uint64_t (*segs)[3]; // vaddr, memsz, flags
    uint32_t nsegs;
    int is_alive;
    int sym_handle; // symbolizer module, -1 until needed
} md_module_t;

// A stack, by id (a node of the trace's prefix tree). Its frames are built on first use by
// model_stack(); ips is NULL until then.
typedef struct md_stack_s {
    uint64_t* ips;        // innermost first
    uint32_t n;
    uint32_t parent;      // the stack of the callers (0: none)
    uint64_t ip;          // this stack's innermost frame
    uint64_t allocations; // ALLOC records naming this stack
    uint64_t bytes;
    uint64_t live_blocks, live_bytes;
} md_stack_t;

typedef struct md_block_s {
    uint64_t key; // thread << 40 | seq (blocks.h); 0 = empty
    uint64_t addr;
    uint64_t size : 48;
    uint64_t fn : 8;
    uint64_t kind : 8; // HL_LEAK_* after the scan, HL_KIND_UNSCANNED before
    uint32_t stack;
} md_block_t;

// An array of `elem`-byte items at p with *cap of them, made to hold `need` (doubling; the new
// ones zeroed). Returns the array (p if it was big enough), or NULL when memory runs out.
void* md_grow(void* p, size_t* cap, size_t need, size_t elem);

// An indirectly lost block and the definitely lost one it is reached through.
typedef struct md_leader_s {
    uint64_t key, leader_key;
} md_leader_t;

typedef struct md_error_s {
    int kind;
    int fn;
    uint32_t stack;
    uint64_t addr;
    int has_block;
    uint64_t block_size;
    uint32_t alloc_stack;
    int alloc_fn;
    uint32_t release_stack; // where the block was released before (double free), else 0
    int64_t time_ns;
} md_error_t;

typedef struct md_leak_record_s {
    int kind;
    uint32_t stack;
    uint64_t bytes, blocks;
    uint64_t indirect_bytes, indirect_blocks; // reached only through this record's blocks
} md_leak_record_t;

typedef struct md_kind_total_s {
    uint64_t bytes, blocks;
} md_kind_total_t;

typedef struct model_s {
    // the process
    uint64_t pid, ppid, start_realtime_ns, depth, guard, info_flags;
    char* exe;
    char* argv; // NUL-separated
    size_t argv_len;
    int is_fork_child;
    int has_info;
    // how it ended
    int has_end, end_how;
    uint64_t end_value;
    int64_t end_time_ns, last_time_ns;
    char* exec_path; // set when the image called exec and no END followed
    int is_scanned;
    uint64_t scan_flags;
    // what it loaded and where it allocated
    md_module_t* mods;
    size_t nmods, mods_cap;
    md_stack_t* stacks; // by id
    size_t nstacks;
    uint64_t* thread_allocs; // ALLOC count per thread index, for block ids
    uint32_t* thread_tids;
    size_t nthreads;
    uint64_t threads_seen; // threads that allocated or released anything
    bs_t blocks; // live blocks (md_block_t), by id
    md_leader_t* leaders; // from the scan's verdicts
    size_t nleaders, leaders_cap;
    uint64_t* early_frees; // FREE before its ALLOC (threads drained out of order)
    size_t nearly, early_cap;
    // totals
    uint64_t allocations, frees, bytes_allocated;
    uint64_t heap_bytes, heap_blocks, peak_bytes, peak_blocks;
    int64_t peak_time_ns;
    uint64_t calls[HL_FN_COUNT];
    uint64_t mmaps, munmaps, mapped_bytes, mapped_peak;
    uint64_t rss_peak;
    // heap errors
    md_error_t* errors;
    size_t nerrors, errors_cap;
    // leaks
    md_kind_total_t leaks[HL_NKINDS];
    md_leak_record_t* records;
    size_t nrecords;
    // the decoder's verdict on the file
    rd_result_t read;
} model_t;

// Read a whole trace into m (zeroed first). Returns 0 when it is a trace, even a damaged one
// (m->read tells), or -errno with m->read.message set.
int model_load(model_t* m, const char* path);
void model_free(model_t* m);

// The stack with this id with its frames filled in (innermost first), or NULL.
const md_stack_t* model_stack(model_t* m, uint32_t id);

// The module holding code address ip, or NULL.
const md_module_t* model_module_of(const model_t* m, uint64_t ip);

const char* hl_fn_name(int fn);
const char* hl_leak_kind_name(int kind);   // "definitely_lost", ...
const char* hl_error_kind_name(int kind);  // "double_free", ...

#endif
