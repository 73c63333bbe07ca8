// SPDX-License-Identifier: MIT
// libc_exit.c - what glibc's __libc_freeres releases at exit (libc_exit.h): run for real at the
// end of exit() (libc_exit_release_own); elsewhere, the two parts of it every program meets are
// taken as released by the exit scan: the TLS vectors of cached thread stacks, and the buffers of
// open streams (libc_exit_stdio, at the end). glibc keeps the stack of a joined or detached
// thread that ended, with its thread descriptor and TLS vector, on a list of cached stacks for
// the next thread; a thread that ended unjoined keeps its stack on the list of stacks in use, and
// its vector is not released (memcheck reports it possibly lost, and so does the scan). The lists
// are read while every other thread is stopped; one that does not read whole (a thread stopped
// while it changed it) leaves everything as it is.
//
// glibc publishes where the lists of stacks in use are (_rtld_global's _dl_stack_used and
// _dl_stack_user), not the cached one: since glibc 2.34 it is the list_t right after
// _dl_stack_user, and it is taken as such only where it reads as a whole circular list
// (every next's prev pointing back). Elsewhere the threads that ended are the ones the caller
// saw end (those that called the agent).
#define _GNU_SOURCE
#include "libc_exit.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "live.h"
#include "thread.h"

// Where the thread pointer is the thread's descriptor (glibc's TLS_TCB_AT_TP): the descriptor's
// fields are at the offsets glibc publishes. Elsewhere no TLS vector is released (stdio's
// buffers still are).
#if defined(__x86_64__) || defined(__i386__)
#define HL_TP_IS_DESCRIPTOR 1
#else
#define HL_TP_IS_DESCRIPTOR 0
#endif

// A dtv_t: a counter, or a pointer pair {val, to_free} (glibc's dl-dtv.h).
#define DTV_ENTRY (2 * sizeof(void*))
#define DTV_TO_FREE sizeof(void*) // to_free's offset in an entry

// Descriptors in a list, walked at most: a longer list reads as not whole.
#define HL_LIST_MAX (1u << 16)
// Thread pointers looked at, at most (the scan remembers this many ended threads).
#define HL_ENDED_MAX 1024
// Streams walked at most on stdio's list.
#define HL_STREAMS_MAX (1u << 16)
// A stream's flags (glibc's libio.h): its buffer is the program's (setvbuf), it has none.
#define HL_IO_USER_BUF 0x0001
#define HL_IO_UNBUFFERED 0x0002

static struct {
    int is_known;
    size_t dtv_at;    // the descriptor's TLS vector pointer
    size_t list_at;   // the descriptor's list_t, linking it into one of the lists below
    size_t next_at;   // list_t's next
    size_t prev_at;   // and prev
    uintptr_t cached; // the list of cached stacks, where glibc 2.34 put it (2.36 has it there)
    uintptr_t used;   // _rtld_global's list of the stacks of threads made by pthread_create
    uintptr_t user;   // and of the others (the main thread, stacks the program gave)
    FILE** streams;   // stdio's list of open streams (_IO_list_all)
} layout;

void libc_exit_release_own(int cxx, int libc) {
    hl_thread_t* t = thread_self();
    // The lookups' own allocations (the error string of one not found) are the agent's.
    int was_busy = t->busy;
    t->busy = 1;
    void (*cxx_freeres)(void) =
        cxx ? (void (*)(void))dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx9__freeresEv") : NULL;
    void (*libc_freeres)(void) =
        libc ? (void (*)(void))dlsym(RTLD_DEFAULT, "__libc_freeres") : NULL;
    t->busy = was_busy;
    if (cxx_freeres) // first, as memcheck: the pool is libstdc++'s, glibc's frees come after
        cxx_freeres();
    if (libc_freeres)
        libc_freeres();
}

// A libthread_db descriptor: {bits, count, offset} of a field (nptl_db/structs.def).
static int field(const char* name, size_t* at, size_t* bytes) {
    const uint32_t* d = dlsym(RTLD_DEFAULT, name);
    if (!d || d[0] == 0)
        return -1;
    *at = d[2];
    *bytes = d[0] / 8;
    return 0;
}

void libc_exit_init(int threads) {
    static int tried_streams, tried_threads;
    if (!tried_streams++)
        layout.streams = dlsym(RTLD_DEFAULT, "_IO_list_all");
    if (!threads || !HL_TP_IS_DESCRIPTOR || tried_threads++)
        return;
    size_t used_at, user_at, list_bytes, bytes;
    uintptr_t rtld = (uintptr_t)dlsym(RTLD_DEFAULT, "_rtld_global");
    if (!rtld || field("_thread_db_pthread_dtvp", &layout.dtv_at, &bytes) != 0 ||
        field("_thread_db_pthread_list", &layout.list_at, &bytes) != 0 ||
        field("_thread_db_list_t_next", &layout.next_at, &bytes) != 0 ||
        field("_thread_db_list_t_prev", &layout.prev_at, &bytes) != 0 ||
        field("_thread_db_rtld_global__dl_stack_used", &used_at, &bytes) != 0 ||
        field("_thread_db_rtld_global__dl_stack_user", &user_at, &list_bytes) != 0)
        return;
    layout.used = rtld + used_at;
    layout.user = rtld + user_at;
    layout.cached = layout.user + list_bytes;
    layout.is_known = 1;
}

typedef struct ended_s {
    uintptr_t tp[HL_ENDED_MAX];
    uint8_t in_use[HL_ENDED_MAX];
    size_t n;
} ended_t;

static uintptr_t read_word(uintptr_t at) {
    return *(const uintptr_t*)at;
}

