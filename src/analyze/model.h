// SPDX-License-Identifier: MIT
// model.h - what a trace says, aggregated while it streams: the process, its modules and
// stacks, totals and peak, heap errors, and leak records by (kind, stack). Every number comes
// from the sizes and stacks of allocations and releases, so memory grows with the distinct
// stacks and allocation sites, never with the events or the live blocks (the one exception:
// while a scan's verdicts stream, its definitely and indirectly lost blocks, to tie the ones
// to the others).
#ifndef HL_MODEL_H
#define HL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/format.h"
#include "alloc_stats.h"
#include "idmap.h"
#include "notes.h"
#include "reader.h"

#define HL_KIND_UNSCANNED HL_LEAK_COUNT // a leak kind for traces that never got their scan
#define HL_NKINDS (HL_LEAK_COUNT + 1)

// Strings a trace carries are kept to these lengths; a longer one keeps its start and says how
// many bytes were cut ("...[N bytes cut]"), so one damaged or hostile record cannot make every
// frame of every report that long.
#define MD_PATH_MAX 4096       // PATH_MAX: no longer path names a file open(2) can open
#define MD_NAME_MAX 255        // NAME_MAX: a module's file name, shown in every frame
#define MD_ARGV_MAX (64 << 10) // the command line, all its arguments together
#define MD_BUILD_ID_MAX 64     // a GNU build-id is 20 bytes (SHA-1); 64 leaves room
// The deepest stack the agent records (heaplens run -d: at most 256 frames).
#define MD_STACK_DEPTH_MAX 256

typedef struct md_module_s {
    uint32_t id;
    uint64_t bias;
    char* path;
    char* name; // the file name of path, for frames
    uint8_t* build_id;
    size_t build_id_len;
    uint64_t (*segs)[3]; // vaddr, memsz, flags
    uint32_t nsegs;
    int is_alive;
    int sym_handle; // symbolizer module, -1 until needed
} md_module_t;

// A stack, by number (a node of the trace's prefix tree; model_stack_number() turns the trace's
// id into its number); model_stack_ips() lists its frames. A trace of a program with millions
// of call paths has as many of these as FRAME records: 16 bytes each, nothing kept per stack
// that only a report of it needs (report.c keeps the frames of the stacks it shows; the numbers
// of a stack that allocates are its sites' and the aggregate's, aggregate.h).
typedef struct md_stack_s {
    uint64_t ip;      // this stack's innermost frame (0: no such stack)
    uint32_t parent;  // the number of the stack of the callers (0: none)
    uint8_t alloc_fn; // HL_FN_* its allocations called (the stack starts at the call), 0: none
} md_stack_t;

// An allocation site (format.h): blocks of one size from one stack, which the trace does not
// tell apart.
// 40 bytes: a trace of a program with millions of distinct stacks has as many sites.
typedef struct md_site_s {
    uint64_t size;
    int64_t live; // blocks live now; can dip below the truth while a block released by
                  // FREE_EXPLICIT waits for its ALLOC (0 at worst once loaded)
    uint32_t stack;
    int32_t ignored; // of those, blocks the program asked never to be reported (heaplens_ignore)
    uint32_t verdicts[HL_LEAK_COUNT]; // the last scan's verdicts on its blocks, by kind
} md_site_t;

// An array of `elem`-byte items at p with *cap of them, made to hold `need` (doubling; the new
// ones zeroed). Returns the array (p if it was big enough), or NULL when memory runs out.
void* md_grow(void* p, size_t* cap, size_t need, size_t elem);
// The same for an array whose items past `used` are never read: only [used, need) is zeroed,
// and the rest of a new capacity is left as the allocator gave it (for a large array, pages
// the kernel has not yet made: a doubling does not double the memory a trace's reader holds).
void* md_grow_used(void* p, size_t* cap, size_t used, size_t need, size_t elem);

// A scan's verdicts as they stream (leaks.c): its definitely lost blocks by address, and the
// indirectly lost ones by the address of their leader, which may come later in the scan.
typedef struct md_lost_s {
    uint64_t addr;
    uint32_t stack;
} md_lost_t;

typedef struct md_reached_s {
    uint64_t leader, size;
} md_reached_t;

