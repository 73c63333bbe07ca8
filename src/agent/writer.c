// SPDX-License-Identifier: MIT
// writer.c - the writer thread: wakes every sample period (or when a ring is half full),
// drains every thread's ring in time order, encodes records, samples RSS and writes
// compressed chunks. All encoder state lives behind one lock that only the writer, heap-error
// reports, fork and exit take, never the allocation hot path.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "../common/clock.h"
#include "../common/varint.h"
#include "agent.h"
#include "allocstats.h"
#include "encode.h"
#include "epoch.h"
#include "live.h"
#include "log.h"
#include "modules.h"
#include "options.h"
#include "os.h"
#include "real.h"
#include "ring.h"
#include "scan.h"
#include "chunk.h"
#include "attach.h"
#include "control.h"
#include "sink.h"
#include "sites.h"
#include "stacks.h"
#include "thread.h"
#include "layout.h"
#include "unwind.h"
#include "writer.h"

_Atomic int hl_writer_sleeping;
_Atomic int hl_child_awaits_writer;
static _Atomic int writer_wake;
static _Atomic int writer_mutex;
static _Atomic int writer_running;
static _Atomic int writer_tid;
static hl_enc_t enc = {.last_mark = INT64_MIN / 2};
static uint8_t* stack_emitted;           // bitmap by stack id
static size_t stack_emitted_cap;         // bytes
static uint8_t thread_emitted[1u << 17]; // bitmap by thread index (1M threads)
static size_t thread_emitted_used;       // bytes of it that may hold a bit
static int need_preamble = 1;
static int is_fork_child;
static uint64_t last_flush_ns, next_sample_ns;
static uint64_t next_stats_ns; // the next allocator statistics (--allocator-stats)

// Tick -> ns since start. The rate is measured on every pass against CLOCK_MONOTONIC, over all
// the time since the start: a pass converts events no older than that, so an event's time is
// off by no more than the clocks' read jitter, whether the pass comes at 50 us or at 5 s. No
// waiting at the start to measure the rate first (it took 200 us of every process).
static uint64_t tick0, mono0;
static double ns_per_tick = 1.0;

static uint64_t drain_floor; // see time_of

void writer_clock_init(void) {
    tick0 = clock_ticks();
    drain_floor = tick0;
    mono0 = clock_mono_ns();
}

static void clock_recalibrate(void) {
#if HL_CLOCK_IS_TSC
    uint64_t t = clock_ticks(), m = clock_mono_ns();
    if (t != tick0 && m != mono0)
        ns_per_tick = (double)(m - mono0) / (double)(t - tick0);
#endif
}

static int64_t ticks_to_ns(uint64_t t) {
    return (int64_t)((double)(int64_t)(t - tick0) * ns_per_tick);
}
int64_t writer_now_ns(void) {
    clock_recalibrate();
    return ticks_to_ns(clock_ticks());
}
int writer_is_fork_child(void) {
    return is_fork_child;
}
int writer_thread_id(void) {
    // writer_start does not wait for the thread to run; a scan that must leave it alone does.
    while (atomic_load(&writer_running) && !atomic_load(&writer_tid))
        sched_yield();
    return atomic_load(&writer_running) ? writer_tid : 0;
}

// writer_mutex: 0 free, 1 held, 2 held while a thread may sleep for it. A pass is short and a
// waiter yields a few times first; the exit's scan and a trace's end hold the lock for a
// millisecond or more, and a waiter spinning through them (the writer, woken meanwhile) took a
// CPU from the program's other processes (make -j2) for as long.
// A thread waiting here parks when the writer stops the world (a scan from the control socket
// holds the lock while it waits for every thread to park): the stop's signal ends its sleep, and
// a sleep is at most HL_LOCK_NAP_NS, should the signal come just before it.
#define HL_LOCK_SPINS 16
#define HL_LOCK_NAP_NS 1000000L
// The thread holding writer_mutex (its tid; 0: none, or not yet said): a fatal signal's handler
// must not wait for a lock its own thread holds (agent_finish_in).
static _Atomic int writer_owner;

