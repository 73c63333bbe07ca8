// SPDX-License-Identifier: MIT
// init.c - the agent's life cycle: OFF until the first hook call (or the constructor, whichever
// comes first), BOOTING while it sets up, ON while tracing, DONE after the final scan. Also
// fork (the child gets its own trace), exec, and every way out: exit, _exit, fatal signals.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "../common/format.h"
#include "agent.h"
#include "gpage.h"
#include "hoard.h"
#include "libc_exit.h"
#include "api.h"
#include "chunk.h"
#include "attach.h"
#include "control.h"
#include "encode.h"
#include "epoch.h"
#include "errors.h"
#include "live.h"
#include "log.h"
#include "os.h"
#include "lost_set.h"
#include "modules.h"
#include "options.h"
#include "real.h"
#include "ring.h"
#include "scan.h"
#include "sink.h"
#include "stacks.h"
#include "thread.h"
#include "unwind.h"
#include "writer.h"
#include "session.h"

_Atomic int hl_phase;
static int from_start = 1;
static int exit_status;
static int on_exit_registered;

int agent_is_from_start(void) {
    return from_start;
}

static int has_unknown_blocks;

void agent_note_not_from_start(void) {
    from_start = 0;
    has_unknown_blocks = 1;
}

int agent_has_unknown_blocks(void) {
    return has_unknown_blocks;
}

// ---------------------------------------------------------------------------------------------
// fork, and clone without CLONE_VM (hooks_os.c), which makes a process as fork does but runs no
// atfork handlers
// ---------------------------------------------------------------------------------------------
// The process whose trace this memory describes. A child that shares the memory without being
// that process (vfork's, clone(CLONE_VM)'s without CLONE_THREAD) must not end or cut the trace
// when it execs or exits: the parent is still running.
static int agent_pid;

int agent_owns_process(void) {
    return (int)syscall(SYS_getpid) == agent_pid;
}

// fork: the prepare handler takes the agent's locks, the parent's and the child's give them back.
// A signal in between would come to a handler that needs them: the agent's own, ending the trace
// at a fatal signal, or the program's, calling exit (12 of 40 runs of a program forking in a loop
// until SIGALRM hung). So every signal but a fault is blocked from before the first lock until
// after the last is given back, and delivered then: a fork takes a fraction of a millisecond.
static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
static _Atomic int fork_locker;  // the thread that took the locks (its tid; 0: none took them)
static sigset_t fork_saved_mask; // its signal mask before the prepare (under the locks)

void agent_fork_prepare(void) {
    if (atomic_load(&hl_phase) != HL_ON)
        return;
    sigset_t async, old;
    sigfillset(&async);
    for (size_t i = 0; i < HL_ARRAY_LEN(fault_signals); i++)
        sigdelset(&async, fault_signals[i]);
    pthread_sigmask(SIG_BLOCK, &async, &old);
    writer_lock();
    thread_lock();
    live_lock_all();
    stacks_lock();
    fork_saved_mask = old;
    atomic_store(&fork_locker, os_gettid());
}