typedef struct md_run_s {
    int is_open;      // VERDICT records are streaming
    int is_unsorted;  // a definitely lost block came below the one before it
    md_lost_t* lost;
    size_t nlost, lost_cap;
    md_reached_t* reached;
    size_t nreached, reached_cap;
} md_run_t;

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
    // Bytes the agent left that were found changed (guard, red zone, paint), when it says
    int has_change;
    int64_t change_offset; // of the first changed byte from the block's start (< 0: before)
    uint64_t change_length; // first to last changed byte
    uint32_t change_n;      // bytes below
    uint8_t seen[HL_CHANGE_BYTES], expected[HL_CHANGE_BYTES];
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
    int64_t first_time_ns; // the first record with a time (-1: none)
    char* exec_path; // set when the image called exec and no END followed
    int is_scanned;
    int is_scan_short; // the agent had no memory for its scan (HL_SCAN_NO_MEMORY)
    uint64_t scan_flags;
    // what it loaded and where it allocated
    md_module_t* mods;
    size_t nmods, mods_cap;
    md_stack_t* stacks; // by number: stacks[1 .. nstacks - 1]
    size_t nstacks, stacks_cap;
    idmap_t stack_ids;    // the trace's stack ids -> their numbers
    uint64_t strings_cut; // strings of the trace longer than their limit (MD_*_MAX)
    md_site_t* sites; // by site number; sites[0] unused
    size_t nsites;    // the highest site number seen, plus one
    size_t sites_cap;
    uint64_t threads_seen; // threads that allocated or released anything
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
    // leaks: the last scan's verdicts, and blocks live at the end that no verdict covers
    md_kind_total_t leaks[HL_NKINDS];
    md_leak_record_t* records;
    size_t nrecords, records_cap;
    uint32_t* record_slots; // (kind, stack) -> 1 + index into records; a power of two of them
    size_t record_mask;
    md_run_t run;
    md_notes_t notes; // what the program said through the API
    const struct model_observer_s* observer; // model_load_observed
    uint64_t seen_lo, seen_hi; // the segment of the last frame told to the observer
    as_series_t alloc_stats; // --allocator-stats: the allocator's figures beside the heap
    // the decoder's verdict on the file
    rd_result_t read;
} model_t;

// Read a whole trace into m (zeroed first). Returns 0 when it is a trace, even a damaged one
// (m->read tells), or -errno with m->read.message set.
int model_load(model_t* m, const char* path);
// Work that can go on while a trace is read, beside the model: either callback may be NULL.
typedef struct model_observer_s {
    // the module of each stack frame the trace defines: at least once per module that has a
    // frame, repeated calls possible; md valid during the call (opening its debug information)
    void (*module_seen)(void* arg, md_module_t* md);
    void* module_arg;
    // every record, after the model took it (another pass's numbers); non-zero stops reading
    int (*record)(const rd_record_t* r, void* arg);
    void* record_arg;
} model_observer_t;
int model_load_observed(model_t* m, const char* path, const model_observer_t* obs);
// The same in steps, from a stream (reader.h), for a trace read while it is written:
// model_begin, model_read as often as the stream says (its return value), then model_end with
// the last one's, which returns what model_load_observed would have.
void model_begin(model_t* m, const model_observer_t* obs);
int model_read(model_t* m, rd_stream_t* s, unsigned max_chunks);
int model_end(model_t* m, int rc);
void model_free(model_t* m);

// Whether the trace tells the whole run: every chunk read whole, and it ends with END (or with
// the EXEC that replaced the image). Else model_incomplete_reason says what is missing, in one
// sentence; it returns NULL for a complete trace.
int model_is_complete(const model_t* m);
const char* model_incomplete_reason(const model_t* m);

// The site with this number, or NULL.
const md_site_t* model_site(const model_t* m, uint64_t site);

// How many of the blocks of site s live at the end are of each kind (HL_LEAK_* and
// HL_KIND_UNSCANNED): the last scan's verdicts, and as unscanned the blocks beyond them (all of
// them without a scan). Returns the total.
uint64_t model_site_kinds(const md_site_t* s, uint64_t blocks[HL_NKINDS]); // leaks.c

// The stack with this number with its frames filled in (innermost first), or NULL.
// The frames of stack id, innermost first, into ips (at most max, MD_STACK_DEPTH_MAX is every
// one a stack can have): their count, 0 when there is no such stack.
uint32_t model_stack_ips(const model_t* m, uint32_t id, uint64_t* ips, uint32_t max);

// The number of the stack a record names by its id in the trace (stacks are numbered as the
// trace first names them, so the model's arrays grow with the stacks a trace holds, not with
// its largest id); 0 for id 0 (no stack) and for an id the trace never named.
static inline uint32_t model_stack_number(const model_t* m, uint64_t trace_id) {
    return idmap_find(&m->stack_ids, trace_id);
}
// The same while loading: an id named for the first time gets its number (0: out of memory).
uint32_t model_stack_ref(model_t* m, uint64_t trace_id);

// What lives at the end on each stack, from its sites' levels: bytes[id] and, unless NULL,
// blocks[id] for every stack number id; both nstacks long and zeroed by the caller.
void model_live_by_stack(const model_t* m, uint64_t* bytes, uint64_t* blocks);

// The module holding code address ip, or NULL.
const md_module_t* model_module_of(const model_t* m, uint64_t ip);

const char* hl_fn_name(int fn);
// The function a call counts and is named as: a realloc of NULL as realloc (format.h).
int hl_fn_counted(int fn);
const char* hl_leak_kind_name(int kind);   // "definitely_lost", ...
const char* hl_error_kind_name(int kind);  // "double_free", ...

#endif
