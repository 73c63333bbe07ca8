// SPDX-License-Identifier: MIT
// thread.c - the thread registry: each thread that allocates gets an index and a ring the
// writer drains. Rings of exited threads are drained, then reused by new threads, so a program
// that creates threads forever holds only as many rings as it has threads at once. Also the
// threads the program makes with clone(CLONE_VM) rather than pthread_create, and how the
// process ends when its last thread exits while the writer still runs.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "os.h"
#include "ring.h"
#include "scan.h"
#include "thread.h"
#include "unwind.h"

pthread_key_t hl_thread_key;
_Atomic int hl_thread_key_ready;

static hl_ring_t* ring_list; // every ring ever made, newest first
static _Atomic uint32_t next_index;
// The thread whose state was retired last (thread_exit_cb). glibc runs exit handlers on the
// program's last thread after its thread-specific data is gone (and its own releases after
// ours, at any thread's exit): such a thread calling the agent again is the same thread, and
// takes its index again rather than a new one. Under the registry's lock.
static struct {
    pthread_t self;
    int tid;
    uint32_t index;
} last_retired;

// Until the key exists (the first moments of the process, one thread) everyone shares this.
static hl_thread_t boot_state = {.untimed_mask = HL_UNTIMED_MASK};

// Thread states come from agent pages, and go back to this list when their thread ends.
static hl_thread_t* free_states;
#define HL_STATES_PER_PAGE (65536 / sizeof(hl_thread_t))
// The page's states not handed out yet: taken in order, so a process with few threads touches
// the first 4 KiB of it, not all 16 pages (a fault each) to link them into free_states.
static hl_thread_t *unused_state, *unused_end;

// A thread holding the registry's lock must not park for a stop of the world: the writer takes
// the lock to drain, with the world stopped. Asked to while it holds the lock (making its own
// state, ending, taking a ring), it parks as it lets go. The lock word is its holder's thread
// pointer (no system call to know it), and the low bit says a park is owed: taken, tested and
// let go of in one step each, so no signal finds the lock held but not yet said to be its own.
#define REGISTRY_PARK_OWED 1u // thread pointers are aligned far past this bit
static _Atomic uintptr_t registry_lock; // 0: free; else the holder's thread pointer | owed

static inline uintptr_t self_pointer(void) {
    return (uintptr_t)__builtin_thread_pointer();
}

void thread_lock(void) {
    uintptr_t me = self_pointer();
    for (;;) {
        uintptr_t free_word = 0;
        if (atomic_compare_exchange_weak_explicit(&registry_lock, &free_word, me,
                                                  memory_order_acquire, memory_order_relaxed))
            return;
        sched_yield();
    }
}
void thread_unlock(void) {
    uintptr_t was = atomic_exchange_explicit(&registry_lock, 0, memory_order_release);
    if (hl_unlikely(was & REGISTRY_PARK_OWED))
        scan_park_owed();
}

int thread_lock_is_mine(void) {
    uintptr_t word = atomic_load_explicit(&registry_lock, memory_order_relaxed);
    return (word & ~(uintptr_t)REGISTRY_PARK_OWED) == self_pointer();
}

int thread_owe_park_if_locked(void) {
    if (!thread_lock_is_mine())
        return 0;
    atomic_fetch_or_explicit(&registry_lock, REGISTRY_PARK_OWED, memory_order_relaxed);
    return 1;
}

hl_ring_t* thread_rings(void) {
    return ring_list;
}
uint32_t thread_count(void) {
    return atomic_load(&next_index);
}

// A fresh state from the pool (NULL when no page can be had). The caller holds the lock.
static hl_thread_t* state_new_locked(void) {
    hl_thread_t* t = free_states;
    if (t) {
        free_states = *(hl_thread_t**)t;
    } else {
        if (unused_state == unused_end) {
            hl_thread_t* page = os_map(HL_STATES_PER_PAGE * sizeof(hl_thread_t));
            if (!page)
                return NULL;
            unused_state = page;
            unused_end = page + HL_STATES_PER_PAGE;
        }
        t = unused_state++;
    }
    void* cache = t->unwind_cache; // a reused state keeps its (still valid) unwind rules
    int depth = t->unwind_depth;
    *t = (hl_thread_t){.unwind_cache = cache, .unwind_depth = depth,
                       .untimed_mask = HL_UNTIMED_MASK};
    return t;
}

