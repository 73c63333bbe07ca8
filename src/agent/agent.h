// SPDX-License-Identifier: MIT
// agent.h - internal interfaces of libheaplens.so, grouped by the file that defines them.
// The hot path is hooks*.c -> record.c -> (unwind.c, stacks.c, live.c, ring.h); everything
// else runs on the writer thread or at start, fork and exit.
#ifndef HL_AGENT_H
#define HL_AGENT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/compiler.h"
#include "../common/format.h"

typedef struct hl_enc_s hl_enc_t; // a chunk being encoded (encode.c)

// ---------------------------------------------------------------------------------------------
// Events: what the hot path hands to the writer thread, one fixed-size slot each.
// ---------------------------------------------------------------------------------------------
enum hl_event_kind {
    EV_ALLOC = 1, // size, aux = stack id, fn
    EV_FREE,      // size = the block's size, aux = its stack id, fn, extra = 1 when it was
                  // its thread's latest allocation, freed by that thread (temporary)
    EV_MMAP,      // size = length, aux = stack id, extra = prot | flags << 8 (low bits);
                  // the next event (EV_ADDR) holds the address
    EV_MUNMAP,    // size = length; the next event (EV_ADDR) holds the address
    EV_ADDR,      // size = the address of the event before
};

// 24 bytes: the heap events, nearly all of them, need no address (the trace names sites).
typedef struct hl_event_s {
    uint64_t ticks;
    uint64_t size;
    uint32_t aux;
    uint8_t kind;
    uint8_t fn;
    uint16_t extra;
} hl_event_t;

// Single-producer (the owning thread) single-consumer (the writer) ring.
#define HL_RING_EVENTS 16384u
// A header block its thread released (a header block's own record is the allocator's then):
// what a double free of it reports.
#define HL_RELEASED 128
typedef struct hl_released_s {
    uintptr_t addr;
    uint64_t size;
    uint32_t stack, release_stack;
    uint32_t owner; // thread index << 8 | fn
} hl_released_t;

typedef struct hl_ring_s {
    _Alignas(64) _Atomic uint64_t head; // written by the producer only
    uint64_t tail_cache;                // producer's last view of tail
    _Alignas(64) _Atomic uint64_t tail; // written by the consumer only
    _Alignas(64) uint32_t thread_index;
    int tid;
    _Atomic int is_dead;    // owner exited; writer drains then recycles
    struct hl_ring_s* next; // registry list
    uint64_t known_ticks;   // writer's: the latest time known for this ring's events
    uint32_t released_next; // owner's: count of released[] entries written
    hl_released_t released[HL_RELEASED];
    hl_event_t events[HL_RING_EVENTS];
} hl_ring_t;

// Per-thread agent state, reached through one pthread key rather than TLS: a TLS segment in
// the agent would make glibc size every thread's DTV for one more module, changing the
// program's own allocations. ring == NULL sends the first event through thread_attach().
typedef struct hl_thread_s {
    int busy;         // inside the agent: nested allocations go straight to the real ones
    int park_pending; // a stop-the-world request arrived while busy
    hl_ring_t* ring;
    uintptr_t last_alloc; // this thread's latest allocation while it lives (0: freed, none)
    uintptr_t in_flight;  // a block recorded and not yet handed to the program (a scan's root)
    uint32_t untimed;     // events since the last one with a time (while single-threaded)
    uint32_t index;       // thread index, 1-based, never reused within a trace
    int tid;
    void* unwind_cache; // unwind.c's per-thread step rules
} hl_thread_t;

extern pthread_key_t hl_thread_key;
// 0 until the key exists; HL_KEY_BY_TID while clone(CLONE_VM) children live (thread.c)
extern _Atomic int hl_thread_key_ready;
enum { HL_KEY_READY = 1, HL_KEY_BY_TID = 2 };
HL_COLD hl_thread_t* thread_self_slow(void);

// This thread's state; never NULL.
HL_INLINE hl_thread_t* thread_self(void) {
    if (hl_likely(atomic_load_explicit(&hl_thread_key_ready, memory_order_relaxed) ==
                  HL_KEY_READY)) {
        hl_thread_t* t = pthread_getspecific(hl_thread_key);
        if (hl_likely(t != NULL))
            return t;
    }
    return thread_self_slow();
}

