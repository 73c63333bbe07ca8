// SPDX-License-Identifier: MIT
// scan.c - the reachability scan: stop every other thread with its registers saved, gather the
// roots (writable mappings that are not heap, each thread's stack from its stack pointer, the
// saved registers; static TLS lies in those), classify (classify.c) and write one VERDICT per
// live block. The agent's own memory is neither a root nor scanned.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "addr_sort.h"
#include "encode.h"
#include "epoch.h"
#include "libc_exit.h"
#include "live.h"
#include "log.h"
#include "lost_set.h"
#include "modules.h"
#include "options.h"
#include "os.h"
#include "pagemap.h"
#include "real.h"
#include "scan.h"
#include "thread.h"
#include "unwind.h"
#include "writer.h"
#include "agent.h"
#include "classify.h"

// ---------------------------------------------------------------------------------------------
// A thread's own roots: its stack from the program's frame up, and its registers
// ---------------------------------------------------------------------------------------------
// memcheck's allocator and exit path run on stacks of their own, so the program's stack never
// holds their copies of pointers. The agent's run on the program's: below the frame the program
// called it from (or, at exit, below the frame that called exit) lie dead frames full of stale
// copies of pointers the program no longer holds. A thread's stack is scanned from that frame
// up, with the registers that frame has (the callee-saved ones, restored through every frame
// below it); a thread a signal stopped in the program's own code has it all in the signal's
// context.
#if defined(__x86_64__)
#define HL_RED_ZONE 128 // the SysV ABI lets a leaf function use 128 bytes below its stack pointer
#else
#define HL_RED_ZONE 0
#endif

static uintptr_t context_ip(const ucontext_t* uc) {
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__i386__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

static void roots_from_context(hl_thread_roots_t* r, const ucontext_t* uc) {
    r->nregs = 0;
#if defined(__x86_64__)
    r->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    for (int i = 0; i < NGREG && r->nregs < HL_THREAD_REGS; i++)
        r->regs[r->nregs++] = (uintptr_t)uc->uc_mcontext.gregs[i];
#elif defined(__i386__)
    r->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_ESP];
    for (int i = 0; i < NGREG && r->nregs < HL_THREAD_REGS; i++)
        r->regs[r->nregs++] = (uintptr_t)uc->uc_mcontext.gregs[i];
#elif defined(__aarch64__)
    r->sp = (uintptr_t)uc->uc_mcontext.sp;
    for (int i = 0; i < 31 && r->nregs < HL_THREAD_REGS; i++)
        r->regs[r->nregs++] = (uintptr_t)uc->uc_mcontext.regs[i];
#else
    (void)uc;
    r->sp = (uintptr_t)__builtin_frame_address(0);
#endif
    r->lo = r->sp - HL_RED_ZONE;
}

// Where unwinding fails: this very frame, as before the fix (stale copies may then count).
static HL_COLD HL_NOINLINE void roots_from_here(hl_thread_roots_t* r) {
    ucontext_t uc;
    memset(&uc, 0, sizeof uc); // getcontext leaves the XMM slots unwritten: no stale bytes
    if (getcontext(&uc) == 0)
        roots_from_context(r, &uc);
    else
        *r = (hl_thread_roots_t){.sp = (uintptr_t)&uc, .lo = (uintptr_t)&uc};
}