void agent_fork_parent(void) {
    if (atomic_load(&fork_locker) != os_gettid())
        return; // tracing was off at the prepare: nothing was taken
    atomic_store(&fork_locker, 0);
    sigset_t old = fork_saved_mask;
    stacks_unlock();
    live_unlock_all();
    thread_unlock();
    writer_unlock();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

// A fork child's trace begins at its first heap event, not at the fork: a child that execs
// without one (a spawn by fork then exec, as cmake's and libuv's are) leaves no file, the exec'd
// image writing its own (agent_before_exec), and never copies out the parent's live blocks.
// That copy was most of a spawn's cost to a program with a large heap (cmake: 29,000 blocks,
// 200 KB of trace per child, a file each). A child that ends without an event has its trace
// written at its end, the parent's blocks and the scan's verdicts in it, as before.
enum { CHILD_TRACE_BEGUN = 0, CHILD_TRACE_PENDING = 1, CHILD_TRACE_BEGINNING = 2 };
static _Atomic int child_trace; // CHILD_TRACE_*; BEGUN also outside fork children

void agent_child_first_event(void) {
    int pending = CHILD_TRACE_PENDING;
    if (hl_likely(atomic_load_explicit(&child_trace, memory_order_acquire) == CHILD_TRACE_BEGUN)) {
        if (atomic_load(&hl_child_awaits_writer))
            writer_start_due(); // a thread of a fork child: it lives on
        return;
    }
    if (atomic_compare_exchange_strong(&child_trace, &pending, CHILD_TRACE_BEGINNING)) {
        // The trace's first records (the process, its modules: read on a program thread, see
        // writer_modules_changed, and the blocks inherited). The child's writer follows once the
        // child needs it (writer_start_later); allocator statistics want it from the start.
        writer_flush_sync();
        if (hl_opt.alloc_stats_ms)
            writer_start();
        else
            writer_start_later();
        atomic_store_explicit(&child_trace, CHILD_TRACE_BEGUN, memory_order_release);
        return;
    }
    // Another thread of the child is copying out the inherited blocks: none of them may be
    // released meanwhile (its release would come before the block in the trace).
    while (atomic_load_explicit(&child_trace, memory_order_acquire) != CHILD_TRACE_BEGUN)
        os_yield();
}

// The child of a traced process, set up to trace itself (or to stop, with no_follow).
static void fork_child_traced(void) {
    agent_pid = (int)syscall(SYS_getpid);
    stacks_unlock();
    live_reset_after_fork();
    lost_set_clear(); // the child's trace has reported nothing yet
    hoard_reset_after_fork();
    gpage_reset_after_fork();
    epoch_reset_after_fork();
    api_after_fork_child();
    uint32_t parent_threads = thread_count();
    thread_reset_after_fork();
    writer_reset_after_fork(parent_threads);
    sink_reset_after_fork();
    control_after_fork();
    chunk_restart_stream(); // a chunk the parent had open is the parent's
    modules_reset();
    if (hl_opt.no_follow) {
        atomic_store(&hl_phase, HL_DONE);
        return;
    }
    atomic_store(&child_trace, CHILD_TRACE_PENDING); // agent_child_first_event
}

// The child's only thread is the one that forked (with another tid): the locks it holds are
// copies, made fresh by fork_child_traced, and its signals blocked since the prepare are let
// through last.
void agent_fork_child(void) {
    int locked = atomic_exchange(&fork_locker, 0) != 0;
    sigset_t old = fork_saved_mask;
    if (locked && atomic_load(&hl_phase) == HL_ON)
        fork_child_traced();
    if (locked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}


// ---------------------------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------------------------
// exit() runs the on_exit handlers and the destructors, in an order that depends on when the
// agent started. Whichever of the two comes last finishes the trace: by then every other
// destructor has run (their frees count), and the exit status is known.
static int exit_status_known, dtor_ran;
static _Atomic int finishing; // agent_finish_in ran

// The end of exit(). When every destructor has run (the agent's on_exit handler comes after the
// loader's, which runs them all: always so for an agent preloaded, registered first), glibc and
// libstdc++ release what they keep to the end first, as memcheck has them do (libc_exit.h says
// why only here), unless the trace is already ending, the agent is inside a call of its own, or
// anything else of the program may still run in this memory: another thread, or a child of
// clone(CLONE_VM). An agent loaded later (attach) ends in its own destructor, which runs before
// those of the libraries loaded before it: nothing is released there, for them to use still.
static void finish_exit(int status, int destructors_done) {
    if (destructors_done && (hl_opt.libc_freeres || hl_opt.cxx_freeres) &&
        atomic_load(&hl_phase) == HL_ON && agent_owns_process() && !atomic_load(&finishing) &&
        !thread_self()->busy && !thread_tasks_alive_besides(os_gettid(), writer_thread_id()) &&
        !thread_clone_children_may_live())
        libc_exit_release_own(hl_opt.cxx_freeres, hl_opt.libc_freeres);
    agent_finish(HL_END_EXIT, status);
}

static void on_exit_cb(int status, void* arg) {
    (void)arg;
    exit_status = status & 0xff;
    exit_status_known = 1;
    if (dtor_ran)
        finish_exit(exit_status, 1);
}

static _Atomic int init_once; // agent_init ran (again 0 for a new session: agent_session_reset)
static int is_set_up;         // handlers registered (once per process image)

void agent_init(void) {
    if (atomic_exchange(&init_once, 1)) {
        while (atomic_load(&hl_phase) == HL_BOOTING)
            sched_yield();
        return;
    }
    hl_thread_t* boot = thread_self();
    int was_busy = boot->busy;
    boot->busy = 1;
    atomic_store(&hl_phase, HL_BOOTING);
    if (!attach_is_attached())
        options_load(); // attached, heaplens_attach_start has set them
    if (hl_opt.is_disabled || (hl_opt.no_follow && session_has_entries())) {
        atomic_store(&hl_phase, HL_DONE);
        boot->busy = was_busy;
        return;
    }
    log_init(); // before the program can touch its descriptor 2
    int should_wait = hl_opt.wait && !session_has_entries(); // the run's first image only
    if (thread_key_init() != 0) {
        hl_log("cannot create a thread key; not tracing");
        atomic_store(&hl_phase, HL_DONE);
        boot->busy = was_busy;
        return;
    }
    thread_self()->busy = 1; // this thread's own state from here on
    if (real_is_foreign() || attach_is_attached()) {
        // Calls inside the allocator's own module go unseen: they must find blocks laid out as
        // the allocator made them (no guard, no header), and may release blocks the agent saw
        // made, or hand it blocks it never saw (not a heap error then).
        hl_opt.guard = 0;
        hl_opt.header_min = SIZE_MAX;
        options_checking_off(); // checked blocks have a layout of their own too
        from_start = 0;
    }
    writer_clock_init();
    modules_self_range();
    unwind_init();
    live_init();
    // Where glibc's chunk layout is known and its blocks are the guarded ones (not the checked
    // layout, not an allocator of the executable's own: its guard is 0 by now).
    live_trailers_set(hl_opt.trailers && !hl_opt.checking && hl_real.is_glibc,
                      (size_t)hl_opt.guard);
    stacks_init();
    agent_pid = (int)syscall(SYS_getpid);
    if (!is_set_up) {
        pthread_atfork(agent_fork_prepare, agent_fork_parent, agent_fork_child);
        on_exit_registered = on_exit(on_exit_cb, NULL) == 0;
    }
    if (sink_open() != 0) {
        atomic_store(&hl_phase, HL_DONE);
        thread_self()->busy = 0;
        boot->busy = was_busy;
        return;
    }
    if (!is_set_up)
        signals_install();
    is_set_up = 1;
    if (!attach_is_attached())
        real_foreign_report();
    scan_init();
    control_init();
    atomic_store(&hl_phase, HL_ON);
    // The trace's first records (the process, its modules) are written here, on a program
    // thread: the writer never reads the module list (see writer_modules_changed).
    writer_flush_sync();
    writer_start();
    if (should_wait)
        control_wait_for_client(); // the writer opens the socket and takes the client
    thread_self()->busy = 0;
    boot->busy = was_busy;
}

__attribute__((constructor)) static void agent_ctor(void) {
    if (attach_loaded_late())
        return; // dlopen'ed: heaplens_attach_start starts it, or nothing does
    if (atomic_load(&hl_real_ready) != 2) {
        thread_self()->busy = 1;
        real_resolve();
        thread_self()->busy = 0;
    }
    if (atomic_load(&hl_phase) == HL_OFF)
        agent_init();
}

// ---------------------------------------------------------------------------------------------
// The end
// ---------------------------------------------------------------------------------------------
// How long a fatal signal's end waits for the writer lock: a pass holds it for milliseconds, a
// thread that cannot run on (stopped inside it, the lock's own few instructions) for ever.
#define HL_FATAL_LOCK_NS 2000000000LL

void agent_finish_in(int how, int value, const ucontext_t* uc) {
    if (atomic_load(&hl_phase) == HL_STOPPED && agent_owns_process()) {
        control_close(); // stopped: the trace has ended already
        return;
    }
    if (atomic_load(&hl_phase) != HL_ON || !agent_owns_process() || atomic_exchange(&finishing, 1))
        return;
    // A fatal signal that interrupted this thread while it wrote to the trace (a heap error's
    // record, say) found a record half made; one that finds the lock taken for good (its holder
    // cannot run on) must not wait for ever. The trace then ends at its last whole chunk, and says
    // so by having no end; the signal ends the process as it would have.
    if (how == HL_END_SIGNAL && writer_lock_is_mine()) {
        hl_log("signal %d came while this thread was writing the trace: it ends at its last "
               "whole chunk", value);
        return;
    }
    // Or while it held the thread registry (making its agent state, or ending), which every
    // drain takes.
    if (how == HL_END_SIGNAL && thread_lock_is_mine()) {
        hl_log("signal %d came while this thread was starting or ending: the trace ends at its "
               "last whole chunk", value);
        return;
    }
    int was_busy = thread_self()->busy;
    thread_self()->busy = 1;
    hl_thread_roots_t self; // this thread's roots, found before any thread is stopped
    if (hl_opt.scan_at_exit)
        scan_prepare(&self, uc);
    if (how != HL_END_SIGNAL) { // a thread killed inside malloc may hold its arena's lock
        writer_alloc_stats_final();
        writer_lock();
    } else if (writer_lock_within(HL_FATAL_LOCK_NS) != 0) {
        hl_log("signal %d: the trace could not be ended (its writer did not let go): it ends at "
               "its last whole chunk", value);
        thread_self()->busy = was_busy;
        return;
    }
    int all_stopped = hl_opt.scan_at_exit ? scan_stop_world() : 0;
    hl_enc_t* enc = writer_encoder_locked();
    error_check_guards_at_exit();
    if (hl_opt.scan_at_exit) {
        writer_release_window_locked();
        scan_run_with(enc, &self,
                      &(hl_scan_request_t){.all_stopped = all_stopped,
                                           .at_exit = 1,
                                           .process_ends = how != HL_END_DETACH,
                                           .exits = how == HL_END_EXIT});
    }
    writer_end_locked(how, value);
    control_close();
    atomic_store(&hl_phase, HL_DONE);
    writer_unlock();
    unwind_check_report();
    if (hl_opt.scan_at_exit)
        scan_resume_world();
    thread_self()->busy = was_busy;
}

// A new session in this process (attach again, once the last one ended): the agent as if it had
// never run, but for what lives as long as the image (its handlers, its stacks table, the
// threads' rings).
void agent_session_reset(void) {
    live_clear();
    lost_set_clear();
    writer_session_reset();
    modules_reset();
    atomic_store(&finishing, 0);
    atomic_store(&init_once, 0);
    atomic_store(&hl_phase, HL_OFF);
}

void agent_finish(int how, int value) {
    agent_finish_in(how, value, NULL);
}

void agent_before_exec(const char* path) {
    if (atomic_load(&hl_phase) != HL_ON || thread_self()->busy || !agent_owns_process())
        return;
    // fork then exec at once (system, popen, a shell running a command): the exec'd image
    // writes its own trace; the moment in between is not worth a file of its own.
    if (!sink_is_open() && writer_is_fork_child())
        return;
    thread_self()->busy = 1;
    writer_lock();
    writer_exec_locked(path);
    control_close(); // the new image makes its own (if exec fails, the writer makes it again)
    writer_unlock();
    thread_self()->busy = 0;
}

__attribute__((destructor)) static void agent_dtor(void) {
    dtor_ran = 1;
    if (exit_status_known || !on_exit_registered)
        finish_exit(exit_status, 0);
}
