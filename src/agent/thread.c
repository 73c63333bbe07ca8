// SPDX-License-Identifier: MIT
// thread.c - the thread registry: each thread that allocates gets an index and a ring the
// writer drains. Rings of exited threads are drained, then reused by new threads, so a program
// that creates threads forever holds only as many rings as it has threads at once.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "agent.h"

pthread_key_t hl_thread_key;
_Atomic int hl_thread_key_ready;

static hl_ring_t* ring_list;      // every ring ever made, newest first
static _Atomic int registry_lock;
static _Atomic uint32_t next_index;

// Until the key exists (the first moments of the process, one thread) everyone shares this.
static hl_thread_t boot_state;

// Thread states come from agent pages, and go back to this list when their thread ends.
static hl_thread_t* free_states;
#define HL_STATES_PER_PAGE (65536 / sizeof(hl_thread_t))
// The page's states not handed out yet: taken in order, so a process with few threads touches
// the first 4 KiB of it, not all 16 pages (a fault each) to link them into free_states.
static hl_thread_t *unused_state, *unused_end;

void thread_lock(void) {
    while (atomic_exchange_explicit(&registry_lock, 1, memory_order_acquire))
        sched_yield();
}
void thread_unlock(void) { atomic_store_explicit(&registry_lock, 0, memory_order_release); }

hl_ring_t* thread_rings(void) { return ring_list; }
uint32_t thread_count(void) { return atomic_load(&next_index); }

// Runs at thread exit: hand the ring to the writer, the state back to the pool.
static void thread_exit_cb(void* arg) {
    hl_thread_t* t = arg;
    if (!t)
        return;
    scan_note_dead_stack((uintptr_t)__builtin_frame_address(0),
                         (uintptr_t)__builtin_thread_pointer());
    hl_ring_t* r = t->ring;
    thread_lock();
    t->ring = NULL;
    if (r)
        atomic_store_explicit(&r->is_dead, 1, memory_order_release);
    if (!t->busy) { // the writer's state stays: it never exits while tracing
        *(hl_thread_t**)t = free_states;
        free_states = t;
    }
    thread_unlock();
}

int thread_key_init(void) {
    if (atomic_load(&hl_thread_key_ready))
        return 0;
    if (pthread_key_create(&hl_thread_key, thread_exit_cb) != 0)
        return -1;
    atomic_store(&hl_thread_key_ready, 1);
    return 0;
}

hl_thread_t* thread_self_slow(void) {
    if (!atomic_load(&hl_thread_key_ready))
        return &boot_state;
    thread_lock();
    hl_thread_t* t = free_states;
    if (t) {
        free_states = *(hl_thread_t**)t;
    } else {
        if (unused_state == unused_end) {
            hl_thread_t* page = os_map(HL_STATES_PER_PAGE * sizeof(hl_thread_t));
            if (!page) {
                thread_unlock();
                return &boot_state;
            }
            unused_state = page;
            unused_end = page + HL_STATES_PER_PAGE;
        }
        t = unused_state++;
    }
    thread_unlock();
    void* cache = t->unwind_cache; // a reused state keeps its (still valid) unwind rules
    *t = (hl_thread_t){.unwind_cache = cache};
    pthread_setspecific(hl_thread_key, t);
    return t;
}

static hl_ring_t* ring_take(void) {
    // A dead ring the writer has fully drained can be handed out again.
    for (hl_ring_t* r = ring_list; r; r = r->next) {
        if (atomic_load_explicit(&r->is_dead, memory_order_acquire) == 2) {
            atomic_store(&r->head, 0);
            atomic_store(&r->tail, 0);
            r->tail_cache = 0;
            atomic_store(&r->is_dead, 0);
            return r;
        }
    }
    hl_ring_t* r = os_map(sizeof(hl_ring_t));
    if (!r)
        return NULL;
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
        t->index = atomic_fetch_add(&next_index, 1) + 1;
        t->tid = os_gettid();
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
    for (hl_ring_t* r = ring_list; r; r = r->next) {
        atomic_store(&r->head, 0);
        atomic_store(&r->tail, 0);
        r->tail_cache = 0;
        atomic_store(&r->is_dead, 2);
    }
    hl_thread_t* self = thread_self();
    if (self->ring) {
        hl_ring_t* r = self->ring;
        atomic_store(&r->is_dead, 0);
        self->index = atomic_fetch_add(&next_index, 1) + 1;
        self->last_alloc = 0; // the child's trace has no ALLOC of this thread yet
        self->tid = os_gettid();
        r->thread_index = self->index;
        r->tid = self->tid;
    }
}
