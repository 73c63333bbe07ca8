// SPDX-License-Identifier: MIT
// thread.c - the thread registry: each thread that allocates gets an index and a ring the
// writer drains. Rings of exited threads are drained, then reused by new threads, so a program
// that creates threads forever holds only as many rings as it has threads at once.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "agent.h"

HL_TLS hl_thread_t hl_self;

static hl_ring_t* ring_list;      // every ring ever made, newest first
static _Atomic int registry_lock;
static _Atomic uint32_t next_index;
static pthread_key_t exit_key;
static int has_exit_key;

void thread_lock(void) {
    while (atomic_exchange_explicit(&registry_lock, 1, memory_order_acquire))
        sched_yield();
}
void thread_unlock(void) { atomic_store_explicit(&registry_lock, 0, memory_order_release); }

hl_ring_t* thread_rings(void) { return ring_list; }
uint32_t thread_count(void) { return atomic_load(&next_index); }

// Runs at thread exit for every thread that recorded anything: hand the ring to the writer.
static void thread_exit_cb(void* arg) {
    hl_ring_t* r = arg;
    if (!r || hl_self.ring != r)
        return;
    hl_self.ring = NULL;
    scan_note_dead_stack((uintptr_t)__builtin_frame_address(0),
                         (uintptr_t)__builtin_thread_pointer());
    atomic_store_explicit(&r->is_dead, 1, memory_order_release);
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
    if (!has_exit_key) {
        has_exit_key = pthread_key_create(&exit_key, thread_exit_cb) == 0;
    }
    hl_ring_t* r = ring_take();
    if (r) {
        t->index = atomic_fetch_add(&next_index, 1) + 1;
        t->tid = os_gettid();
        t->alloc_seq = 0;
        r->thread_index = t->index;
        r->tid = t->tid;
    }
    thread_unlock();
    if (!r)
        return -1;
    t->ring = r;
    if (has_exit_key)
        pthread_setspecific(exit_key, r);
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
    if (hl_self.ring) {
        hl_ring_t* r = hl_self.ring;
        atomic_store(&r->is_dead, 0);
        hl_self.index = atomic_fetch_add(&next_index, 1) + 1;
        hl_self.alloc_seq = 0;
        hl_self.tid = os_gettid();
        r->thread_index = hl_self.index;
        r->tid = hl_self.tid;
    }
}