// The thread of t is gone: its ring to the writer (drained, then reused), t to the pool. The
// caller holds the lock.
static void state_retire_locked(hl_thread_t* t) {
    hl_ring_t* r = t->ring;
    t->ring = NULL;
    if (r)
        atomic_store_explicit(&r->is_dead, 1, memory_order_release);
    *(hl_thread_t**)t = free_states;
    free_states = t;
}

// Runs at thread exit: hand the ring to the writer, the state back to the pool.
static void thread_exit_cb(void* arg) {
    hl_thread_t* t = arg;
    if (!t)
        return;
    scan_note_dead_stack((uintptr_t)__builtin_frame_address(0),
                         (uintptr_t)__builtin_thread_pointer());
    thread_lock();
    last_retired.self = pthread_self();
    last_retired.tid = os_gettid();
    last_retired.index = t->index;
    if (!t->busy) { // the writer's state stays: it never exits while tracing
        state_retire_locked(t);
    } else if (t->ring) {
        atomic_store_explicit(&t->ring->is_dead, 1, memory_order_release);
        t->ring = NULL;
    }
    thread_unlock();
}

// ---------------------------------------------------------------------------------------------
// The end of the last thread. glibc counts the threads it runs (__nptl_nthreads); the one that
// takes the count to zero, main's pthread_exit included, calls exit(0) on its way out, so atexit
// handlers and destructors run and the process ends with status 0. The writer is a thread the
// program did not make, and it never exits: counted, it would keep the process alive for ever
// once the program's threads are gone. So it is taken out of the count as soon as it exists,
// and glibc ends the process on the program's last thread exactly as without heaplens (with
// that thread's signal mask, at the moment it exits, whether or not it ever allocated); the
// agent then finishes the trace from the exit handlers as on any exit.
// The other ways fall short: the writer noticing it is alone (/proc) and calling exit(0) would
// run the program's atexit handlers on the agent's thread (another pthread_self, another copy
// of every thread-local, every signal blocked) and only once it wakes; an interposed
// pthread_exit misses a last thread that returns from its start routine, and threads the
// agent never saw. The first of those stays as the fallback for a libc that does not export the
// count (glibc before 2.34 kept it hidden in libpthread): see thread_program_is_gone.
// ---------------------------------------------------------------------------------------------
static unsigned int* libc_thread_count; // glibc's __nptl_nthreads, or NULL

void thread_uncount_agent_thread(void) {
    if (libc_thread_count)
        __atomic_fetch_sub(libc_thread_count, 1, __ATOMIC_ACQ_REL);
}

void thread_recount_agent_thread(void) {
    if (libc_thread_count)
        __atomic_fetch_add(libc_thread_count, 1, __ATOMIC_ACQ_REL);
}