static inline int try_lock(void) {
    int v = 0;
    return atomic_compare_exchange_strong_explicit(&writer_mutex, &v, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void lock_mutex(void) {
    if (try_lock())
        return;
    for (int spins = 0;; spins++) {
        if (hl_unlikely(thread_self()->park_pending))
            scan_park_self();
        if (spins < HL_LOCK_SPINS) {
            if (try_lock())
                return;
            sched_yield();
            continue;
        }
        // Taken as 2 from here: whoever takes it after a sleep cannot know it is the last
        // sleeper, so its unlock wakes one more.
        if (atomic_exchange_explicit(&writer_mutex, 2, memory_order_acquire) == 0)
            return;
        os_futex_wait(&writer_mutex, 2, HL_LOCK_NAP_NS);
    }
}
void writer_lock(void) {
    lock_mutex();
    atomic_store_explicit(&writer_owner, os_gettid(), memory_order_relaxed);
}
void writer_unlock(void) {
    atomic_store_explicit(&writer_owner, 0, memory_order_relaxed);
    if (atomic_exchange_explicit(&writer_mutex, 0, memory_order_release) == 2)
        os_futex_wake(&writer_mutex, 1);
}
// A sleeper's wake is not owed here: a sleep lasts at most HL_LOCK_NAP_NS.
int writer_lock_within(long long ns) {
    for (long long waited = 0; !try_lock(); waited += HL_LOCK_NAP_NS) {
        if (waited >= ns)
            return -1;
        os_sleep_ns(HL_LOCK_NAP_NS);
    }
    atomic_store_explicit(&writer_owner, os_gettid(), memory_order_relaxed);
    return 0;
}
int writer_lock_is_mine(void) {
    return atomic_load_explicit(&writer_owner, memory_order_relaxed) == os_gettid();
}

// ---------------------------------------------------------------------------------------------
// Record helpers
// ---------------------------------------------------------------------------------------------
static long read_file(const char* p, char* buf, size_t cap) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long total = 0;
    for (;;) {
        long n = syscall(SYS_read, fd, buf + total, cap - 1 - (size_t)total);
        if (n <= 0)
            break;
        total += n;
        if ((size_t)total >= cap - 1)
            break;
    }
    close(fd);
    buf[total] = 0;
    return total;
}

static void emit_info(void) {
    static char argv_buf[8192];
    char exe[1024];
    long n = syscall(SYS_readlink, "/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    long alen = read_file("/proc/self/cmdline", argv_buf, sizeof argv_buf);
    if (alen < 0)
        alen = 0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    if (enc_reserve(&enc, 128 + strlen(exe) + (size_t)alen) != 0)
        return;
    enc_tag(&enc, REC_INFO);
    enc_u(&enc, (uint64_t)getpid());
    enc_u(&enc, (uint64_t)getppid());
    enc_u(&enc, (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec);
    enc_u(&enc, (uint64_t)hl_opt.depth);
    enc_u(&enc, (uint64_t)hl_opt.guard);
    enc_u(&enc, (agent_is_from_start() ? HL_INFO_FROM_START : 0) |
                    (HL_CLOCK_IS_TSC ? HL_INFO_TSC : 0) | (uint64_t)real_heap_coverage());
    enc_bytes(&enc, exe, strlen(exe));
    enc_bytes(&enc, argv_buf, (size_t)alen);
    enc_u(&enc, (uint64_t)is_fork_child);
}

static int stack_is_emitted(uint32_t id) {
    size_t byte = id >> 3;
    return byte < stack_emitted_cap && (stack_emitted[byte] & (1u << (id & 7)));
}

static int stack_mark_emitted(uint32_t id) {
    size_t byte = id >> 3;
    if (byte >= stack_emitted_cap) {
        size_t cap = stack_emitted_cap ? stack_emitted_cap : 4096;
        while (cap <= byte)
            cap *= 2;
        // Present at once: its bits are read before they are set, and a page first read is the
        // zero page, whose copy at the first set would flush the TLB of the program's CPUs.
        uint8_t* fresh = os_map_dense(cap);
        if (!fresh)
            return -1;
        if (stack_emitted) {
            memcpy(fresh, stack_emitted, stack_emitted_cap);
            os_unmap(stack_emitted, stack_emitted_cap);
        }
        stack_emitted = fresh;
        stack_emitted_cap = cap;
    }
    stack_emitted[byte] |= (uint8_t)(1u << (id & 7));
    return 0;
}

// Emits the FRAME records a stack id needs: its node and every ancestor not yet written,
// outermost first, so the reader always knows a node's parent before the node.
static HL_NOINLINE void emit_stack(uint32_t id) {
    uint32_t chain[HL_MAX_DEPTH + 1];
    int n = 0;
    while (id && !stack_is_emitted(id) && n <= HL_MAX_DEPTH) {
        uintptr_t ip;
        uint32_t parent;
        if (stack_node(id, &ip, &parent) != 0)
            break;
        chain[n++] = id;
        id = parent;
    }
    while (n-- > 0) {
        uintptr_t ip;
        uint32_t parent;
        stack_node(chain[n], &ip, &parent);
        if (enc_reserve(&enc, 32) != 0 || stack_mark_emitted(chain[n]) != 0)
            return;
        enc_tag(&enc, REC_STACK);
        enc_s(&enc, (int64_t)chain[n] - (int64_t)enc.last_stack);
        enc_u(&enc, chain[n] - parent);
        enc_s(&enc, (int64_t)(ip - enc.last_ip));
        enc.last_ip = ip;
        enc.last_stack = chain[n];
    }
}

// Most events name a stack already in the trace: that test, without emit_stack's frame (its
// 1 KiB array of ids) on every ALLOC.
static inline void ensure_stack(uint32_t id) {
    if (id && !stack_is_emitted(id))
        emit_stack(id);
}

static void ensure_thread(uint32_t index, int tid) {
    if (index >= (sizeof thread_emitted) * 8)
        return;
    if (thread_emitted[index >> 3] & (1u << (index & 7)))
        return;
    thread_emitted[index >> 3] |= (uint8_t)(1u << (index & 7));
    if ((index >> 3) >= thread_emitted_used)
        thread_emitted_used = (index >> 3) + 1;
    if (enc_reserve(&enc, 32) != 0)
        return;
    enc_tag(&enc, REC_THREAD);
    enc_u(&enc, index);
    enc_u(&enc, (uint64_t)tid);
}

static uint32_t inherit_max_thread; // blocks of threads up to this index came from the parent
static int is_begun_again;          // the trace goes on in a new sink: every live block is inherited
static int is_discarding;           // the events drained now belong to the part that was lost
// A chunk did not reach the collector. Until the trace begins again, what is encoded belongs to
// the lost part and is dropped. The new trace begins only where no drain is under way
// (begin_again_if_lost): a drain cut by it would go on encoding, into the new trace, events it
// took from the rings before the snapshot, and would then hand back ring space already given.
static int is_sink_lost;
static uint32_t trace_number = 1;   // this process's traces so far: a new one after a lost sink

// The heap as the trace says it so far (heaplens_stats), counted as the events are written.
static hl_heap_totals_t totals;

static void emit_inherited(const hl_block_t* b, void* arg) {
    (void)arg;
    if (b->is_internal || b->thread > inherit_max_thread)
        return; // the child's own blocks arrive as ALLOC records
    ensure_stack(b->stack);
    writer_flush_if_large_locked();
    if (enc_reserve(&enc, 80) != 0)
        return;
    sites_note(b->size, b->stack);
    totals.live_bytes += b->size;
    totals.live_blocks++;
    enc_tag(&enc, REC_INHERIT);
    enc_u(&enc, b->addr);
    enc_u(&enc, b->size);
    enc_u(&enc, b->stack);
    enc_u(&enc, b->fn);
    if (b->ignored) { // heaplens_ignore before the fork: this trace says it too
        enc_tag(&enc, REC_NOTE);
        enc_u(&enc, HL_NOTE_IGNORE);
        enc_u(&enc, sites_number(b->size, b->stack));
        enc_u(&enc, 0);
    }
}

static void preamble(void) {
    if (!need_preamble)
        return;
    need_preamble = 0;
    emit_info();
    if (is_begun_again) { // the world is stopped (trace_begin_again)
        modules_rewrite(&enc);
        inherit_max_thread = UINT32_MAX;
        totals.live_bytes = 0; // what is live is what the new trace begins with
        totals.live_blocks = 0;
        live_for_each(emit_inherited, NULL);
        thread_lock(); // and the old blocks of reallocs under way, their FREE still to come
        for (hl_ring_t* r = thread_rings(); r; r = r->next) {
            int depth = atomic_load_explicit(&r->unsaid_depth, memory_order_acquire);
            for (int k = 0; k < depth && k < HL_UNSAID; k++)
                emit_inherited(&r->unsaid[k], NULL);
        }
        thread_unlock();
        is_begun_again = 0;
    } else {
        modules_refresh(&enc);
        if (is_fork_child)
            live_for_each(emit_inherited, NULL);
    }
    writer_flush_if_large_locked();
}

// ---------------------------------------------------------------------------------------------
// Draining: a k-way merge by timestamp over the rings, so the trace is in time order across
// threads (each ring is already in order) to within HL_MERGE_SLACK_US.
// ---------------------------------------------------------------------------------------------
// Events of a single-threaded process mostly come without a time (record.c): theirs is the
// latest time known for their ring, from its last timed event or from the drain before (every
// event drained now was made after that drain looked at the ring).

static inline uint64_t time_of(const hl_event_t* ev, hl_ring_t* r) {
    if (ev->ticks && (int64_t)(ev->ticks - r->known_ticks) > 0)
        r->known_ticks = ev->ticks;
    return r->known_ticks;
}

static inline void count_alloc(hl_ring_stats_t* st, uint64_t size, int64_t t) {
    st->allocs++;
    st->alloc_bytes += size;
    totals.allocations++;
    totals.bytes_allocated += size;
    totals.live_blocks++;
    if ((totals.live_bytes += size) > totals.peak_bytes) {
        totals.peak_bytes = totals.live_bytes;
        totals.peak_blocks = totals.live_blocks;
        totals.peak_time_ns = t;
    }
}
static inline void count_free_total(uint64_t size) {
    totals.frees++;
    totals.live_blocks--;
    totals.live_bytes -= size;
}
static inline void count_free(hl_ring_stats_t* st, uint64_t size) {
    st->frees++;
    st->free_bytes += size;
    count_free_total(size);
}

// A FREE that names its block in full (function, size, stack) rather than by its site; -1 when
// there is no room for it. Its stack's FRAMEs first (room for each of them is made apart).
#define HL_FREE_EXPLICIT_MAX 48 // tag, and four varints of at most ten bytes
static int encode_free_explicit(int fn, uint64_t size, uint32_t stack) {
    ensure_stack(stack);
    if (enc_reserve(&enc, HL_FREE_EXPLICIT_MAX) != 0)
        return -1;
    enc_tag(&enc, REC_FREE_EXPLICIT);
    enc_u(&enc, (uint64_t)fn);
    enc_u(&enc, 0); // not a temporary
    enc_u(&enc, size);
    enc_u(&enc, stack);
    return 0;
}

// ev and, for the kinds that take two, the event after it (its address).
static void encode_event(const hl_event_t* ev, const hl_event_t* next, hl_ring_t* r) {
    if (hl_unlikely(enc.cur_thread != r->thread_index)) {
        ensure_thread(r->thread_index, r->tid);
        if (enc_reserve(&enc, 16) != 0)
            return;
        enc_tag(&enc, REC_SWITCH);
        enc_u(&enc, r->thread_index);
        enc.cur_thread = r->thread_index;
    }
    if (enc_reserve(&enc, 96) != 0)
        return;
    int64_t t = ticks_to_ns(time_of(ev, r));
    if (hl_unlikely(t - enc.last_mark >= (int64_t)HL_TIME_STEP_US * 1000)) {
        enc_tag(&enc, REC_TIME);
        enc_time(&enc, t);
        enc.last_mark = t;
    }
    switch (ev->kind) {
    case EV_ALLOC:
        count_alloc(&r->st, ev->size, t);
        r->alloc_trace = trace_number;
        ensure_stack(ev->aux);
        sites_note(ev->size, ev->aux);
        enc_tag(&enc, REC_ALLOC | (ev->fn & HL_REC_FN_MASK));
        enc_u(&enc, ev->size);
        enc_u(&enc, ev->aux);
        break;
    case EV_FREE: {
        count_free(&r->st, ev->size);
        // Its site is the one of this thread's latest ALLOC, when that went to this trace (not
        // to the part lost before trace_begin_again).
        if (ev->extra && r->alloc_trace == trace_number) {
            enc_tag(&enc, REC_FREE_TEMP | (ev->fn & HL_REC_FN_MASK));
            break;
        }
        uint32_t site = sites_number(ev->size, ev->aux);
        if (hl_likely(site)) {
            enc_tag(&enc, REC_FREE | (ev->fn & HL_REC_FN_MASK));
            enc_u(&enc, site);
        } else {
            // Its ALLOC is not written yet (another thread's block, released in the same
            // instant and drained first) or the site table is full: the FREE says it all.
            encode_free_explicit(ev->fn, ev->size, ev->aux);
        }
        break;
    }
    case EV_MMAP:
        ensure_stack(ev->aux);
        enc_tag(&enc, REC_MMAP);
        enc_u(&enc, next->size);
        enc_u(&enc, ev->size);
        enc_u(&enc, ev->extra & 0xff);
        enc_u(&enc, ev->extra >> 8);
        enc_u(&enc, ev->aux);
        break;
    case EV_MUNMAP:
        enc_tag(&enc, REC_MUNMAP);
        enc_u(&enc, next->size);
        enc_u(&enc, ev->size);
        break;
    case EV_NOTE:
        enc_tag(&enc, REC_NOTE);
        enc_u(&enc, ev->fn);
        if (ev->fn == HL_NOTE_IGNORE || ev->fn == HL_NOTE_UNIGNORE) {
            enc_u(&enc, sites_number(ev->size, ev->aux));
            enc_u(&enc, 0);
        } else {
            enc_u(&enc, (uint32_t)ev->size);
            enc_u(&enc, ev->size >> 32);
        }
        break;
    default:
        break;
    }
}

static inline const hl_event_t* event_at(const hl_ring_t* r, uint64_t pos) {
    return &r->events[pos & r->drain_mask];
}
static inline uint64_t head_ticks(const hl_ring_t* r, uint64_t pos) {
    return event_at(r, pos)->ticks;
}
static inline int takes_two(const hl_event_t* ev) {
    return ev->kind == EV_MMAP || ev->kind == EV_MUNMAP;
}

// A full ring: the producer waits for the writer to drain it (rather than drop the event), and
// never drains, compresses or writes on its own: the program's thread must not block on disk
// or network inside malloc. The writer wakes waiters once a merge round has handed back all it
// took (waking them at every partial hand-back cost a sleep and a wake per 256 events: cxx +12%
// CPU).
static _Atomic int drained;      // bumped by the writer when it hands space back
static _Atomic int ring_waiters; // producers waiting on `drained`
// A waiter looks again this often: a scan may ask it to park, or tracing may have stopped.
#define HL_RING_WAIT_NS 1000000L
#define HL_RING_SPINS 100 // yields before sleeping

static void ring_space_given(void) {
    atomic_fetch_add_explicit(&drained, 1, memory_order_release);
    if (atomic_load_explicit(&ring_waiters, memory_order_acquire))
        os_futex_wake(&drained, 1 << 30);
}

#define HL_MERGE_MAX 256 // rings merged in one round; more wait for the next round
#define HL_HAND_BACK 256ull // a ring's drained space is handed back every this many events
// Returns how many events it took from the rings.
static uint64_t drain_all(void) {
    clock_recalibrate(); // for the events drained now (a drain may come without a pass)
    preamble();
    // Threads that run at the same time would alternate event by event: a run of one thread's
    // events is taken while it is at most the slack past the others' next event, which keeps
    // each thread's repeating patterns whole for the compressor.
    uint64_t slack = (uint64_t)((double)HL_MERGE_SLACK_US * 1000.0 / ns_per_tick);
    uint64_t now = clock_ticks();
    uint64_t took = 0;
    for (;;) {
        hl_ring_t* rings[HL_MERGE_MAX];
        uint64_t pos[HL_MERGE_MAX], end[HL_MERGE_MAX];
        int k = 0, more = 0;
        thread_lock();
        for (hl_ring_t* r = thread_rings(); r; r = r->next) {
            int dead = atomic_load_explicit(&r->is_dead, memory_order_acquire);
            if (dead == 2)
                continue;
            uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
            uint64_t tl = atomic_load_explicit(&r->tail, memory_order_relaxed);
            // After head: the mask of every event before it.
            r->drain_mask = atomic_load_explicit(&r->mask, memory_order_relaxed);
            if ((int64_t)(h - tl) <= 0) { // (one past: void_waiting_events)
                if (dead == 1)
                    atomic_store_explicit(&r->is_dead, 2, memory_order_release);
                continue;
            }
            if (k == HL_MERGE_MAX) {
                more = 1;
                break;
            }
            // An event whose second half is not committed yet waits for the next pass.
            if (takes_two(event_at(r, h - 1)))
                h--;
            if (h == tl)
                continue;
            if ((int64_t)(drain_floor - r->known_ticks) > 0)
                r->known_ticks = drain_floor;
            rings[k] = r;
            pos[k] = tl;
            end[k] = h;
            k++;
        }
        thread_unlock();
        if (k == 0)
            break;
        for (int i = 0; i < k; i++)
            took += end[i] - pos[i];
        for (;;) {
            int best = -1, others = 0;
            uint64_t best_t = 0, next_t = 0; // the earliest head, and the earliest of the rest
            for (int i = 0; i < k; i++) {
                if (pos[i] == end[i])
                    continue;
                uint64_t t = head_ticks(rings[i], pos[i]);
                if (best < 0 || (int64_t)(t - best_t) < 0) {
                    if (best >= 0) {
                        next_t = best_t;
                        others = 1;
                    }
                    best = i;
                    best_t = t;
                } else if (!others || (int64_t)(t - next_t) < 0) {
                    next_t = t;
                    others = 1;
                }
            }
            if (best < 0)
                break;
            hl_ring_t* r = rings[best];
            do {
                const hl_event_t* ev = event_at(r, pos[best]);
                int two = takes_two(ev);
                encode_event(ev, two ? event_at(r, pos[best] + 1) : NULL, r);
                writer_flush_if_large_locked();
                uint64_t was = pos[best];
                pos[best] += 1 + two;
                if ((was ^ pos[best]) & ~(HL_HAND_BACK - 1)) // seen by a producer that looks
                    atomic_store_explicit(&r->tail, pos[best], memory_order_release);
            } while (pos[best] != end[best] &&
                     (!others || (int64_t)(head_ticks(r, pos[best]) - next_t - slack) <= 0));
        }
        for (int i = 0; i < k; i++)
            atomic_store_explicit(&rings[i]->tail, end[i], memory_order_release);
        ring_space_given();
        if (!more)
            break;
    }
    drain_floor = now;
    return took;
}

static void flush_chunk(void);

// A trace cut short (SIGKILL, an exit the agent cannot see) keeps what was written: a heap event
// is in the file at most HL_FLUSH_LAG_NS after it was made. Passes come at most
// HL_FLUSH_LAG_NS - HL_FLUSH_MARGIN_NS apart, and a pass ends the open chunk once an event in it
// may be that old; the margin is the pass's own time (drain, compress, write). A busy program's
// chunks then hold 8 ms of events each (up to 1 MiB): zstd's stream and window go on across
// chunks, so the cost is their headers and block ends, not lost matches.
#define HL_FLUSH_LAG_NS 10000000ull
#define HL_FLUSH_MARGIN_NS 2000000ull
#define HL_FLUSH_EVERY_NS (HL_FLUSH_LAG_NS - HL_FLUSH_MARGIN_NS)
// What is not a heap event (RSS samples, module records) may wait this long for a chunk's end.
#define HL_FLUSH_IDLE_NS 100000000ull

static uint64_t pass_start_ns;      // the last pass's drain began: later events were made after it
static uint64_t unwritten_since_ns; // no heap event of the open chunk was made before (0: none)
static _Atomic uint64_t next_pass_ns; // when the writer must pass again

// A chunk is compressed in parts of HL_FEED_BYTES raw bytes as they are encoded: rings are
// drained between parts, so a program filling its ring waits at most for one part (well under
// a millisecond at zstd level 1), while chunks stay large enough to compress well.
#define HL_FEED_BYTES (128u << 10)
#define HL_CHUNK_BYTES (1u << 20)

static size_t chunk_fed; // raw bytes of the open chunk already handed to the sink

// Chunks stay well under the reader's limit (HL_CHUNK_RAW_MAX): long runs of records (a
// scan's verdicts, a large drain) are cut into several.
void writer_flush_if_large_locked(void) {
    if (enc.len < HL_FEED_BYTES)
        return;
    if (is_discarding || is_sink_lost) { // these events have no trace to go to
        enc.len = 0;
        return;
    }
    chunk_feed(enc.buf, enc.len);
    chunk_fed += enc.len;
    enc.len = 0;
    if (chunk_fed >= HL_CHUNK_BYTES)
        flush_chunk();
}

// An empty chunk. Deltas restart per chunk, so each chunk decodes on its own after a damaged one.
static void chunk_restart(void) {
    enc.len = 0;
    chunk_fed = 0;
    enc.last_time = 0;
    enc.last_mark = INT64_MIN / 2; // the chunk's first heap event states its time
    enc.cur_thread = 0;            // and its thread
    enc.last_ip = 0;
    enc.last_stack = 0;
}

static void flush_chunk(void) {
    if (is_sink_lost) {
        chunk_restart();
        return;
    }
    if (enc.len == 0 && chunk_fed == 0)
        return;
    if (enc.len)
        chunk_feed(enc.buf, enc.len);
    const uint8_t* bytes;
    size_t len;
    if (chunk_end(&bytes, &len) == 0 && sink_write_chunk(bytes, len) == HL_SINK_LOST) {
        is_sink_lost = 1;
        if (os_gettid() != atomic_load(&writer_tid))
            writer_kick(); // the writer begins the new trace: the program may end before it wakes
    }
    chunk_restart();
    last_flush_ns = clock_mono_ns();
    unwritten_since_ns = 0;
}

static void trace_begin_again(void);

static void begin_again_if_lost(void) {
    if (is_sink_lost) {
        is_sink_lost = 0;
        trace_begin_again();
    }
}

static void sample(void) {
    char buf[256];
    uint64_t rss = 0;
    // thread-self: after main's pthread_exit, /proc/self is its zombie, which has no memory
    if (read_file("/proc/thread-self/statm", buf, sizeof buf) > 0) {
        const char* s = buf;
        while (*s && *s != ' ')
            s++;
        while (*s == ' ')
            s++;
        for (; *s >= '0' && *s <= '9'; s++)
            rss = rss * 10 + (uint64_t)(*s - '0');
        rss *= (uint64_t)sysconf(_SC_PAGESIZE);
        chunk_note_rss(rss);
        sites_note_rss(rss);
    }
    if (enc_reserve(&enc, 64) != 0)
        return;
    enc_tag(&enc, REC_SAMPLE);
    enc_time(&enc, writer_now_ns());
    enc_u(&enc, 0);
    enc_u(&enc, 0);
    enc_u(&enc, 0);
    enc_u(&enc, rss);
}

// While the program makes events fast, the writer comes back on its own when its rings are
// expected to be a quarter full, instead of sleeping until a producer wakes it: that wake was a
// system call on the program's thread (and an interrupt to the writer's CPU) every 4096 events,
// 2-3% of an allocation-bound program's time. `busy_nap_ns` is that time (0: not busy), from
// the rate the last drain saw; a ring half full wakes it sooner (ring_quarter), a full one too.
#define HL_BUSY_EVENTS (HL_RING_EVENTS / 16) // a drain of this many events: a busy program
#define HL_BUSY_NAP_MIN_NS 20000ull          // the writer's own pass costs about this
static _Atomic uint64_t busy_nap_ns; // written by whoever drains (a program thread may)

// Drains the rings, noting when the oldest event the open chunk may now hold was made.
static void drain_noting_age(void) {
    uint64_t start = clock_mono_ns();
    uint64_t took = drain_all();
    if (took && !unwritten_since_ns)
        unwritten_since_ns = pass_start_ns ? pass_start_ns : start;
    // The events came (at most) since the previous drain; all from one ring, at the worst.
    uint64_t since = pass_start_ns && start > pass_start_ns ? start - pass_start_ns : 0;
    uint64_t nap = 0;
    if (took >= HL_BUSY_EVENTS && since) {
        nap = (uint64_t)((double)since * (HL_RING_EVENTS / 4) / (double)took);
        nap = nap > HL_BUSY_NAP_MIN_NS ? nap : HL_BUSY_NAP_MIN_NS;
    }
    atomic_store_explicit(&busy_nap_ns, nap, memory_order_relaxed);
    pass_start_ns = start;
}

// One writer pass; the caller holds the writer lock. on_writer: the caller is the writer thread,
// not a program thread passing for it (a fork child before its writer, at each event), where
// memory made present ahead of the program would only move its page faults to the same thread,
// for a system call or two each time (brk, madvise).
static void pass(int force_flush, int on_writer) {
    clock_recalibrate();
    drain_noting_age();
    if (on_writer) {
        stacks_prepare();
        live_prepare();
    }
    uint64_t start = pass_start_ns;
    uint64_t now = clock_mono_ns();
    uint64_t period = (uint64_t)hl_opt.sample_ms * 1000000u;
    if (now >= next_sample_ns) {
        sample();
        // Due times stay on their grid when passes come more often than samples.
        next_sample_ns = now - next_sample_ns < period ? next_sample_ns + period : now + period;
    }
    if (force_flush || chunk_fed + enc.len >= HL_CHUNK_BYTES ||
        (unwritten_since_ns && now - unwritten_since_ns >= HL_FLUSH_EVERY_NS) ||
        now - last_flush_ns >= HL_FLUSH_IDLE_NS)
        flush_chunk();
    // On a program thread, only when no writer will pass (trace_begin_again needs the writer).
    if (is_sink_lost && (os_gettid() == atomic_load(&writer_tid) || !atomic_load(&writer_running)))
        begin_again_if_lost();
    uint64_t next = (unwritten_since_ns ? unwritten_since_ns : start) + HL_FLUSH_EVERY_NS;
    if (next > next_sample_ns)
        next = next_sample_ns;
    if (hl_opt.alloc_stats_ms && next > next_stats_ns)
        next = next_stats_ns;
    atomic_store_explicit(&next_pass_ns, next, memory_order_relaxed);
}

// --allocator-stats: the allocator's figures when due, and once more when the trace ends (the
// thread ending it asks and waits: writer_alloc_stats_final). Taken with no lock held (see
// allocstats.c), written under the writer lock; on this thread only, never on the program's.
static _Atomic int stats_final_wanted, stats_final_done;

// mallinfo2 and malloc_info walk every free chunk under its arena's lock: a heap of millions of
// free chunks takes milliseconds, while the program's mallocs in that arena wait. The samples
// then space out so that taking them holds the arenas at most 1/HL_STATS_DUTY of the time. The
// writer's CPU time is what counts: a writer descheduled on a busy machine is not slower.
#define HL_STATS_DUTY 100

static void alloc_stats_pass(void) {
    if (!hl_opt.alloc_stats_ms)
        return;
    int is_final = atomic_load(&stats_final_wanted);
    uint64_t now = clock_mono_ns();
    if (!is_final && now < next_stats_ns)
        return;
    uint64_t took = allocstats_take();
    writer_lock();
    if (atomic_load(&hl_phase) == HL_ON)
        allocstats_encode(&enc, writer_now_ns());
    uint64_t period = (uint64_t)hl_opt.alloc_stats_ms * 1000000u;
    next_stats_ns = now - next_stats_ns < period ? next_stats_ns + period : now + period;
    if (next_stats_ns < now + took * HL_STATS_DUTY)
        next_stats_ns = now + took * HL_STATS_DUTY;
    if (atomic_load_explicit(&next_pass_ns, memory_order_relaxed) > next_stats_ns)
        atomic_store_explicit(&next_pass_ns, next_stats_ns, memory_order_relaxed);
    writer_unlock();
    if (is_final) {
        atomic_store(&stats_final_wanted, 0);
        atomic_store(&stats_final_done, 1);
        os_futex_wake(&stats_final_done, 1);
    }
}

// The last sample of a trace, from the thread about to end it (before it stops the world: the
// writer must not wait for an arena lock a stopped thread holds). A writer that does not answer
// in time (a thread died inside malloc holding its arena's lock) is not waited for.
#define HL_STATS_FINAL_WAIT_NS 10000000L // a look every 10 ms
#define HL_STATS_FINAL_WAITS 25          // a quarter of a second at most
void writer_alloc_stats_final(void) {
    int tid = atomic_load(&writer_tid);
    if (!hl_opt.alloc_stats_ms || !atomic_load(&writer_running) || !tid || tid == os_gettid())
        return;
    atomic_store(&stats_final_done, 0);
    atomic_store(&stats_final_wanted, 1);
    writer_kick();
    for (int i = 0; i < HL_STATS_FINAL_WAITS && !atomic_load(&stats_final_done); i++)
        os_futex_wait(&stats_final_done, 0, HL_STATS_FINAL_WAIT_NS);
}

// How long the writer may sleep before its next pass.
static long pass_wait_ns(void) {
    uint64_t next = atomic_load_explicit(&next_pass_ns, memory_order_relaxed);
    uint64_t now = clock_mono_ns();
    return next > now ? (long)(next - now) : 0;
}

static void* writer_main(void* arg) {
    (void)arg;
    thread_self()->busy = 1; // nothing this thread does is the program's
    writer_tid = os_gettid();
    for (;;) {
        atomic_store(&writer_wake, 0);
        long wait = pass_wait_ns();
        uint64_t nap = atomic_load_explicit(&busy_nap_ns, memory_order_relaxed);
        if (nap && (uint64_t)wait > nap) {
            wait = (long)nap; // back before the producers would wake it
            atomic_store(&hl_writer_sleeping, HL_WRITER_NAPPING);
        } else {
            atomic_store(&hl_writer_sleeping, HL_WRITER_ASLEEP);
        }
        os_futex_wait(&writer_wake, 0, wait);
        atomic_store(&hl_writer_sleeping, HL_WRITER_AWAKE);
        writer_lock();
        int phase = atomic_load(&hl_phase);
        if (phase == HL_STOPPED) { // a `stop` ended the trace: only the socket, for `start`
            control_poll();
            writer_unlock();
            continue;
        }
        if (phase != HL_ON) {
            writer_unlock();
            break;
        }
        pass(0, 1);
        control_poll();
        writer_unlock();
        alloc_stats_pass();
        thread_clone_sweep();
        if (thread_program_is_gone()) {
            // Every thread of the program has exited and glibc's count (which includes this
            // thread: see thread.c) cannot say so: this thread is glibc's last. Returning, it
            // takes the count to zero and glibc calls exit(0) here, as it would have on the
            // program's last thread; the exit handlers finish the trace.
            atomic_store(&writer_tid, 0);
            atomic_store(&writer_running, 0);
            thread_self()->busy = 0;
            return NULL;
        }
    }
    if (attach_is_attached()) {
        // Detached: the process runs on as before the attach, without this thread. glibc
        // counts it again, so that its exit takes the count back where it was.
        thread_recount_agent_thread();
        thread_self()->busy = 0;
        atomic_store(&writer_tid, 0);
        atomic_store(&writer_running, 0);
        return NULL;
    }
    atomic_store(&writer_tid, 0);
    atomic_store(&writer_running, 0);
    // Never return while the program runs on: a returning thread runs glibc's thread exit
    // (freeing its DTV and its keys' values), which could take the lock-elided paths of
    // writer_start (tracing stops early on a full disk). Parked, it costs nothing and ends with
    // the process; glibc does not count it among the threads that keep the process alive.
    static _Atomic int never;
    for (;;)
        os_futex_wait(&never, 0, -1);
    return NULL;
}

// The producer's, at a quarter of a ring smaller than the most or at a fill (ring.h:
// HL_RING_BUSY_QUARTERS): 1 when the ring is to grow. A fill counts however long since the
// last: the writer did not keep up.
static int ring_is_busy(hl_ring_t* r, int is_fill) {
    uint64_t now = clock_ticks();
    if (is_fill || (double)(now - r->quarter_ticks) * ns_per_tick < HL_RING_QUARTER_NS)
        r->busy_quarters++;
    else
        r->busy_quarters = 0;
    r->quarter_ticks = now;
    return r->busy_quarters >= HL_RING_BUSY_QUARTERS;
}
static inline int ring_is_largest(const hl_ring_t* r) {
    return r->own_mask == HL_RING_EVENTS - 1;
}

// The producer's, at head h: the ring grows to the most a ring holds where ring_may_grow says it
// may, else at a later quarter.
static void ring_grow_at(hl_ring_t* r, uint64_t h) {
    uint64_t grown = HL_RING_EVENTS - 1;
    if (!ring_may_grow(atomic_load_explicit(&r->tail, memory_order_acquire), h, r->own_mask, grown))
        return;
    r->own_mask = grown;
    atomic_store_explicit(&r->mask, grown, memory_order_relaxed);
    r->busy_quarters = 0;
}

void ring_quarter(hl_ring_t* r, uint64_t h) {
    if (h & (r->own_mask >> 2))
        return;
    if (hl_unlikely(!ring_is_largest(r)) && ring_is_busy(r, 0))
        ring_grow_at(r, h);
    int how = atomic_load_explicit(&hl_writer_sleeping, memory_order_relaxed);
    if (how == HL_WRITER_ASLEEP ||
        (how == HL_WRITER_NAPPING &&
         h - atomic_load_explicit(&r->tail, memory_order_relaxed) > r->own_mask / 2))
        writer_kick();
}

void writer_kick(void) {
    atomic_store(&writer_wake, 1);
    os_futex_wake(&writer_wake, 1);
}

// The writer's stack is the agent's own memory, so the exit scan neither takes it for a root nor
// reads it: a stack of glibc's making is 8 MiB of anonymous memory that the scan read whole,
// faulting in a zero page every 4 KiB (/bin/true: 2.4K page faults, 60 ms of CPU per process).
// Reserved as glibc's would be (pages cost once touched), below it one page left inaccessible
// to catch an overflow. A fork child reuses its parent's: no thread of the parent runs there.
#define HL_WRITER_STACK (8u << 20)
static void* writer_stack(void) {
    static uint8_t* stack;
    static int stack_pid;
    int pid = (int)getpid();
    // A fork child's parent runs no thread there; an attached session's writer exited before
    // the next session began (writer_wait_gone).
    if (stack && (stack_pid != pid || attach_is_attached())) {
        stack_pid = pid;
        return stack;
    }
    const size_t page = 4096;
    uint8_t* at = os_reserve(HL_WRITER_STACK + page);
    if (!at)
        return NULL;
    syscall(SYS_mprotect, at, page, PROT_NONE);
    stack = at + page;
    stack_pid = pid;
    return stack;
}

// glibc runs a program with one thread on fast paths (malloc without arena locks, mutexes and
// shared_ptr counts without atomics) and leaves them for good once a second thread exists. The
// writer is a thread the program did not make: when the program had only one, glibc is told it
// still has one, so it runs as fast as without heaplens (python, sqlite3: 7-13% of their time).
// That holds because the writer never enters those paths: it does not allocate (its memory is
// os_map's), use stdio, or take glibc's locks (the loader's is taken by program threads, see
// writer_modules_changed). The program's own first pthread_create clears the flag as usual.
// The writer's tid as soon as it exists, not once it first runs: a scan must know it to leave it
// alone, and a short program that exits at once would otherwise wait for the scheduler to run
// the writer (1-10 ms per process on a busy machine). When this thread is the only other task,
// the new one is the writer; else its own first step says (writer_main).
typedef struct others_s {
    int self, other, count;
} others_t;

static void note_other(int tid, void* arg) {
    others_t* o = arg;
    if (tid != o->self) {
        o->other = tid;
        o->count++;
    }
}

static void note_writer_tid(void) {
    if (atomic_load(&writer_tid))
        return;
    others_t o = {os_gettid(), 0, 0};
    int none = 0;
    if (os_for_each_task(note_other, &o) > 0 && o.count == 1)
        atomic_compare_exchange_strong(&writer_tid, &none, o.other);
}

int writer_start(void) {
    if (atomic_exchange(&writer_running, 1))
        return 0;
    allocstats_prepare();
    char* libc_flag = hl_real.libc_single_threaded;
    // Attached, the writer exits at detach (glibc's thread exit takes its locks): glibc is
    // left knowing the process has two threads.
    // With --allocator-stats, too: mallinfo2 on this thread takes the arena locks, which glibc's
    // malloc skips while it believes itself single-threaded (allocstats.c).
    int was_single = libc_flag && *libc_flag && __libc_single_threaded && !attach_is_attached() &&
                     !hl_opt.alloc_stats_ms;
    pthread_t th;
    pthread_attr_t attr;
    sigset_t all, old;
    sigfillset(&all);
    // The host may expect to receive its signals on threads it made; the writer takes none.
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    void* stack = writer_stack();
    if (stack)
        pthread_attr_setstack(&attr, stack, HL_WRITER_STACK);
    int rc = pthread_create(&th, &attr, writer_main, NULL);
    if (rc == EINVAL && stack) { // a static TLS too large for it: a stack of glibc's making
        pthread_attr_destroy(&attr);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&th, &attr, writer_main, NULL);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        atomic_store(&writer_running, 0);
        return -rc;
    }
    note_writer_tid();
    thread_uncount_agent_thread(); // the process ends with the program's last thread
    if (was_single) {
        *libc_flag = 1;
        __libc_single_threaded = 1; // the executable's copy, when it has one
    }
    return 0;
}

// A fork child's writer waits for the child to need it. Most fork children exec or end within a
// millisecond of their first event (a shell's, before the program it runs), and a thread made
// for that moment, then killed by the exec, was 8% of a traced bash script's time (0.15 ms of
// each command; a writer that did nothing at all cost as much). Until then the child's own
// thread writes each of its events as it is made (writer_flush_sync: a write of a few dozen
// bytes), so that a child killed by SIGKILL, or one that waits for ever, has them in its file
// as with a writer; its exec or its end writes the rest as always. The writer starts at the
// child's first event once its trace is one sample period old (the first time-line sample
// would be taken then), at its HL_CHILD_SYNC_EVENTS-th event (it works: one write per event
// would cost it more than a thread), or when it makes a thread.
#define HL_CHILD_SYNC_EVENTS 16 // a shell's child makes 1-5 before its exec
static uint64_t child_writer_at;    // clock_ticks() from which the child's writer starts
static unsigned child_sync_events; // events the child has written itself

void writer_start_later(void) {
    clock_recalibrate();
    child_writer_at = clock_ticks() + (uint64_t)((double)hl_opt.sample_ms * 1e6 / ns_per_tick);
    child_sync_events = 0;
    thread_self()->untimed_mask = 0; // each event looks at the clock until then
    atomic_store(&hl_child_awaits_writer, 1);
}

// A child made with vfork or clone(CLONE_VM) shares this memory and thread state but not this
// process: a writer started there would live in its process (or die with its exec) while this
// one believed it had one, and its file is not its own to write. It leaves both to the owner.
void writer_child_event(uint64_t ticks) {
    if (!agent_owns_process())
        return;
    if (ticks >= child_writer_at || ++child_sync_events >= HL_CHILD_SYNC_EVENTS)
        writer_start_due();
    else
        writer_flush_sync();
}

void writer_start_due(void) {
    if (!agent_owns_process())
        return;
    if (atomic_exchange(&hl_child_awaits_writer, 0))
        writer_start();
    // The child's forking thread read the clock at each event; another thread that starts the
    // writer makes the process multi-threaded, where every event reads it anyway.
    thread_self()->untimed_mask = HL_UNTIMED_MASK;
}

// Signed: a tail one past the head takes the next slot as consumed already (void_waiting_events).
static int ring_has_space(hl_ring_t* r) {
    r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
    return (int64_t)(atomic_load_explicit(&r->head, memory_order_relaxed) - r->tail_cache) <=
           (int64_t)r->own_mask;
}

void ring_wait_space(hl_ring_t* r, int kind) {
    // A vfork or clone(CLONE_VM) child (agent_owns_process) waits for its owner's writer.
    if (!atomic_load(&writer_running) && agent_owns_process() && writer_start() != 0) {
        // No writer can run (no thread to be had): nothing will ever drain this ring.
        hl_log("cannot start the writer thread; tracing stops here, the program goes on");
        atomic_store(&hl_phase, HL_DONE);
    }
    atomic_store_explicit(&r->waiting_kind, kind, memory_order_relaxed);
    atomic_fetch_add(&ring_waiters, 1);
    for (int spins = 0;; spins++) {
        if (thread_self()->park_pending)
            scan_park_self(); // a scan waits for this thread; the writer waits for the scan
        int seen = atomic_load_explicit(&drained, memory_order_acquire);
        if (ring_has_space(r))
            break;
        if (atomic_load(&hl_phase) != HL_ON || !atomic_load(&writer_running)) {
            // Tracing is over (the trace is finished, or its writer is gone): what is left in
            // the ring will never be written; the slot is handed out again.
            atomic_store_explicit(&r->tail, atomic_load(&r->head) - r->own_mask,
                                  memory_order_release);
            continue;
        }
        writer_kick();
        // The writer, on another CPU, frees space within microseconds: yielding finds it sooner
        // than a sleep and a wake would; a writer that takes longer is waited for asleep.
        if (spins < HL_RING_SPINS)
            sched_yield();
        else
            os_futex_wait(&drained, seen, HL_RING_WAIT_NS);
    }
    atomic_fetch_sub(&ring_waiters, 1);
    atomic_store_explicit(&r->waiting_kind, 0, memory_order_relaxed);
    if (!ring_is_largest(r) && ring_is_busy(r, 1))
        ring_grow_at(r, atomic_load_explicit(&r->head, memory_order_relaxed));
}

// A new trace in this process: its own stream, which names every stack, thread, site and module
// again from the start.
static void forget_emitted(void) {
    is_sink_lost = 0; // what was lost is the old trace's
    chunk_restart_stream();
    if (stack_emitted)
        memset(stack_emitted, 0, stack_emitted_cap);
    memset(thread_emitted, 0, thread_emitted_used);
    thread_emitted_used = 0;
    sites_reset();
    trace_number++;
    need_preamble = 1;
}

void writer_stats(hl_heap_totals_t* out, const hl_ring_t* ring, hl_ring_stats_t* ring_out) {
    writer_lock();
    preamble(); // a forked child's inherited blocks are counted as they are written
    drain_noting_age();
    *out = totals;
    if (ring)
        *ring_out = ring->st;
    writer_unlock();
}

void writer_flush_sync(void) {
    writer_lock();
    pass(1, 0);
    writer_unlock();
}

void writer_flush_locked(void) {
    pass(1, 0);
}

#define HL_SCAN_NOW_TRIES 8 // stops of the world a scan, stop or start tries before giving up

// Stops every program thread with its events drained (what a scan or a new trace needs). 0, or
// -1 when not every thread would stop (the world runs again then).
static int stop_world_drained(int discard) {
    for (int tries = 1;; tries++) {
        int all = scan_stop_world();
        is_discarding = discard;
        drain_noting_age();
        is_discarding = 0;
        if (all)
            return 0;
        scan_resume_world();
        if (tries == HL_SCAN_NOW_TRIES)
            return -1;
    }
}

// A thread parked waiting for ring space holds one event not yet in its ring. An ALLOC's block is
// already in the live table, a FREE's already out of it: the snapshot that begins a new trace
// says so, and the event is dropped: the slot it will take is handed over as consumed already (a
// tail one past the head). Other kinds (an mmap, a mark, a tag) are not in the snapshot and
// follow it.
static void void_waiting_events(void) {
    thread_lock();
    for (hl_ring_t* r = thread_rings(); r; r = r->next) {
        int kind = atomic_load(&r->waiting_kind);
        if (kind != EV_ALLOC && kind != EV_FREE)
            continue;
        uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
        if (atomic_load_explicit(&r->tail, memory_order_relaxed) == h) // drained: no half pair
            atomic_store_explicit(&r->tail, h + 1, memory_order_release);
    }
    thread_unlock();
}

// The collector went away (sink.c): the trace goes on in a local file, as a trace of its own
// from the start of a new stream, which names every stack, thread, site and module again and
// begins with the blocks live now (INHERIT, as a fork child's does); what the lost chunk held is
// not in it. That snapshot must agree with the events that follow it, so it is taken with the
// program's threads stopped, every event they made out of the rings (or dropped, for a thread
// waiting for ring space): on the writer thread only (a program thread flushing at fork, exec
// or exit cannot stop the others), and only when every thread parked.
static void trace_begin_again(void) {
    if (os_gettid() != atomic_load(&writer_tid)) {
        sink_fall_back("the trace cannot go on from this thread");
        return;
    }
    if (stop_world_drained(1) != 0) { // what it drains belongs to the part that was lost
        sink_fall_back("not every thread could be stopped to begin a new trace");
        return;
    }
    void_waiting_events();
    chunk_restart();
    if (sink_fall_back(NULL) == 0) {
        forget_emitted();
        is_begun_again = 1; // it begins with the blocks live now
        preamble();
    }
    scan_resume_world();
}

int writer_stop_locked(void) {
    if (atomic_load(&hl_phase) != HL_ON || stop_world_drained(0) != 0)
        return -1;
    hl_thread_roots_t none = {0};
    if (hl_opt.scan_at_exit)
        scan_run_with(&enc, &none, &(hl_scan_request_t){.all_stopped = 1, .at_exit = 1});
    // From here the hooks pass calls through (releases still leave the live table).
    atomic_store(&hl_phase, HL_STOPPED);
    scan_resume_world();
    writer_end_locked(HL_END_STOP, 0);
    return 0;
}

// A new trace in a new file, from a stopped one: it begins with every block live now (INHERIT),
// as a trace that goes on after a lost collector does; the blocks made while stopped are
// unknown, as before an attach.
static int next_depth; // a `depth` command's, for the next trace (0: unchanged)

void writer_set_next_depth(int depth) {
    next_depth = depth;
}

int writer_start_again_locked(void) {
    if (atomic_load(&hl_phase) != HL_STOPPED || stop_world_drained(1) != 0)
        return -1;
    if (next_depth) { // every thread is stopped: no capture reads it meanwhile
        hl_opt.depth = next_depth;
        unwind_forget_recent();
    }
    next_depth = 0;
    chunk_restart();
    if (sink_open() != 0) {
        scan_resume_world();
        return -1;
    }
    forget_emitted();
    is_begun_again = 1; // it begins with the blocks live now
    agent_note_not_from_start();
    preamble();
    atomic_store(&hl_phase, HL_ON);
    scan_resume_world();
    flush_chunk();
    return 0;
}


void writer_ensure_stack_locked(uint32_t id) {
    if (atomic_load(&hl_phase) == HL_ON)
        ensure_stack(id);
}

// Every event made before the scan is in the trace before it, but for one per thread parked
// waiting for ring space (a program allocating flat out on many threads always has some):
// its block is judged by the scan as it is in the live table, and its event follows the scan.
// The writer's own stack and registers are the agent's: its roots are none (the program's
// threads are all parked, with theirs).
int writer_scan_now_locked(const hl_thread_roots_t* self, const hl_scan_request_t* what) {
    // The epoch lock is not taken: a thread parked inside a rebase leaves some blocks older
    // than the floor relabelled and some not, and either label reads as older than any check
    // still told apart (since_epoch is after the floor).
    if (atomic_load(&hl_phase) != HL_ON || stop_world_drained(0) != 0)
        return -1;
    hl_thread_roots_t none = {0};
    hl_scan_request_t req = *what;
    req.all_stopped = 1;
    scan_run_with(&enc, self ? self : &none, &req);
    scan_resume_world();
    flush_chunk();
    return 0;
}

// The module list changed (dlopen, dlclose): what came before is encoded against the old list,
// then the list is read again. On the calling program thread, never on the writer: reading it
// takes the loader's lock, which glibc takes without atomics while it believes the process
// single-threaded (see writer_start).
void writer_modules_changed(void) {
    writer_lock();
    drain_noting_age();
    modules_refresh(&enc);
    writer_unlock();
}

void writer_put_error_locked(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                             const hl_block_t* block, uint32_t release_stack) {
    preamble();
    release_stack = stack_innermost(release_stack, HL_RELEASE_DEPTH); // taken at full depth
    ensure_stack(call_stack);
    ensure_stack(release_stack);
    if (block)
        ensure_stack(block->stack);
    if (enc_reserve(&enc, 160) == 0) {
        enc_tag(&enc, REC_ERROR);
        enc_u(&enc, (uint64_t)kind);
        enc_u(&enc, thread);
        enc_time(&enc, writer_now_ns());
        enc_u(&enc, call_stack);
        enc_u(&enc, addr);
        enc_u(&enc, (uint64_t)fn);
        enc_u(&enc, block ? 1 : 0);
        if (block) {
            enc_u(&enc, block->size);
            enc_u(&enc, block->stack);
            enc_u(&enc, block->fn);
            enc_u(&enc, release_stack);
        }
    }
}

void writer_put_change_locked(const hl_change_t* c) {
    if (enc_reserve(&enc, 32 + 2 * HL_CHANGE_BYTES) != 0)
        return;
    enc_tag(&enc, REC_ERROR_CHANGE);
    enc_s(&enc, c->offset);
    enc_u(&enc, c->length);
    enc_u(&enc, c->n);
    for (uint32_t k = 0; k < c->n; k++)
        enc_u(&enc, c->seen[k]);
    for (uint32_t k = 0; k < c->n; k++)
        enc_u(&enc, c->expected[k]);
}

void writer_put_error(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                      const hl_block_t* block, uint32_t release_stack) {
    writer_lock();
    writer_put_error_locked(kind, thread, call_stack, addr, fn, block, release_stack);
    writer_unlock();
}

// ---------------------------------------------------------------------------------------------
// The end: everything drained, the scan's verdicts, END, and the file closed.
// The caller has stopped the world (or knows it is alone) and holds the writer lock.
// ---------------------------------------------------------------------------------------------
hl_enc_t* writer_encoder_locked(void) {
    pass(0, 0);
    return &enc;
}

void writer_free_at_exit_locked(const hl_block_t* b) {
    if (encode_free_explicit(HL_FN_FREE, b->size, b->stack) == 0)
        count_free_total(b->size);
}

void writer_release_window_locked(void) {
    drain_all();
    // A chunk must end the frame: a record makes sure there is one to end (its time is that of
    // the records after it, which the next chunk states again).
    if (enc_reserve(&enc, 16) == 0) {
        enc_tag(&enc, REC_TIME);
        enc_time(&enc, writer_now_ns());
    }
    chunk_release_window();
    flush_chunk();
}

void writer_end_locked(int how, int value) {
    atomic_store(&hl_child_awaits_writer, 0); // the trace is over: no writer is wanted for it
    drain_all();
    begin_again_if_lost();
    if (enc_reserve(&enc, 32) == 0) {
        enc_tag(&enc, REC_END);
        enc_time(&enc, writer_now_ns());
        enc_u(&enc, (uint64_t)how);
        enc_u(&enc, (uint64_t)value);
    }
    flush_chunk();
    if (is_sink_lost) {
        is_sink_lost = 0;
        sink_fall_back("the trace's end did not reach it");
    }
    sink_close();
}

void writer_exec_locked(const char* path) {
    drain_all();
    size_t n = strlen(path);
    if (enc_reserve(&enc, 32 + n) == 0) {
        enc_tag(&enc, REC_EXEC);
        enc_time(&enc, writer_now_ns());
        enc_bytes(&enc, path, n);
    }
    flush_chunk();
    begin_again_if_lost(); // on the program's thread: it says the trace stops here
}

#define HL_WRITER_GONE_WAITS 2000 // a look every millisecond: two seconds at most
void writer_wait_gone(void) {
    static _Atomic int never;
    int tid = atomic_load(&writer_tid);
    writer_kick();
    for (int i = 0; i < HL_WRITER_GONE_WAITS; i++) {
        if (!atomic_load(&writer_running) && (!tid || thread_task_has_exited(tid)))
            return;
        os_futex_wait(&never, 0, 1000000L);
    }
}

void writer_session_reset(void) {
    atomic_store(&hl_child_awaits_writer, 0);
    chunk_restart();
    forget_emitted();
    is_fork_child = 0;
    last_flush_ns = clock_mono_ns();
    unwritten_since_ns = 0;
}

void writer_reset_after_fork(uint32_t parent_threads) {
    inherit_max_thread = parent_threads;
    is_sink_lost = 0; // the child's trace is a new one, in a sink of its own
    memset(&totals, 0, sizeof totals);
    atomic_store(&writer_mutex, 0);
    atomic_store(&writer_owner, 0);
    atomic_store(&writer_running, 0);
    atomic_store(&writer_tid, 0);
    atomic_store(&hl_writer_sleeping, HL_WRITER_AWAKE);
    atomic_store(&hl_child_awaits_writer, 0); // this child's first event sets it (if it has one)
    chunk_restart();
    // What the parent's trace named is given back, not cleared: a clearing write copied every
    // page of it the parent had written, and wrote all 128 KiB of thread_emitted (0.06 ms of
    // each fork of a traced bash, whose child execs at once). The pages read as zeros again.
    if (stack_emitted)
        os_discard(stack_emitted, stack_emitted_cap);
    sites_reset_after_fork(); // the child's trace numbers its sites from 1, as its reader will
    memset(thread_emitted, 0, thread_emitted_used);
    thread_emitted_used = 0;
    need_preamble = 1;
    is_fork_child = 1;
    next_stats_ns = 0;
    atomic_store(&stats_final_wanted, 0);
    allocstats_reset_after_fork();
    last_flush_ns = clock_mono_ns();
    unwritten_since_ns = 0;
}
