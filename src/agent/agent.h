// SPDX-License-Identifier: MIT
// agent.h - the agent's life cycle (init.c, hooks_signal.c): what every part may ask of it.
// Each part of the agent has its own header; the hot path is hooks*.c -> record.c -> (unwind.c,
// stacks.c, live.c, ring.h); everything else runs on the writer thread or at start, fork and
// exit.
#ifndef HL_AGENT_H
#define HL_AGENT_H

#include <stdatomic.h>
#include <stdint.h>

#include "../common/compiler.h"

struct ucontext_t;

// Lock order. The agent's locks are spinlocks (sched_yield between tries) on agent memory;
// a thread takes them only in this order, and holds none of them while it waits for another
// thread (a full ring, a stopped world) except as said here:
//   1. writer_lock (writer.c): the trace's encoder, sink and tables. Held by the writer for a
//      pass, and by a program thread for a direct write (error, dlopen/dlclose, fork, exec,
//      exit); the exit sequence and trace_begin_again stop the world while holding it.
//   2. thread_lock (thread.c): the registry of threads and rings.
//   2b. epoch_lock (epoch.c): held by a mark's rebase and by readers of block epochs.
//   3. live_lock_all (live_spill.c's shards and odd-block lock; the direct map has no lock).
//   4. stacks_lock (stacks.c): a node being made.
//   Leaves, under any of the above, taking nothing: the region directory's (live_regions.c),
//   the range sets' (os.c), the hoard's (hoard.c), the guard pages'
//   (gpage.c). gsites.c's tables are appended to under 1 (modules_refresh) and read lock-free.
// fork takes 1-4 in order (agent_fork_prepare) so that the child finds none held half-way.

// OFF until the first hook call (or the constructor), BOOTING while it sets up, ON while
// tracing, STOPPED after a `stop` command ended the trace (the writer waits for `start`, the
// hooks pass calls through and keep the live table's releases), DONE once the trace is
// finished for good (or tracing could not start).
enum hl_phase { HL_OFF = 0, HL_BOOTING = 1, HL_ON = 2, HL_STOPPED = 3, HL_DONE = 4 };
// Later sessions of this process do not see its blocks made meanwhile (start, attach).
void agent_note_not_from_start(void);
// The heap holds blocks the agent never saw that may hold pointers to blocks it did (made
// before an attach, or while stopped): the scan reads the heap outside known blocks as roots.
int agent_has_unknown_blocks(void);
extern _Atomic int hl_phase;
HL_COLD void agent_init(void);
void agent_finish(int how, int value);
void agent_session_reset(void); // after the end: a new session may begin (attach.c)
// The same from a signal handler: uc holds the interrupted registers (roots of the scan).
void agent_finish_in(int how, int value, const struct ucontext_t* uc);
void agent_fork_prepare(void); // around fork, and clone without CLONE_VM
void agent_fork_parent(void);
void agent_fork_child(void);
int agent_owns_process(void); // 0 in a child sharing the memory: vfork's, clone(CLONE_VM)'s
void agent_before_exec(const char* path);
// A thread's first event (its ring just taken): in a fork child whose trace has not begun, it
// begins here, on this program thread; a second thread waits until it has. Cheap otherwise.
HL_COLD void agent_child_first_event(void);
int agent_is_from_start(void); // traced from the first allocation (not after a foreign one)

// hooks_signal.c: finishing on fatal signals, invisibly to the program.
void signals_install(void);

#endif