// Has the task left (gone, or a zombie: a group leader that exited stays one until the last
// thread of its group is gone)? From the state letter of /proc/self/task/TID/stat.
int thread_task_has_exited(int tid) {
    char path[64], buf[512];
    hl_fmt(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = 0;
    const char* name_end = NULL; // the name may itself hold ')': the state follows the last
    for (const char* s = buf; *s; s++)
        if (*s == ')')
            name_end = s;
    char state = name_end && name_end[1] == ' ' ? name_end[2] : 0;
    return state == 'Z' || state == 'X';
}

// Is a task of this process alive besides `self` and `other` (0: none)? From /proc/self/task;
// a task that exited but stays a zombie (a group leader) counts as gone.
int thread_tasks_alive_besides(int self, int other) {
    int fd =
        (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    int others = 0;
    char dents[4096];
    for (long n; !others && (n = syscall(SYS_getdents64, fd, dents, sizeof dents)) > 0;) {
        for (long off = 0; off < n && !others;) {
            struct dirent64* d = (struct dirent64*)(dents + off);
            off += d->d_reclen;
            int tid = (int)strtol(d->d_name, NULL, 10);
            others = tid > 0 && tid != self && tid != other && !thread_task_has_exited(tid);
        }
    }
    close(fd);
    return others;
}

// Only where libc_thread_count is missing, and only once every ring is dead (nothing is read
// while a known program thread lives): is every task but the calling one (the writer) gone?
// Tasks that never allocated have no ring; /proc is what sees them.
int thread_program_is_gone(void) {
    if (libc_thread_count)
        return 0;
    int live = 0;
    thread_lock();
    for (hl_ring_t* r = ring_list; r && !live; r = r->next)
        live = atomic_load_explicit(&r->is_dead, memory_order_acquire) == 0;
    thread_unlock();
    if (live)
        return 0;
    return !thread_tasks_alive_besides(os_gettid(), 0);
}

// ---------------------------------------------------------------------------------------------
// Children of clone(CLONE_VM): threads the program made without pthread_create. They share the
// agent's memory and, unless given a TLS of their own, their parent's thread pointer, so
// pthread_getspecific would hand them the parent's state (one ring, two producers). While any
// lives, thread_self's fast path is off (hl_thread_key_ready is HL_KEY_BY_TID) and every thread
// is first looked up by its tid: a gettid per call, only in a program that makes such children
// and only while one lives. A child is known gone when the kernel clears its `here` word
// (CLONE_CHILD_CLEARTID, asked by the agent when the program passes no child tid word of its
// own), which it does when the child exits and when it execs, leaving this address space.
// ---------------------------------------------------------------------------------------------
#define HL_CLONE_CHILDREN 64 // such children alive at once with a state of their own
static hl_clone_child_t clone_children[HL_CLONE_CHILDREN];
static int clone_children_live; // slots in use; under the registry lock
static int clone_unknown;       // a child was made with no slot left: never known gone

hl_clone_child_t* thread_clone_reserve(void) {
    thread_lock();
    hl_clone_child_t* c = NULL;
    for (int i = 0; i < HL_CLONE_CHILDREN && !c; i++)
        if (!clone_children[i].in_use)
            c = &clone_children[i];
    hl_thread_t* t = c ? state_new_locked() : NULL;
    if (t) {
        c->in_use = 1;
        atomic_store(&c->tid, 0);
        atomic_store(&c->here, 1);
        c->state = t;
        if (clone_children_live++ == 0)
            atomic_store(&hl_thread_key_ready, HL_KEY_BY_TID);
    } else {
        clone_unknown = 1;
    }
    thread_unlock();
    return t ? c : NULL;
}

static void clone_release_locked(hl_clone_child_t* c) {
    state_retire_locked(c->state);
    c->state = NULL;
    atomic_store(&c->tid, 0);
    c->in_use = 0;
    if (--clone_children_live == 0)
        atomic_store(&hl_thread_key_ready, HL_KEY_READY);
}

void thread_clone_release(hl_clone_child_t* c) {
    thread_lock();
    if (c->in_use)
        clone_release_locked(c);
    thread_unlock();
}

static int clone_child_left(const hl_clone_child_t* c) {
    return c->in_use && c->release_by == HL_CLONE_RELEASED_BY_KERNEL && atomic_load(&c->here) == 0;
}

int thread_clone_children_may_live(void) {
    thread_clone_sweep();
    thread_lock();
    int may = clone_children_live > 0 || clone_unknown;
    thread_unlock();
    return may;
}

// From the writer and from clone's parent: the lock makes sure a slot seen empty is not one
// the other released and a new child took meanwhile.
void thread_clone_sweep(void) {
    for (int i = 0; i < HL_CLONE_CHILDREN; i++) {
        if (!clone_child_left(&clone_children[i]))
            continue; // nothing to take: no lock
        thread_lock();
        if (clone_child_left(&clone_children[i]))
            clone_release_locked(&clone_children[i]);
        thread_unlock();
    }
}

static hl_thread_t* clone_child_state(int tid) {
    for (int i = 0; i < HL_CLONE_CHILDREN; i++)
        if (atomic_load_explicit(&clone_children[i].tid, memory_order_acquire) == tid)
            return clone_children[i].state;
    return NULL;
}

hl_thread_t* thread_self_known(void) {
    int mode = atomic_load(&hl_thread_key_ready);
    if (!mode)
        return &boot_state;
    if (mode == HL_KEY_BY_TID) {
        hl_thread_t* t = clone_child_state(os_gettid());
        if (t)
            return t;
    }
    return pthread_getspecific(hl_thread_key);
}

// ---------------------------------------------------------------------------------------------
// Thread states
// ---------------------------------------------------------------------------------------------
int thread_key_init(void) {
    if (atomic_load(&hl_thread_key_ready))
        return 0;
    if (pthread_key_create(&hl_thread_key, thread_exit_cb) != 0)
        return -1;
    libc_thread_count = dlvsym(RTLD_DEFAULT, "__nptl_nthreads", "GLIBC_PRIVATE");
    atomic_store(&hl_thread_key_ready, HL_KEY_READY);
    return 0;
}

hl_thread_t* thread_self_slow(void) {
    hl_thread_t* t = thread_self_known();
    if (t)
        return t;
    thread_lock();
    t = state_new_locked();
    thread_unlock();
    if (!t)
        return &boot_state;
    pthread_setspecific(hl_thread_key, t);
    return t;
}

// A ring emptied for a thread to come: what it held and what its last owner was doing.
static void ring_reset(hl_ring_t* r) {
    atomic_store(&r->head, 0);
    atomic_store(&r->tail, 0);
    r->tail_cache = 0;
    atomic_store(&r->waiting_kind, 0);
    atomic_store(&r->unsaid_depth, 0);
}

static hl_ring_t* ring_take(void) {
    // A dead ring the writer has fully drained can be handed out again.
    for (hl_ring_t* r = ring_list; r; r = r->next) {
        if (atomic_load_explicit(&r->is_dead, memory_order_acquire) == 2) {
            ring_reset(r);
            r->st = (hl_ring_stats_t){0};
            atomic_store(&r->is_dead, 0);
            return r;
        }
    }
    hl_ring_t* r = os_map(sizeof(hl_ring_t));
    if (!r)
        return NULL;
    r->own_mask = HL_RING_FIRST_EVENTS - 1;
    atomic_store(&r->mask, r->own_mask);
    r->next = ring_list;
    ring_list = r;
    return r;
}

int thread_attach(hl_thread_t* t) {
    if (atomic_load_explicit(&hl_phase, memory_order_acquire) != HL_ON)
        return -1;
    thread_lock();
    hl_ring_t* r = ring_take();
    if (r) {
        int tid = os_gettid();
        int is_back = last_retired.index && last_retired.tid == tid &&
                      pthread_equal(last_retired.self, pthread_self());
        t->index = is_back ? last_retired.index : atomic_fetch_add(&next_index, 1) + 1;
        t->tid = tid;
        t->last_alloc = 0;
        r->thread_index = t->index;
        r->tid = t->tid;
    }
    thread_unlock();
    if (!r)
        return -1;
    t->ring = r;
    return 0;
}

// In the child of fork only the forking thread exists: every other ring is dead with whatever
// it held (those events describe the parent), and this thread starts a new id space.
void thread_reset_after_fork(void) {
    atomic_store(&registry_lock, 0);
    last_retired.index = 0; // the parent's threads are not here
    for (hl_ring_t* r = ring_list; r; r = r->next) {
        ring_reset(r); // its thread is not here
        atomic_store(&r->is_dead, 2);
    }
    // The parent's clone children are not here (what their rings held describes the parent).
    for (int i = 0; i < HL_CLONE_CHILDREN; i++)
        clone_children[i] = (hl_clone_child_t){0};
    clone_children_live = 0;
    clone_unknown = 0;
    if (atomic_load(&hl_thread_key_ready))
        atomic_store(&hl_thread_key_ready, HL_KEY_READY);
    // The forking thread too is without a ring now: the child's first event takes one
    // (thread_attach), and begins the child's trace with it (agent_child_first_event).
    hl_thread_t* self = thread_self();
    self->ring = NULL;
    self->last_alloc = 0; // the child's trace has no ALLOC of this thread yet
    unwind_after_fork(self);
}