// ---------------------------------------------------------------------------------------------
// options.c: HEAPLENS_* environment, parsed once.
// ---------------------------------------------------------------------------------------------
typedef struct hl_options_s {
    int depth;          // frames per backtrace
    int guard;          // guard bytes after each block (0 = allocator layout untouched)
    int sample_ms;      // heap/RSS sample period
    int no_follow;      // do not trace forked children or exec'd images
    int scan_at_exit;   // run the reachability scan at exit
    int is_disabled;    // HEAPLENS_DISABLE: pass everything through
    int release_stacks; // unwind releases too, so a double free names the first release
    size_t header_min;  // blocks of malloc/calloc/realloc from this size carry a header
    char output[1024];  // trace path template: %p pid, %e program name
    char session[1024]; // file that lists every trace this session writes
} hl_options_t;

extern hl_options_t hl_opt;
void options_load(void);

// ---------------------------------------------------------------------------------------------
// real.c: the functions underneath, and the bootstrap arena for calls made while resolving them.
// ---------------------------------------------------------------------------------------------
typedef struct hl_real_s {
    void* (*malloc)(size_t);
    void (*free)(void*);
    void* (*calloc)(size_t, size_t);
    void* (*realloc)(void*, size_t);
    int (*posix_memalign)(void**, size_t, size_t);
    void* (*aligned_alloc)(size_t, size_t);
    void* (*memalign)(size_t, size_t);
    void* (*valloc)(size_t);
    void* (*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void*);
    void* (*mmap)(void*, size_t, int, int, int, off_t);
    void* (*mmap64)(void*, size_t, int, int, int, off_t);
    int (*munmap)(void*, size_t);
    void* (*mremap)(void*, size_t, size_t, int, ...);
    void* (*dlopen)(const char*, int);
    int (*dlclose)(void*);
    void (*exit_)(int);
    void (*Exit)(int);
    int (*execve)(const char*, char* const[], char* const[]);
    int (*execv)(const char*, char* const[]);
    int (*execvp)(const char*, char* const[]);
    int (*execvpe)(const char*, char* const[], char* const[]);
    int (*fexecve)(int, char* const[], char* const[]);
    pid_t (*fork)(void);
    int (*sigaction)(int, const struct sigaction*, struct sigaction*);
    void (*(*signal)(int, void (*)(int)))(int);
    // glibc's own single-threaded flag (the one its fast paths read). An executable that names
    // __libc_single_threaded has a copy of its own, which is what that name means in here.
    char* libc_single_threaded;
} hl_real_t;

extern hl_real_t hl_real;
extern _Atomic int hl_real_ready; // 0 none, 1 resolving, 2 resolved
void real_resolve(void);
void* bootstrap_alloc(size_t size, size_t align);
int bootstrap_owns(const void* p);
size_t bootstrap_room(const void* p); // bytes from p to the arena's end in use
// An allocator defined ahead of the agent (the executable's own malloc): real_resolve makes it
// the one underneath and routes the calls bound to it to the agent's hooks;
// real_route_new_modules routes those of modules loaded since (after dlopen);
// real_foreign_report says, once tracing starts, what is seen and what is not.
int real_is_foreign(void); // some calls to the allocator (inside its module) go unseen
void real_foreign_report(void);
void real_route_new_modules(void);
int real_heap_coverage(void); // HL_INFO_HEAP_* flags of INFO: how much of the heap is seen