// The program's frame under this call (flags: unwind_program_frame's). A walk that got past the
// agent but found no such frame stops at the outermost frame it reached: the stack above that
// is the program's too.
static int roots_from_frame(hl_thread_roots_t* r, int flags) {
    hl_frame_t f;
    if (unwind_program_frame(flags, &f) != 0 && (!f.sp || !f.ip || modules_own_text(f.ip)))
        return -1;
    r->sp = f.sp;
    r->lo = f.is_signal ? f.sp - HL_RED_ZONE : f.sp;
    r->nregs = 0;
    for (int i = 0; i < f.nregs && r->nregs < HL_THREAD_REGS; i++)
        r->regs[r->nregs++] = f.regs[i];
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Stopping the world
// ---------------------------------------------------------------------------------------------
#define HL_MAX_PARKED 8192

typedef struct parked_s {
    int tid;
    _Atomic int is_parked;
    hl_thread_roots_t roots;
} parked_t;

static parked_t* parked;
static int nparked;
static _Atomic int parked_count;
static _Atomic int resume_flag;
static int park_signal;

static parked_t* own_slot(void) {
    int tid = os_gettid();
    for (int i = 0; i < nparked; i++)
        if (parked[i].tid == tid)
            return atomic_load(&parked[i].is_parked) ? NULL : &parked[i];
    return NULL;
}

static _Atomic int in_park; // threads inside park(), told to resume or not

static void park(parked_t* slot) {
    atomic_fetch_add(&in_park, 1);
    atomic_store(&slot->is_parked, 1);
    atomic_fetch_add(&parked_count, 1);
    os_futex_wake(&parked_count, 1);
    while (!atomic_load(&resume_flag))
        os_futex_wait(&resume_flag, 0, 50000000L);
    atomic_fetch_sub(&in_park, 1);
}

static void on_park(int sig, siginfo_t* si, void* ucv) {
    (void)sig, (void)si;
    int saved = errno;
    hl_thread_t* t = NULL;
    if (thread_owe_park_if_locked()) {
        // holds the registry's lock, which the writer needs: parks as it lets go (thread_unlock)
    } else if ((t = thread_self_known()) && t->busy) {
        t->park_pending = 1; // inside the agent: park where its tables are consistent
    } else {
        parked_t* slot = own_slot();
        if (slot) {
            roots_from_context(&slot->roots, ucv);
            park(slot);
        }
    }
    errno = saved;
}

// A thread asked to park while it held the registry's lock parks once it has let go of it, deep
// in the agent's frames (making its own state, or ending): its roots are the program's frame
// under them.
void scan_park_owed(void) {
    int saved = errno;
    parked_t* slot = own_slot();
    if (slot) {
        if (roots_from_frame(&slot->roots, 0) != 0)
            roots_from_here(&slot->roots);
        park(slot);
    }
    errno = saved;
}

// A thread asked to park while inside the agent parks here, at a point where the agent's tables
// are consistent, deep in the agent's frames: its roots are the program's frame under them, and
// the block it is handing back to the program (live, not yet in any of the program's places).
void scan_park_self(void) {
    hl_thread_t* t = thread_self();
    t->park_pending = 0;
    parked_t* slot = own_slot();
    if (!slot)
        return;
    hl_thread_roots_t* r = &slot->roots;
    if (roots_from_frame(r, 0) != 0)
        roots_from_here(r);
    if (t->in_flight && r->nregs < HL_THREAD_REGS)
        r->regs[r->nregs++] = t->in_flight;
    park(slot);
}

// The whole of a /proc file into *buf (agent memory, grown as needed and kept for the next
// call), zero-terminated. Its length, or -1 when it cannot be read or memory runs out.
#define HL_PROC_FIRST (64u << 10) // a typical /proc/self/maps needs less
#define HL_PROC_READ 4096         // the kernel hands /proc files out a page at a time
static long read_all(const char* path, char** buf, size_t* cap) {
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    long rc = 0;
    for (;;) {
        if (!*buf || len + HL_PROC_READ + 1 > *cap) {
            size_t ncap = *cap ? *cap * 2 : HL_PROC_FIRST;
            char* fresh = os_map(ncap);
            if (!fresh) {
                rc = -1;
                break;
            }
            if (*buf) {
                memcpy(fresh, *buf, len);
                os_unmap(*buf, *cap);
            }
            *buf = fresh;
            *cap = ncap;
        }
        long n = syscall(SYS_read, fd, *buf + len, *cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    if (rc < 0)
        return -1;
    (*buf)[len] = 0;
    return (long)len;
}

// Every thread of the process but this one and the agent's writer, into parked[] (when given).
// Returns how many there are.
typedef struct listing_s {
    int self, writer, pid;
    parked_t* out;
    int max, n;
} listing_t;

static void list_one(int tid, void* arg) {
    listing_t* l = arg;
    if (tid == l->self || tid == l->writer)
        return;
    if (tid == l->pid && thread_task_has_exited(tid))
        return; // main's pthread_exit: a zombie until the process ends, takes no signal
    if (l->out && l->n < l->max) {
        l->out[l->n].tid = tid;
        atomic_store(&l->out[l->n].is_parked, 0);
    }
    l->n++;
}

static int list_other_threads(int self_tid, parked_t* out, int max) {
    listing_t l = {self_tid, writer_thread_id(), (int)getpid(), out, max, 0};
    os_for_each_task(list_one, &l);
    return l.n;
}

// Other threads go on running (no memory to stop them): the heap may change under the scan.
static int world_runs_on;

#define HL_PARK_WAIT_NS 10000000L // a look every 10 ms
#define HL_PARK_WAITS 200          // two seconds at most

// Listed threads that have not parked and are gone (exited, or a zombie).
static int gone_unparked(void) {
    int n = 0;
    for (int i = 0; i < nparked; i++)
        n += !atomic_load(&parked[i].is_parked) && thread_task_has_exited(parked[i].tid);
    return n;
}

// The signal that asks a thread to park: a real-time signal the program has no handler for (a
// program may use any of them; glibc keeps the first two for itself), looked for from the top,
// where programs rarely look. The agent's handler takes it for the stop only, then the program's
// disposition is put back. With every one taken, the top one (its handler is restored after).
#define HL_PARK_SIGNAL_LOOK 8 // from SIGRTMAX down: how many are tried
static int choose_park_signal(void) {
    for (int sig = SIGRTMAX; sig > SIGRTMAX - HL_PARK_SIGNAL_LOOK && sig >= SIGRTMIN; sig--) {
        struct sigaction cur;
        if (sigaction(sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == SIG_DFL)
            return sig;
    }
    return SIGRTMAX;
}

// Signals every other thread of the process (but the agent's own) and waits for each to park.
// Returns 1 when all did. Threads that block the signal are scanned without registers.
static int stop_world(int self_tid) {
    world_runs_on = 0;
    if (!parked)
        parked = os_map(HL_MAX_PARKED * sizeof(parked_t));
    if (!parked) {
        world_runs_on = list_other_threads(self_tid, NULL, 0) > 0;
        nparked = 0;
        return !world_runs_on;
    }
    atomic_store(&parked_count, 0);
    atomic_store(&resume_flag, 0);
    // nparked stays 0 while the list is made: a thread parking meanwhile finds no slot.
    nparked = 0;
    int n = list_other_threads(self_tid, parked, HL_MAX_PARKED);
    nparked = n < HL_MAX_PARKED ? n : HL_MAX_PARKED;
    if (n == 0)
        return 1; // alone (a single-threaded program's exit): no signal to lend and take back
    park_signal = choose_park_signal();
    struct sigaction sa = {0}, old;
    sa.sa_sigaction = on_park;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(park_signal, &sa, &old);
    for (int i = 0; i < nparked; i++)
        os_tgkill(getpid(), parked[i].tid, park_signal);
    // Two seconds is far more than a scheduled thread needs to take a signal. A thread that
    // exits meanwhile (it may block every signal on its way out) is as good as parked.
    int settled = 0;
    for (int waited = 0; waited < HL_PARK_WAITS && settled < n; waited++) {
        int count = atomic_load(&parked_count);
        settled = count + gone_unparked();
        if (settled < n)
            os_futex_wait(&parked_count, count, HL_PARK_WAIT_NS);
    }
    sigaction(park_signal, &old, NULL);
    return settled >= n;
}

static void resume_world(void) {
    atomic_store(&resume_flag, 1);
    os_futex_wake(&resume_flag, 1 << 30);
}

// ---------------------------------------------------------------------------------------------
// The scan's memory: one mapping, carved once (nothing to give back piece by piece, nothing left
// behind when a step fails)
// ---------------------------------------------------------------------------------------------
typedef struct arena_s {
    char* base; // NULL: only count what carve() would take
    size_t size, used;
} arena_t;

static void* take(arena_t* a, size_t bytes) {
    size_t at = a->used;
    a->used += (bytes + 15) & ~(size_t)15;
    return a->base ? a->base + at : NULL;
}

// ---------------------------------------------------------------------------------------------
// Blocks, sorted by address
// ---------------------------------------------------------------------------------------------
// The live table's blocks by address: starts and sizes, put in address order where they were
// collected (addr_sort.c); the rest of a block's record (its stack, epoch, whether it is judged)
// is looked up again by address when its verdict is written, in address order, so the lookups
// walk the live table's memory forward. About 17 bytes a block (and the marking stack as deep
// as it goes), where copies of the records and their collection order took 40: a program that
// exits holding millions of small blocks has its peak memory set by its exit scan.
typedef struct scan_blocks_s {
    size_t n, cap;
    uintptr_t* starts;
    size_t* sizes;
    // A bit by address order: neither read nor judged, the block being no longer in readable
    // memory, or released at exit by the C library (release_libc_exit).
    uint64_t* skipped;
    uint8_t* kind;
    uint32_t* leader; // written by classify.c for indirectly lost blocks only
    void* workspace; // classify.c's
    void* sort_workspace; // addr_sort.c's
} scan_blocks_t;

#define WORD_BITS 64 // bits in a word of the skipped set

static void blocks_carve(arena_t* a, scan_blocks_t* b, size_t cap) {
    b->cap = cap;
    b->starts = take(a, cap * sizeof(uintptr_t));
    b->sizes = take(a, cap * sizeof(size_t));
    b->skipped = take(a, (cap + WORD_BITS - 1) / WORD_BITS * sizeof(uint64_t));
    b->kind = take(a, cap);
    b->leader = take(a, cap * sizeof(uint32_t));
    b->workspace = take(a, lc_workspace_size(cap));
    b->sort_workspace = take(a, addr_sort_workspace_size());
}

static int is_skipped(const scan_blocks_t* b, size_t i) {
    return (int)(b->skipped[i / WORD_BITS] >> (i % WORD_BITS) & 1);
}

// Block i is neither read (its size becomes 0) nor judged.
static void skip(scan_blocks_t* b, size_t i) {
    b->skipped[i / WORD_BITS] |= 1ull << (i % WORD_BITS);
    b->sizes[i] = 0;
}

static void collect_one(const hl_block_t* blk, void* arg) {
    scan_blocks_t* b = arg;
    if (b->n >= b->cap)
        return;
    size_t i = b->n++;
    b->starts[i] = blk->addr;
    b->sizes[i] = blk->size;
}

// The live blocks, those a verdict is given on (not the agent's own libraries', not one the
// program said to ignore), and those the program said to ignore.
typedef struct live_tally_s {
    size_t all, judged, ignored;
} live_tally_t;

static void tally_one(const hl_block_t* blk, void* arg) {
    live_tally_t* t = arg;
    t->all++;
    t->judged += !blk->is_internal && !blk->ignored;
    t->ignored += blk->ignored;
}

// Block i's record, looked up again by its address; 0 when it is not to be judged (the agent's
// own, or one the program said to ignore) or is no longer the block the scan collected: a
// thread the exit could not stop released it since, or made another block there (of another
// size), whose record the scan's reading of the old one's memory must not be given.
static int judged_record(const scan_blocks_t* b, size_t i, hl_block_t* out) {
    return live_lookup(b->starts[i], out) == HL_BLOCK_LIVE && out->size == b->sizes[i] &&
           !out->is_internal && !out->ignored;
}

// ---------------------------------------------------------------------------------------------
// Roots from /proc/self/maps
// ---------------------------------------------------------------------------------------------
typedef struct map_s {
    uintptr_t lo, hi;
    char r, w, x, shared;
    char kind; // 'a' anonymous, 'f' file, 'h' [heap], 's' [stack], 'o' other special, 'd' device
} map_t;

static size_t parse_maps(const char* text, map_t* maps, size_t max) {
    size_t n = 0;
    const char* p = text;
    while (*p && n < max) {
        map_t m = {0};
        uintptr_t v = 0;
        for (; *p && *p != '-'; p++)
            v = v * 16 + (uintptr_t)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
        m.lo = v;
        v = 0;
        if (*p == '-')
            p++;
        for (; *p && *p != ' '; p++)
            v = v * 16 + (uintptr_t)(*p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10);
        m.hi = v;
        if (*p == ' ')
            p++;
        m.r = p[0] == 'r';
        m.w = p[1] == 'w';
        m.x = p[2] == 'x';
        m.shared = p[3] == 's';
        // skip perms, offset, dev, inode
        for (int field = 0; field < 4 && *p; field++) {
            while (*p && *p != ' ' && *p != '\n')
                p++;
            while (*p == ' ')
                p++;
        }
        const char* name = p;
        while (*p && *p != '\n')
            p++;
        size_t nlen = (size_t)(p - name);
        if (*p == '\n')
            p++;
        if (nlen == 0)
            m.kind = 'a';
        else if (nlen >= 6 && strncmp(name, "[heap]", 6) == 0)
            m.kind = 'h';
        else if (nlen >= 7 && strncmp(name, "[stack]", 7) == 0)
            m.kind = 's';
        else if (name[0] == '[')
            m.kind = 'o';
        else if (nlen >= 5 && strncmp(name, "/dev/", 5) == 0)
            m.kind = 'd';
        else
            m.kind = 'f';
        maps[n++] = m;
    }
    return n;
}

#define HL_DEAD_STACKS 1024
static uintptr_t dead_sps[HL_DEAD_STACKS];
static uintptr_t dead_tps[HL_DEAD_STACKS];
static _Atomic unsigned dead_next;

// A thread that exits leaves its stack to glibc's cache, full of stale pointers: remember where.
// Its thread control block and static TLS at the top stay valid memory (memcheck scans them).
void scan_note_dead_stack(uintptr_t sp, uintptr_t tp) {
    unsigned i = atomic_fetch_add(&dead_next, 1) % HL_DEAD_STACKS;
    dead_sps[i] = sp;
    dead_tps[i] = tp;
}

// The static TLS in use below a thread pointer (x86-64 keeps TLS blocks under the thread
// control block): measured on this thread, from where each module's block sits, since every
// thread has the same layout. The surplus below it is the top of the thread's stack.
typedef struct tls_probe_s {
    uintptr_t tp, lowest;
    size_t reserved;
} tls_probe_t;

static int tls_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    (void)size;
    tls_probe_t* pr = arg;
    uintptr_t blk = (uintptr_t)info->dlpi_tls_data;
    if (info->dlpi_tls_modid && blk && blk < pr->tp && pr->tp - blk <= pr->reserved &&
        blk < pr->lowest)
        pr->lowest = blk;
    return 0;
}

// Measured at start (scan_init) for scans from the writer, which may not take the loader's
// lock, and again before the exit scan, which sees modules loaded since (measure set).
static size_t static_tls_used_measure(int measure) {
    static size_t used;
    if (!used || measure) {
        void (*get)(size_t*, size_t*) = NULL;
        *(void**)&get = dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
        size_t reserved = 0, align = 0;
        if (get)
            get(&reserved, &align);
        tls_probe_t pr = {(uintptr_t)__builtin_thread_pointer(), UINTPTR_MAX,
                          reserved ? reserved : 65536};
        dl_iterate_phdr(tls_cb, &pr);
        used = pr.lowest != UINTPTR_MAX ? pr.tp - pr.lowest : 4096;
    }
    return used;
}

static size_t static_tls_used(void) {
    return static_tls_used_measure(0);
}

typedef struct roots_s {
    lc_range_t* r;
    size_t n, cap;
    int is_short; // memory ran out: some roots are missing
} roots_t;

static void push_root(roots_t* rs, uintptr_t lo, uintptr_t hi) {
    if (hi <= lo)
        return;
    if (rs->n == rs->cap) {
        // A mapping cut by many holes (agent pages, allocator ranges) makes many roots.
        lc_range_t* fresh = os_map(rs->cap * 2 * sizeof *fresh);
        if (!fresh) {
            rs->is_short = 1;
            return;
        }
        memcpy(fresh, rs->r, rs->n * sizeof *fresh);
        os_unmap(rs->r, rs->cap * sizeof *fresh);
        rs->r = fresh;
        rs->cap *= 2;
    }
    rs->r[rs->n].lo = lo;
    rs->r[rs->n].hi = hi;
    rs->n++;
}

// Ranges by their start, in place (heapsort: no memory, no lock; glibc's qsort may malloc, and
// another thread may be stopped holding the allocator's lock).
static void sift_down(lc_range_t* v, size_t at, size_t n) {
    for (;;) {
        size_t big = at, l = 2 * at + 1, r = l + 1;
        if (l < n && v[l].lo > v[big].lo)
            big = l;
        if (r < n && v[r].lo > v[big].lo)
            big = r;
        if (big == at)
            return;
        lc_range_t t = v[at];
        v[at] = v[big];
        v[big] = t;
        at = big;
    }
}

static void sort_ranges(lc_range_t* v, size_t n) {
    for (size_t i = n / 2; i-- > 0;)
        sift_down(v, i, n);
    for (size_t end = n; end-- > 1;) {
        lc_range_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(v, 0, end);
    }
}

// Adds [lo, hi) minus the holes: the agent's own memory (the kernel merges neighbouring
// anonymous mappings, so one line of /proc/self/maps may hold both the agent's pages and the
// program's) and, when given, heap blocks lying inside it.
#define HL_MAX_HOLES 16384
static void add_root_minus(roots_t* rs, uintptr_t lo, uintptr_t hi, const scan_blocks_t* blocks,
                           int guard) {
    static lc_range_t holes[HL_MAX_HOLES + 16];
    static uintptr_t agent[HL_MAX_HOLES][2];
    size_t nh = 0;
    uintptr_t own_lo, own_hi;
    modules_own_range(&own_lo, &own_hi);
    if (lo < own_hi && hi > own_lo)
        holes[nh++] = (lc_range_t){own_lo, own_hi};
    size_t na = os_agent_ranges(agent, HL_MAX_HOLES);
    for (size_t i = 0; i < na && nh < HL_MAX_HOLES; i++)
        if (lo < agent[i][1] && hi > agent[i][0])
            holes[nh++] = (lc_range_t){agent[i][0], agent[i][1]};
    static uintptr_t foreign[8192][2];
    size_t nf = os_allocator_ranges(foreign, 8192);
    for (size_t i = 0; i < nf && nh < HL_MAX_HOLES; i++)
        if (lo < foreign[i][1] && hi > foreign[i][0])
            holes[nh++] = (lc_range_t){foreign[i][0], foreign[i][1]};
    if (blocks) {
        size_t a = 0, z = blocks->n;
        while (a < z) {
            size_t mid = (a + z) / 2;
            if (blocks->starts[mid] < lo)
                a = mid + 1;
            else
                z = mid;
        }
        for (; a < blocks->n && blocks->starts[a] < hi && nh < HL_ARRAY_LEN(holes); a++)
            holes[nh++] = (lc_range_t){blocks->starts[a] - 16,
                                       blocks->starts[a] + blocks->sizes[a] + (size_t)guard};
    }
    sort_ranges(holes, nh);
    uintptr_t at = lo;
    for (size_t i = 0; i < nh; i++) {
        if (holes[i].lo > at)
            push_root(rs, at, holes[i].lo < hi ? holes[i].lo : hi);
        if (holes[i].hi > at)
            at = holes[i].hi;
        if (at >= hi)
            return;
    }
    push_root(rs, at, hi);
}

static void add_root(roots_t* rs, uintptr_t lo, uintptr_t hi) {
    add_root_minus(rs, lo, hi, NULL, 0);
}

static size_t blocks_in(const scan_blocks_t* b, uintptr_t lo, uintptr_t hi, size_t enough) {
    size_t a = 0, z = b->n, n = 0;
    while (a < z) {
        size_t mid = (a + z) / 2;
        if (b->starts[mid] < lo)
            a = mid + 1;
        else
            z = mid;
    }
    for (; a < b->n && b->starts[a] < hi && n < enough; a++)
        n++;
    return n;
}

// Does [lo, hi) lie in readable mappings (maps in address order)? *k: where the search starts,
// advanced for the next call (blocks come in address order too).
static int is_readable(const map_t* maps, size_t nmaps, size_t* k, uintptr_t lo, uintptr_t hi) {
    while (*k < nmaps && maps[*k].hi <= lo)
        (*k)++;
    for (size_t j = *k; j < nmaps && lo < hi; j++) {
        if (maps[j].lo > lo || !maps[j].r)
            return 0;
        lo = maps[j].hi;
    }
    return lo >= hi;
}

// A block no longer in readable memory is not read, and gets no verdict (it reads as not
// scanned): a release the agent did not see (inside a program's own allocator) may have
// unmapped it, or the program made it inaccessible.
static void mark_unreadable(scan_blocks_t* b, const map_t* maps, size_t nmaps) {
    for (size_t i = 0, k = 0; i < b->n; i++) {
        if (!is_readable(maps, nmaps, &k, b->starts[i], b->starts[i] + b->sizes[i]))
            skip(b, i);
    }
}

// What glibc's __libc_freeres would release, as memcheck has it do before its leak check
// (libc_exit.h): a FREE record each, and the block skipped as freed memory is (neither read nor
// judged). Each stays in the live table, where a release of one after the scan (an exit handler
// that joins a thread may have glibc trim its cache) still finds its record.
typedef struct maps_view_s {
    const map_t* maps;
    size_t n;
} maps_view_t;

static int maps_readable(uintptr_t lo, uintptr_t hi, void* arg) {
    const maps_view_t* v = arg;
    size_t k = 0;
    return hi > lo && is_readable(v->maps, v->n, &k, lo, hi);
}

static int release_at_exit(const hl_block_t* blk, void* arg) {
    scan_blocks_t* b = arg;
    size_t lo = 0, hi = b->n; // the block among the collected ones, by address
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->starts[mid] < blk->addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (blk->is_internal || lo == b->n || b->starts[lo] != blk->addr || is_skipped(b, lo))
        return 0;
    skip(b, lo);
    writer_free_at_exit_locked(blk);
    return 1;
}

static void release_libc_exit(scan_blocks_t* b, const map_t* maps, size_t nmaps) {
    unsigned ndead = atomic_load(&dead_next);
    maps_view_t view = {maps, nmaps};
    libc_exit_cached_tls(dead_tps, ndead < HL_DEAD_STACKS ? ndead : HL_DEAD_STACKS, maps_readable,
                         &view, release_at_exit, b);
    libc_exit_stdio(maps_readable, &view, release_at_exit, b);
}

// ---------------------------------------------------------------------------------------------
// The scan
// ---------------------------------------------------------------------------------------------
static int debug_scan; // HEAPLENS_DEBUG_SCAN=1: say where each reachable block was found

// What the scan needs that may take a lock another thread could hold (the loader's, libgcc's),
// done while no thread is stopped: this thread's own roots (uc: the context a fatal signal
// interrupted, or NULL at exit), the static TLS size.
void scan_init(void) {
    static_tls_used();
    const char* dbg = getenv("HEAPLENS_DEBUG_SCAN");
    debug_scan = dbg && dbg[0] == '1';
}

void scan_prepare_caller(hl_thread_roots_t* self) {
    static_tls_used_measure(0);
    if (roots_from_frame(self, 0) != 0)
        roots_from_here(self);
}

void scan_prepare(hl_thread_roots_t* self, const ucontext_t* uc) {
    static_tls_used_measure(1);
    // What glibc releases at exit: its layout looked up here, that of its threads only in a
    // process that made threads (their dlsym calls cost the others nothing).
    const char* single = hl_real.libc_single_threaded;
    if (hl_opt.libc_freeres)
        libc_exit_init(!single || !*single || atomic_load(&dead_next));
    if (uc && !modules_own_text(context_ip(uc))) {
        roots_from_context(self, uc); // the program's own registers, where it was interrupted
        return;
    }
    // At exit, the frame that called exit (or returned from main: _start's); after a signal that
    // came while inside the agent, the program's frame under the agent's.
    if (roots_from_frame(self, uc ? HL_FRAME_PAST_SIGNAL : HL_FRAME_PAST_LIBC) == 0)
        return;
    if (uc)
        roots_from_context(self, uc);
    else
        roots_from_here(self);
}

// A thread's stack: from its roots' low end (or its stack pointer's mapping start) up.
static const hl_thread_roots_t* thread_in(const map_t* m, const hl_thread_roots_t* self) {
    if (self->sp >= m->lo && self->sp < m->hi)
        return self;
    for (int t = 0; t < nparked; t++)
        if (atomic_load(&parked[t].is_parked) && parked[t].roots.sp >= m->lo &&
            parked[t].roots.sp < m->hi)
            return &parked[t].roots;
    return NULL;
}

static void push_regs(roots_t* rs, const hl_thread_roots_t* r) {
    if (r->nregs > 0)
        push_root(rs, (uintptr_t)r->regs, (uintptr_t)(r->regs + r->nregs));
}

static int held_runs(void* pm, uintptr_t lo, uintptr_t hi, void (*fn)(uintptr_t, uintptr_t, void*),
                     void* arg) {
    return pagemap_held(pm, lo, hi, fn, arg);
}

static void push_held(uintptr_t lo, uintptr_t hi, void* arg) {
    push_root(arg, lo, hi);
}

// The roots cut to their held pages (pagemap.h). A page never written holds no pointer: the
// untouched part of a program's .bss, of a thread's stack or of a mapping reads as zeros, and a
// private file page never written holds the file's bytes (no heap address: those exist only at
// run time). Reading them made the kernel map each one, a fault per page: in `cc1 --version`,
// whose 1.7 MiB of .bss is mostly never written, that was a fifth of what tracing it cost. A
// page no longer mapped is not held either: roots unmapped since the maps were read go too.
// 0, or -1 without pagemap (pm NULL, or a read failed: rs is then as it was).
static int keep_held_pages(roots_t* rs, hl_pagemap_t* pm) {
    if (!pm)
        return -1;
    roots_t held = {.cap = rs->n * 2 + 64};
    held.r = os_map(held.cap * sizeof *held.r);
    int rc = held.r ? 0 : -1;
    for (size_t i = 0; i < rs->n && rc == 0; i++)
        rc = pagemap_held(pm, rs->r[i].lo, rs->r[i].hi, push_held, &held);
    if (rc != 0 || held.is_short) {
        if (held.r)
            os_unmap(held.r, held.cap * sizeof *held.r);
        return -1;
    }
    os_unmap(rs->r, rs->cap * sizeof *rs->r);
    *rs = held;
    return 0;
}

// Blocks the program asked never to be reported are roots, as LeakSanitizer's ignored objects
// are: what they point to is reachable. Rare, so found by lookups, and only when there are any.
static void push_ignored(roots_t* rs, const scan_blocks_t* b, size_t nignored) {
    hl_block_t blk;
    for (size_t i = 0; i < b->n && nignored; i++)
        if (live_lookup(b->starts[i], &blk) == HL_BLOCK_LIVE && blk.ignored) {
            push_root(rs, b->starts[i], b->starts[i] + b->sizes[i]);
            nignored--;
        }
}

static void gather_roots(roots_t* rs, lc_range_t* vt, size_t* nvt, const map_t* maps, size_t nmaps,
                         const scan_blocks_t* b, size_t nignored, const hl_thread_roots_t* self,
                         hl_pagemap_t* pm) {
    // Registers: held in the agent's own memory, which add_root would cut out as a hole.
    push_regs(rs, self);
    push_ignored(rs, b, nignored);
    for (int i = 0; i < nparked; i++)
        if (atomic_load(&parked[i].is_parked))
            push_regs(rs, &parked[i].roots);
    for (size_t i = 0; i < nmaps; i++) {
        const map_t* m = &maps[i];
        if (m->r && !m->w && m->kind == 'f')
            vt[(*nvt)++] = (lc_range_t){m->lo, m->hi};
        if (m->kind == 'h' && m->r && m->w && agent_has_unknown_blocks()) {
            // Attached, or started again: blocks made before are unknown, and may hold the
            // only pointer to a later one. What of the heap is not a known block is a root.
            add_root_minus(rs, m->lo, m->hi, b, hl_opt.guard);
            continue;
        }
        if (!m->r || !m->w || m->kind == 'h' || m->kind == 'd' || m->kind == 'o')
            continue;
        const hl_thread_roots_t* th = thread_in(m, self);
        if (th) {
            add_root(rs, th->lo > m->lo ? th->lo : m->lo, m->hi);
            continue;
        }
        if (m->kind == 's') {
            // The main thread's stack, but main did not park: all of it, to be safe.
            add_root(rs, m->lo, m->hi);
            continue;
        }
        if (m->kind == 'a') {
            int dead = 0;
            unsigned ndead = atomic_load(&dead_next);
            for (unsigned d = 0; d < HL_DEAD_STACKS && d < ndead; d++) {
                if (dead_sps[d] >= m->lo && dead_sps[d] < m->hi) {
                    dead = 1;
                    uintptr_t tp = dead_tps[d];
                    if (tp >= m->lo && tp < m->hi) {
                        size_t tls = static_tls_used();
                        add_root(rs, tp - tls > m->lo ? tp - tls : m->lo, m->hi);
                    }
                }
            }
            if (dead)
                continue;
            // The allocator's own mappings: glibc's thread arenas are 64 MiB aligned, and a
            // mapping holding many live blocks is some allocator's heap. Freed memory there
            // holds stale pointers, so none of it is a root.
            if (!agent_has_unknown_blocks() && (m->lo & ((64u << 20) - 1)) == 0 &&
                m->hi - m->lo <= (64u << 20) && m->hi - m->lo >= (128u << 10))
                continue;
            if (!agent_has_unknown_blocks() && blocks_in(b, m->lo, m->hi, 5) >= 5)
                continue;
        }
        add_root_minus(rs, m->lo, m->hi, b, hl_opt.guard);
    }

    if (keep_held_pages(rs, pm) == 0)
        return;
    // Without pagemap: every root must still be mapped; keep only what mincore confirms, page by
    // page runs. (With every other thread stopped some still go: reading the maps may have
    // unmapped the agent's own buffer they list, and a clone sharing the memory is no thread to
    // stop.)
    size_t kept = 0;
    static unsigned char vec[4096];
    for (size_t r = 0; r < rs->n; r++) {
        uintptr_t lo = rs->r[r].lo & ~(uintptr_t)4095, hi = rs->r[r].hi;
        int ok = 1;
        for (uintptr_t a = lo; a < hi && ok; a += sizeof vec * 4096) {
            size_t len = hi - a < sizeof vec * 4096 ? hi - a : sizeof vec * 4096;
            ok = syscall(SYS_mincore, a, len, vec) == 0;
        }
        if (ok)
            rs->r[kept++] = rs->r[r];
    }
    rs->n = kept;
}

static void debug_reachable(const scan_blocks_t* b, const roots_t* rs) {
    hl_block_t blk;
    for (size_t i = 0; i < b->n; i++) {
        if (b->kind[i] != HL_LEAK_REACHABLE || !judged_record(b, i, &blk))
            continue;
        for (size_t r = 0; r < rs->n; r++)
            for (uintptr_t a = (rs->r[r].lo + sizeof a - 1) & ~(sizeof a - 1);
                 a + sizeof a <= rs->r[r].hi; a += sizeof a)
                if (*(uintptr_t*)a == b->starts[i])
                    hl_log("block %p size %lu found at %p in root %p-%p", (void*)b->starts[i],
                           (unsigned long)b->sizes[i], (void*)a, (void*)rs->r[r].lo,
                           (void*)rs->r[r].hi);
    }
}

static void emit_scan(hl_enc_t* enc, int flags, size_t n) {
    if (enc_reserve(enc, 64) == 0) {
        enc_tag(enc, REC_SCAN);
        enc_time(enc, writer_now_ns());
        enc_u(enc, (uint64_t)flags);
        enc_u(enc, (uint64_t)n);
    }
}

static int is_lost(uint8_t kind) {
    return kind == HL_LEAK_DEFINITE || kind == HL_LEAK_INDIRECT || kind == HL_LEAK_POSSIBLE;
}

// Is block i listed by this scan? Every block is judged (the same roots), but a check of the new
// blocks lists those made since its epoch, and a re-check of the lost ones those an earlier scan
// reported lost.
static int is_listed(const hl_block_t* blk, const hl_scan_request_t* req, uint32_t now,
                     int was_lost) {
    if (req->only_lost)
        return was_lost;
    return !req->since_epoch || epoch_is_since(epoch_expand_at(now, blk->epoch), req->since_epoch);
}

// Verdicts, in address order. The lost set becomes the blocks lost now that this scan listed or
// an earlier one reported: what a later re-check looks at.
static void emit_verdicts(hl_enc_t* enc, const scan_blocks_t* b, const hl_scan_request_t* req) {
    hl_scan_tally_t* tally = req->tally;
    uint32_t now = epoch_now();
    // The lost set is for a later re-check: there is none once the process ends. Its room is
    // counted with the agent's own blocks among the lost (a few): pages never written cost none.
    size_t nlost = 0;
    for (size_t i = 0; i < b->n && !req->process_ends; i++)
        nlost += !is_skipped(b, i) && is_lost(b->kind[i]);
    int keeps_set = !req->process_ends && lost_set_begin(nlost) == 0; // else the old set stays
    size_t lost_before = lost_set_count(), lost_found = 0;
    hl_lost_cursor_t cursor = {0};
    int can_write = 1;
    enc->last_verdict_addr = 0;
    hl_block_t blk;
    for (size_t i = 0; i < b->n; i++) {
        if (is_skipped(b, i) || !judged_record(b, i, &blk))
            continue;
        int was_lost = lost_set_has(&cursor, b->starts[i], blk.stack, blk.epoch);
        lost_found += was_lost;
        int listed = is_listed(&blk, req, now, was_lost);
        if (keeps_set && is_lost(b->kind[i]) && (listed || was_lost))
            lost_set_add(b->starts[i], blk.stack, blk.epoch);
        if (!listed || !can_write)
            continue; // judged with the rest, but not what the check asks about
        if (tally && b->kind[i] < HL_LEAK_COUNT) {
            tally->bytes[b->kind[i]] += b->sizes[i];
            tally->blocks[b->kind[i]]++;
            tally->judged++;
        }
        writer_flush_if_large_locked();
        if (enc_reserve(enc, 64) != 0) {
            can_write = 0;
            continue;
        }
        enc_tag(enc, REC_VERDICT);
        enc_u(enc, b->kind[i]);
        enc_s(enc, (int64_t)(b->starts[i] - enc->last_verdict_addr));
        enc->last_verdict_addr = b->starts[i];
        enc_u(enc, b->sizes[i]);
        enc_u(enc, blk.stack);
        enc_u(enc, blk.fn);
        if (b->kind[i] == HL_LEAK_INDIRECT && b->leader[i] != LC_NO_LEADER) {
            // Follow leaders that were themselves absorbed by a later clique.
            size_t l = b->leader[i];
            for (int hops = 0;
                 b->kind[l] == HL_LEAK_INDIRECT && b->leader[l] != LC_NO_LEADER && hops < 64;
                 hops++)
                l = b->leader[l];
            enc_u(enc, b->starts[l]);
        } else {
            enc_u(enc, 0);
        }
    }
    if (keeps_set)
        lost_set_commit();
    if (tally) {
        tally->lost_before = lost_before;
        tally->lost_gone = lost_before - lost_found;
    }
}

int scan_run_with(hl_enc_t* enc, const hl_thread_roots_t* self, const hl_scan_request_t* req) {
    int at_exit = req->at_exit ? HL_SCAN_AT_EXIT : 0;
    if (req->tally)
        memset(req->tally, 0, sizeof *req->tally);
    static char* maps_text;
    static size_t maps_cap;
    arena_t arena = {0};
    roots_t rs = {0};
    scan_blocks_t b = {0};
    map_t* maps = NULL;
    lc_range_t* vt = NULL;
    size_t max_maps = 0, n = 0;
    // No block to judge (a program that allocated nothing, or freed it all): no root need be
    // read, nor the mappings (/bin/true: a tenth of what tracing it cost).
    live_tally_t live = {0, 0, 0};
    live_for_each(tally_one, &live);
    if (!live.judged && !world_runs_on) {
        n = live.all;
        goto emit;
    }
    // thread-self: after main's pthread_exit, /proc/self is its zombie, which shows no mappings
    if (world_runs_on || read_all("/proc/thread-self/maps", &maps_text, &maps_cap) < 0)
        goto no_memory;

    // Everything but the roots in one mapping, sized by a first carve that only counts.
    max_maps = 1 + maps_cap / 32;
    size_t cap = live.all + 16;
    for (int pass = 0; pass < 2; pass++) {
        arena.used = 0;
        maps = take(&arena, max_maps * sizeof(map_t));
        vt = take(&arena, (max_maps + 1) * sizeof(lc_range_t));
        blocks_carve(&arena, &b, cap);
        if (pass == 0) {
            arena.size = arena.used;
            arena.base = os_map(arena.size);
            if (!arena.base)
                goto no_memory;
        }
    }
    size_t nmaps = parse_maps(maps_text, maps, max_maps);
    live_for_each(collect_one, &b);
    n = b.n;
    addr_sort(b.starts, b.sizes, n, b.sort_workspace);
    mark_unreadable(&b, maps, nmaps);
    if (req->exits && req->all_stopped && hl_opt.libc_freeres)
        release_libc_exit(&b, maps, nmaps);

    rs.cap = nmaps * 2 + (size_t)nparked + 64;
    rs.r = os_map(rs.cap * sizeof(lc_range_t));
    if (!rs.r)
        goto no_memory;
    size_t nvt = 0;
    hl_pagemap_t pm;
    int has_pagemap = pagemap_open(&pm) == 0;
    gather_roots(&rs, vt, &nvt, maps, nmaps, &b, live.ignored, self, has_pagemap ? &pm : NULL);
    if (rs.is_short) {
        if (has_pagemap)
            pagemap_close(&pm);
        goto no_memory;
    }
    lc_input_t in = {.starts = b.starts,
                     .sizes = b.sizes,
                     .nblocks = n,
                     .roots = rs.r,
                     .nroots = rs.n,
                     .vtable_ranges = vt,
                     .nvtable_ranges = nvt,
                     .held = has_pagemap ? held_runs : NULL,
                     .held_arg = &pm};
    lc_classify(&in, b.kind, b.leader, b.workspace);
    if (has_pagemap)
        pagemap_close(&pm);
    if (debug_scan)
        debug_reachable(&b, &rs);
emit:
    emit_scan(enc,
              (req->all_stopped ? HL_SCAN_ALL_THREADS : 0) | at_exit |
                  (req->since_epoch ? HL_SCAN_ONLY_NEW : 0) |
                  (req->only_lost ? HL_SCAN_ONLY_LOST : 0),
              n);
    emit_verdicts(enc, &b, req);
    if (rs.r)
        os_unmap(rs.r, rs.cap * sizeof(lc_range_t));
    if (arena.base)
        os_unmap(arena.base, arena.size);
    return 0;

no_memory:
    // The trace says the scan could not run (no VERDICT follows), and so does the agent.
    hl_log("no memory left for the leak scan: leaks are not classified");
    emit_scan(enc, HL_SCAN_NO_MEMORY | at_exit, n);
    if (rs.r)
        os_unmap(rs.r, rs.cap * sizeof(lc_range_t));
    if (arena.base)
        os_unmap(arena.base, arena.size);
    return -1;
}

// Waits until every thread parked by an earlier stop has left park(), so that a new stop finds
// none of them still inside the old one (where the new request would stay pending).
#define HL_LEAVE_WAIT_NS 1000000L // a look every millisecond
#define HL_LEAVE_WAITS 2000       // two seconds at most
static void wait_parks_left(void) {
    static _Atomic int never;
    for (int i = 0; i < HL_LEAVE_WAITS && atomic_load(&in_park); i++)
        os_futex_wait(&never, 0, HL_LEAVE_WAIT_NS);
}

// A thread the program made while the world was stopping (its parent inside clone when the list
// was made) was never asked to park and runs on: the world is stopped only once no thread is
// found that was not. Tried again a few times; a program making threads that fast is rare.
#define HL_STOP_TRIES 4
int scan_stop_world(void) {
    int self = os_gettid();
    for (int tries = 1;; tries++) {
        wait_parks_left();
        int all = stop_world(self);
        // Only a thread of the process makes one (the writer makes none): with no other
        // thread listed, none was made since.
        int is_whole = !parked || !nparked || list_other_threads(self, NULL, 0) <= nparked;
        if (!all || is_whole || tries == HL_STOP_TRIES)
            return all && is_whole;
        resume_world();
    }
}
void scan_resume_world(void) {
    resume_world();
}
