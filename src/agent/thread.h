// SPDX-License-Identifier: MIT
// thread.h - the agent's per-thread state and the registry of threads and their rings
// (thread.c), including the children the program makes with clone(CLONE_VM).
#ifndef HL_THREAD_H
#define HL_THREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../common/compiler.h"
#include "ring.h"

// Per-thread agent state, reached through one pthread key rather than TLS: a TLS segment in
// the agent would make glibc size every thread's DTV for one more module, changing the
// program's own allocations. ring == NULL sends the first event through thread_attach().
// While glibc runs the process single-threaded, one event in HL_UNTIMED_MASK + 1 reads the clock
// (record.c, event_ticks).
#define HL_UNTIMED_MASK 63u

typedef struct hl_thread_s {
    int busy;         // inside the agent: nested allocations go straight to the real ones
    int park_pending; // a stop-the-world request arrived while busy
    hl_ring_t* ring;
    uintptr_t last_alloc; // this thread's latest allocation while it lives (0: freed, none)
    uintptr_t in_flight;  // a block recorded and not yet handed to the program (a scan's root)
    uint32_t untimed;     // events since the last one with a time (while single-threaded)
    uint32_t untimed_mask; // HL_UNTIMED_MASK; 0 (each event timed) in a fork child until its
                           // writer starts: an event's time is when the child wants it (writer.c)
    int paused;           // heaplens_pause depth: allocations kept as internal (api.c)
    int in_callback;      // running a callback of the API: its own crossings do not call again
    uint32_t index;       // thread index, 1-based, never reused within a trace
    int tid;
    void* unwind_cache; // unwind.c's per-thread step rules
    int unwind_depth;   // the frames its walks were laid out for: a fork child's copy reads as
                        // zeros (unwind.c: state_make) and is laid out again from this
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

HL_COLD int thread_attach(hl_thread_t* t); // 0, or -1 when tracing is off
hl_ring_t* thread_rings(void);             // head of the registry (writer side)
void thread_lock(void);
void thread_unlock(void); // parks there when a stop of the world asked while it held the lock
int thread_lock_is_mine(void); // in a signal handler: did it interrupt the registry's holder?
// In a stop's signal handler: 1 when this thread holds the registry's lock (it parks as it lets
// go of it), else 0.
int thread_owe_park_if_locked(void);
// This thread's state if it has one yet (NULL: none), without making one: a signal handler's,
// which may have come while this thread held the registry's lock to make its state.
hl_thread_t* thread_self_known(void);
void thread_reset_after_fork(void);
int thread_key_init(void);
uint32_t thread_count(void);
void thread_uncount_agent_thread(void); // the writer exists: not a thread of glibc's count
void thread_recount_agent_thread(void); // the writer is about to exit (detach): counted again
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
// May a child of clone(CLONE_VM) still run in this memory (one not known gone, or one made
// past the slots)? Such a child is a process of its own: /proc/self/task does not list it.
int thread_clone_children_may_live(void);

#endif