// ---------------------------------------------------------------------------------------------
// os.c: raw system calls, so the agent never re-enters its own hooks.
// ---------------------------------------------------------------------------------------------
void* os_map(size_t size);       // zeroed anonymous memory, or NULL
void* os_map_dense(size_t size); // the same, populated at once (for tables used whole)
void os_unmap(void* p, size_t size);
void* os_reserve(size_t size);         // large and lazily backed: pages cost only once touched
void os_discard(void* p, size_t size); // gives the pages back; they read as zeros after
int os_populate(void* p, size_t size); // 0 once every page is present and written, else -1
void os_yield(void);
long os_write_all(int fd, const void* buf, size_t len); // 0 or -errno
int os_gettid(void);
void os_futex_wait(_Atomic int* addr, int expected, long timeout_ns);
void os_futex_wake(_Atomic int* addr, int count);
int os_tgkill(int pid, int tid, int sig);
int os_is_agent_range(uintptr_t lo, uintptr_t hi); // overlaps memory os_map handed out?
size_t os_agent_ranges(uintptr_t (*out)[2], size_t max);
// Mappings the allocator underneath made for itself (mmap while inside a real malloc).
void os_note_allocator_map(uintptr_t lo, uintptr_t hi);
void os_note_allocator_unmap(uintptr_t lo, uintptr_t hi);
size_t os_allocator_ranges(uintptr_t (*out)[2], size_t max);

// ---------------------------------------------------------------------------------------------
// log.c: allocation-free diagnostics on stderr, rate limited.
// ---------------------------------------------------------------------------------------------
void log_init(void); // at start: the agent's own copy of stderr (none when 2 is not open)
void hl_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int hl_fmt(char* buf, size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// ---------------------------------------------------------------------------------------------
// thread.c: thread registry.
// ---------------------------------------------------------------------------------------------
HL_COLD int thread_attach(hl_thread_t* t); // 0, or -1 when tracing is off
hl_ring_t* thread_rings(void);             // head of the registry (writer side)
void thread_lock(void);
void thread_unlock(void);
void thread_reset_after_fork(void);
int thread_key_init(void);
uint32_t thread_count(void);
void thread_uncount_agent_thread(void); // the writer exists: not a thread of glibc's count
int thread_program_is_gone(void);       // writer: is every other task gone? (fallback only)
int thread_task_has_exited(int tid);    // gone, or a zombie (main after its pthread_exit)
int thread_tasks_alive_besides(int self, int other); // a live task but these two (0: none)?

// A child of clone(CLONE_VM), a thread of the program's own making (hooks_os.c starts it).
typedef struct hl_clone_child_s {
    int in_use;
    _Atomic int tid;    // written by the child first thing; looked up by thread_self_slow
    _Atomic int here;   // 1 until the kernel clears it: the child exited or exec'd
    int release_by;     // HL_CLONE_RELEASED_BY_*: who knows when the child has left
    hl_thread_t* state; // its own, never its parent's
    int (*fn)(void*);   // what the program asked the child to run
    void* arg;
} hl_clone_child_t;
enum {
    HL_CLONE_RELEASED_BY_KERNEL = 1, // `here` is its CLONE_CHILD_CLEARTID word (thread_clone_sweep)
    HL_CLONE_RELEASED_BY_PARENT,     // CLONE_VFORK: gone from here once clone returns
    HL_CLONE_RELEASED_BY_CHILD,      // when its function returns (the program has its own word)
};
hl_clone_child_t* thread_clone_reserve(void); // NULL when no slot or state is left
void thread_clone_release(hl_clone_child_t* c);
void thread_clone_sweep(void); // releases the children the kernel says are gone

// ---------------------------------------------------------------------------------------------
// ring (inline): the producer side, used on the hot path.
// ---------------------------------------------------------------------------------------------
HL_COLD void ring_wait_space(hl_ring_t* r);
HL_COLD void writer_kick(void);
extern _Atomic int hl_writer_sleeping;

HL_INLINE hl_event_t* ring_slot(hl_ring_t* r) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (hl_unlikely(h - r->tail_cache >= HL_RING_EVENTS)) {
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_cache >= HL_RING_EVENTS)
            ring_wait_space(r);
    }
    return &r->events[h & (HL_RING_EVENTS - 1)];
}

HL_INLINE void ring_commit(hl_ring_t* r) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed) + 1;
    atomic_store_explicit(&r->head, h, memory_order_release);
    if (hl_unlikely((h & (HL_RING_EVENTS / 4 - 1)) == 0) &&
        atomic_load_explicit(&hl_writer_sleeping, memory_order_relaxed))
        writer_kick();
}