// Calls each(descriptor, e) for every thread descriptor on the list at head; 0 when the list
// read whole: a circular list, each next's prev pointing back, and each() asking for no stop.
static int walk_list(uintptr_t head, ended_t* e, int (*each)(ended_t* e, uintptr_t pd),
                     libc_readable_fn readable, void* arg) {
    uintptr_t node = head;
    for (unsigned steps = 0; steps <= HL_LIST_MAX; steps++) {
        if ((node & (sizeof(uintptr_t) - 1)) ||
            !readable(node, node + layout.next_at + sizeof node, arg))
            return -1;
        uintptr_t next = read_word(node + layout.next_at);
        if ((next & (sizeof(uintptr_t) - 1)) ||
            !readable(next, next + layout.prev_at + sizeof next, arg) ||
            read_word(next + layout.prev_at) != node)
            return -1;
        if (next == head)
            return 0;
        if (each(e, next - layout.list_at) != 0)
            return -1;
        node = next;
    }
    return -1;
}

// A descriptor on a list of stacks in use: the ended thread it was is in use again (or never
// was let go: it ended unjoined).
static int mark_in_use(ended_t* e, uintptr_t pd) {
    for (size_t i = 0; i < e->n; i++)
        e->in_use[i] |= e->tp[i] == pd;
    return 0;
}

// A descriptor on the list of cached stacks: an ended thread.
static int add_ended(ended_t* e, uintptr_t pd) {
    if (e->n == HL_ENDED_MAX)
        return -1;
    e->tp[e->n] = pd;
    e->in_use[e->n++] = 0;
    return 0;
}

// The live block holding the TLS vector at dtv, and its vector's length: glibc made it
// (length + 2) entries long, the first holding the length. 0: not such a block.
static int vector_block(uintptr_t dtv, libc_readable_fn readable, void* arg, hl_block_t* b,
                        size_t* length) {
    if (dtv < DTV_ENTRY || live_lookup(dtv - DTV_ENTRY, b) != HL_BLOCK_LIVE ||
        b->size < 2 * DTV_ENTRY || !readable(b->addr, b->addr + b->size, arg))
        return 0;
    *length = read_word(b->addr);
    return *length == b->size / DTV_ENTRY - 2 && b->size % DTV_ENTRY == 0;
}

size_t libc_exit_cached_tls(const uintptr_t* tps, size_t ntps, libc_readable_fn readable,
                            void* readable_arg, libc_release_fn release, void* release_arg) {
    if (!layout.is_known)
        return 0;
    static ended_t e; // the world is stopped: one scan at a time
    e.n = 0;
    if (walk_list(layout.cached, &e, add_ended, readable, readable_arg) == 0)
        ntps = 0; // every cached stack is known: the ones seen to end are among them
    else
        e.n = 0;
    for (size_t i = 0; i < ntps && e.n < HL_ENDED_MAX; i++) {
        size_t j = 0;
        while (j < e.n && e.tp[j] != tps[i])
            j++;
        if (j == e.n && tps[i]) {
            e.tp[e.n] = tps[i];
            e.in_use[e.n++] = 0;
        }
    }
    if (!e.n || walk_list(layout.used, &e, mark_in_use, readable, readable_arg) != 0 ||
        walk_list(layout.user, &e, mark_in_use, readable, readable_arg) != 0)
        return 0;
    size_t given = 0;
    for (size_t i = 0; i < e.n; i++) {
        uintptr_t at = e.tp[i] + layout.dtv_at;
        if (e.in_use[i] || !readable(at, at + sizeof at, readable_arg))
            continue;
        hl_block_t vector;
        size_t length;
        if (!vector_block(read_word(at), readable, readable_arg, &vector, &length))
            continue;
        // As _dl_deallocate_tls does: the dynamic TLS blocks first, then the vector.
        for (size_t k = 0; k < length; k++) {
            uintptr_t to_free = read_word(vector.addr + (2 + k) * DTV_ENTRY + DTV_TO_FREE);
            hl_block_t b;
            if (to_free && live_lookup(to_free, &b) == HL_BLOCK_LIVE)
                given += (size_t)release(&b, release_arg);
        }
        given += (size_t)release(&vector, release_arg);
    }
    return given;
}

size_t libc_exit_stdio(libc_readable_fn readable, void* readable_arg, libc_release_fn release,
                       void* release_arg) {
    if (!layout.streams ||
        !readable((uintptr_t)layout.streams, (uintptr_t)layout.streams + sizeof *layout.streams,
                  readable_arg))
        return 0;
    // As _IO_unbuffer_all leaves them for __libc_freeres: the buffer of each stream that has
    // one, was used (oriented), and whose buffer is glibc's. Each must be a live block exactly
    // the buffer's size, so that a list read while a stopped thread changed it gives nothing
    // that is not such a buffer.
    size_t given = 0;
    FILE* fp = *layout.streams;
    for (unsigned steps = 0; fp && steps < HL_STREAMS_MAX; steps++) {
        if (!readable((uintptr_t)fp, (uintptr_t)fp + sizeof *fp, readable_arg))
            break;
        uintptr_t base = (uintptr_t)fp->_IO_buf_base, end = (uintptr_t)fp->_IO_buf_end;
        hl_block_t b;
        if (!(fp->_flags & (HL_IO_UNBUFFERED | HL_IO_USER_BUF)) && fp->_mode != 0 && base &&
            end > base && live_lookup(base, &b) == HL_BLOCK_LIVE && b.size == end - base)
            given += (size_t)release(&b, release_arg);
        fp = fp->_chain;
    }
    return given;
}