// ---------------------------------------------------------------------------------------------
// unwind.c / stacks.c: backtraces, interned once.
// ---------------------------------------------------------------------------------------------
#define HL_MAX_DEPTH 256
int unwind_here(uintptr_t* ips, int max); // frames above the agent's own
// Intern ips (innermost first); 0 = no stack. node_of (may be NULL) receives, for each k, the
// node of the stack made of frames k..n-1 (the callers' stacks), so they can be reused.
uint32_t stack_intern(const uintptr_t* ips, int n, uint32_t* node_of);
// The stack made of `inner` (k frames, innermost first) called from the stack `base`:
// interning only what changed. node_of as for stack_intern (entries 0..k-1).
uint32_t stack_extend(uint32_t base, const uintptr_t* inner, int k, uint32_t* node_of);
// A prefix-tree node: its return address and its caller's node (0 at the outermost frame).
int stack_node(uint32_t id, uintptr_t* ip, uint32_t* parent); // 0, or -1 for no such node
uint32_t stack_count(void);                                   // ids are 1..stack_count()
void stacks_init(void);
void stacks_lock(void); // around fork: no node is being made
void stacks_unlock(void);
// The frame of the program under the agent's own (and, with HL_FRAME_PAST_LIBC, under libc's
// and the loader's; with HL_FRAME_PAST_SIGNAL, the one a signal interrupted, past the handler):
// its stack pointer and the callee-saved registers as that frame has them. 0, or -1 when the
// walk found no such frame (out then holds the outermost frame reached, is_program 0).
#define HL_FRAME_REGS 12
enum { HL_FRAME_PAST_LIBC = 1, HL_FRAME_PAST_SIGNAL = 2 };
typedef struct hl_frame_s {
    uintptr_t sp, ip;
    uintptr_t regs[HL_FRAME_REGS];
    int nregs;
    int is_signal;  // interrupted by a signal: it may use the red zone below sp
    int is_program; // the frame sought (not merely the last one reached)
} hl_frame_t;
int unwind_program_frame(int flags, hl_frame_t* out);
uint32_t stack_capture(hl_thread_t* t);         // unwind + intern, for the current call on thread t
uint32_t stack_capture_release(hl_thread_t* t); // the same, for a release (its own reuse cache)
void unwind_init(void);

// ---------------------------------------------------------------------------------------------
// live.c: every live heap block, by address.
// ---------------------------------------------------------------------------------------------
// Plain fields, no bit-fields: the hot path builds one per call, and a bit-field store is a
// read-modify-write of the word it shares (a stall when the word was just written in part).
typedef struct hl_block_s {
    uintptr_t addr;      // 0 = empty slot
    uint64_t size;       // requested bytes
    uint8_t fn;          // allocating HL_FN_*
    uint8_t state;       // HL_BLOCK_*
    uint8_t guarded;     // guard bytes follow the block
    uint8_t is_internal; // made by the agent's own libraries: tracked, never reported
    uint8_t headed;      // its record is in the HL_HEADER bytes before it (live_header.c)
    uint32_t stack;
    uint32_t thread; // owner thread; once FREED, the stack that released the block
} hl_block_t;

enum hl_block_state {
    HL_BLOCK_EMPTY = 0,
    HL_BLOCK_LIVE = 1,
    HL_BLOCK_FREED = 2,
    HL_BLOCK_TOMB = 3
};

// The record a block of malloc, calloc or realloc carries before it while guards are on: the
// allocator is asked for HL_HEADER more bytes, and its pointer is the program's minus these.
#define HL_HEADER 16
int live_header_room(uintptr_t addr); // may a block at addr carry a header? (marks made)

void live_init(void);
void live_prefetch(uintptr_t addr); // a hint before live_insert/live_remove of addr
void live_insert(const hl_block_t* b);
// Remove addr; copies what was there to *out. Returns HL_BLOCK_LIVE when a live block was
// removed, HL_BLOCK_FREED when addr is a recently freed block (its last owner in *out; for a
// header block only out->headed: record.c keeps what it was), or HL_BLOCK_EMPTY when the agent
// never saw it.
int live_remove(uintptr_t addr, hl_block_t* out, uint32_t release_stack);
int live_lookup(uintptr_t addr, hl_block_t* out);
void live_lock_all(void);
void live_unlock_all(void);
// Calls fn for every live block; the caller holds live_lock_all() or the world is stopped.
void live_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg);
uint64_t live_count(void);
void live_reset_after_fork(void);

// ---------------------------------------------------------------------------------------------
// record.c: the hot path proper.
// ---------------------------------------------------------------------------------------------
enum { HL_AS_GUARDED = 1, HL_AS_HEADED = 2 }; // how a block was laid out (record_alloc_as)
void record_alloc_as(hl_thread_t* t, void* p, size_t size, int fn, int how);
HL_INLINE void record_alloc(hl_thread_t* t, void* p, size_t size, int fn) {
    record_alloc_as(t, p, size, fn, hl_opt.guard > 0 ? HL_AS_GUARDED : 0);
}
// The pointer to pass to the real release function (p, or the start of p's header), or NULL
// when nothing must be passed (the call was a heap error that the allocator would crash on).
void* record_free(hl_thread_t* t, void* p, int fn);
// The same for a release the agent does not record (tracing off, or inside the agent).
void* record_free_untraced(void* p);
void record_mmap(hl_thread_t* t, void* p, size_t len, int prot, int flags);
void record_munmap(hl_thread_t* t, void* p, size_t len);
size_t record_usable_size(void* p); // requested size of a guarded block, else (size_t)-1
void record_internal_alloc(void* p, size_t size);
void record_internal_free(void* p);
// realloc: 0 = old block removed into *old; 1 = unknown block, pass through; 2 = heap error,
// do not call the allocator; -1 = tracing off.
int record_realloc_begin(hl_thread_t* t, void* p, hl_block_t* old);
void record_realloc_undo(const hl_block_t* old);
void record_realloc_done(hl_thread_t* t, const hl_block_t* old, void* q, size_t size, int fn);

// ---------------------------------------------------------------------------------------------
// hooks.c: the shared bodies, also used by the C++ operators.
// ---------------------------------------------------------------------------------------------
void* hook_alloc(size_t size, int fn);
void* hook_aligned(size_t align, size_t size, int fn);
void hook_free(void* p, int fn);

// ---------------------------------------------------------------------------------------------
// errors.c: heap errors, written straight to the trace.
// ---------------------------------------------------------------------------------------------
// block: the block involved (NULL: none); release_stack: where it was released before (0: n/a)
void error_report(int kind, int fn, uintptr_t addr, const hl_block_t* block,
                  uint32_t release_stack);
void error_check_guards_at_exit(void); // caller holds the writer lock
int guard_is_intact(const hl_block_t* b);
void guard_fill(void* p, size_t size);

// ---------------------------------------------------------------------------------------------
// writer.c: the background thread that drains rings and writes the trace.
// ---------------------------------------------------------------------------------------------
// sites.c: the writer's numbering of (size, stack) pairs, as format.h defines sites
void sites_define(uint64_t size, uint32_t stack);     // an ALLOC or INHERIT is being written
uint32_t sites_number(uint64_t size, uint32_t stack); // 0: not numbered (write the FREE in full)
void sites_reset(void);

int writer_start(void);                 // lazily, from the first slow path; 0 or -errno
void writer_flush_sync(void);           // drain everything now, write it out (caller: any thread)
void writer_modules_changed(void);      // after dlopen/dlclose, on the program thread that made it
void writer_finish(int how, int value); // final drain, scan records, END, close
void writer_reset_after_fork(uint32_t parent_threads);
void writer_clock_init(void);
int64_t writer_now_ns(void);
int writer_thread_id(void);
int writer_is_fork_child(void); // this trace belongs to a forked child       // tid of the writer
                                // thread, 0 when none runs
hl_enc_t* writer_encoder_locked(void); // drains, returns the encoder (writer lock held)
void writer_end_locked(int how, int value);
void writer_flush_if_large_locked(void); // cut the chunk once it is large
void writer_exec_locked(const char* path);
void writer_lock(void); // serialises direct writes from other threads
// An ERROR record, written at once (errors are rare; the record carries everything the report
// needs, so it may overtake the ring events of the same block).
void writer_put_error(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                      const hl_block_t* block, uint32_t release_stack);
void writer_put_error_locked(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                             const hl_block_t* block, uint32_t release_stack);
void writer_unlock(void);

// ---------------------------------------------------------------------------------------------
// encode.c / sink.c: records into chunks, chunks into the file.
// ---------------------------------------------------------------------------------------------
struct hl_enc_s {
    uint8_t* buf;
    size_t len, cap;
    int64_t last_time;   // microseconds, of the chunk's last timed record
    int64_t last_mark;   // nanoseconds, of the last TIME written (heap events are this old)
    uint32_t cur_thread; // of the heap events: the last SWITCH (0: none yet in this chunk)
    uint64_t last_verdict_addr;
    uint64_t last_ip;    // STACK records delta-code their address and id against the previous
    uint32_t last_stack; // one in the chunk
};

int sink_open(void);                           // create the trace file and write its header
int sink_feed(const uint8_t* raw, size_t len); // part of the open chunk
int sink_end_chunk(void);                      // close the open chunk and write it
void sink_close(void);
int sink_is_open(void);
int sink_has_failed(void);
void sink_reset_after_fork(void);
const char* sink_path(void);

// ---------------------------------------------------------------------------------------------
// modules.c: the loaded objects, reported as MODULE / MODULE_GONE records.
// ---------------------------------------------------------------------------------------------
void modules_refresh(hl_enc_t* enc);
void modules_reset(void);
extern uintptr_t hl_self_lo, hl_self_hi;
HL_INLINE int modules_own_text(uintptr_t ip) {
    return ip >= hl_self_lo && ip < hl_self_hi;
} // ours?
void modules_self_range(void);
void modules_own_range(uintptr_t* lo, uintptr_t* hi);

// ---------------------------------------------------------------------------------------------
// scan.c / classify.c: reachability.
// ---------------------------------------------------------------------------------------------
struct ucontext_t;
// A thread's own roots: its stack from lo up (its mapping's end), and its registers.
#define HL_THREAD_REGS 32
typedef struct hl_thread_roots_s {
    uintptr_t sp; // tells which mapping is its stack
    uintptr_t lo;
    int nregs;
    uintptr_t regs[HL_THREAD_REGS];
} hl_thread_roots_t;
// Before the world stops (it may take locks): the calling thread's roots, from the frame of the
// program under the agent's and the exit path's (uc: the context a fatal signal interrupted).
void scan_prepare(hl_thread_roots_t* self, const struct ucontext_t* uc);
int scan_stop_world(void); // 1 when every other thread parked with its registers
void scan_resume_world(void);
// Classify every live block and encode SCAN + VERDICT records (a SCAN saying HL_SCAN_NO_MEMORY
// when the scan cannot get its memory). The world is stopped; self from scan_prepare.
int scan_run_with(hl_enc_t* enc, const hl_thread_roots_t* self, int all_stopped);
void scan_park_self(void); // called when park_pending was set while busy
void scan_note_dead_stack(uintptr_t sp, uintptr_t tp);

// ---------------------------------------------------------------------------------------------
// init.c: life cycle.
// ---------------------------------------------------------------------------------------------
enum hl_phase { HL_OFF = 0, HL_BOOTING = 1, HL_ON = 2, HL_STOPPING = 3, HL_DONE = 4 };
extern _Atomic int hl_phase;
HL_COLD void agent_init(void);
void agent_finish(int how, int value);
void agent_fork_prepare(void); // around fork, and clone without CLONE_VM
void agent_fork_parent(void);
void agent_fork_child(void);
int agent_owns_process(void); // 0 in a child sharing the memory: vfork's, clone(CLONE_VM)'s
// The same from a signal handler: uc holds the interrupted registers (roots of the scan).
void agent_finish_in(int how, int value, const struct ucontext_t* uc);

// ---------------------------------------------------------------------------------------------
// hooks_signal.c: finishing on fatal signals, invisibly to the program.
// ---------------------------------------------------------------------------------------------
void signals_install(void);
void agent_before_exec(const char* path);
uint64_t agent_start_ticks(void);
int agent_is_from_start(void);

#endif
