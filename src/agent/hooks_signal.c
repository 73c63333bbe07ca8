// SPDX-License-Identifier: MIT
// hooks_signal.c - a fatal signal must still end the trace with its scan, so the agent puts a
// handler on each signal the program left at its default action. The program must not see the
// difference: sigaction() and signal() report SIG_DFL where the agent's handler stands, and a
// program that installs its own handler replaces it (one that asks for SIG_DFL gets the
// agent's back). Python, for one, installs KeyboardInterrupt only over a default SIGINT.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "agent.h"
#include "gpage.h"
#include "options.h"
#include "os.h"
#include "real.h"

static const int fatal_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,
                                    SIGBUS,  SIGFPE,  SIGSEGV, SIGPIPE, SIGALRM, SIGTERM,
                                    SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ, SIGSYS};
static _Atomic int ours[65]; // the agent's handler is installed for this signal

static int is_fatal(int sig) {
    for (size_t i = 0; i < HL_ARRAY_LEN(fatal_signals); i++)
        if (fatal_signals[i] == sig)
            return 1;
    return 0;
}

static void on_fatal(int sig, siginfo_t* si, void* ucv) {
    atomic_store(&ours[sig], 0); // SA_RESETHAND put back the default action
    agent_finish_in(HL_END_SIGNAL, sig, ucv);
    // A fault re-faults on return; a sent signal is sent again.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    if (si->si_code <= 0 || sig == SIGABRT || sig == SIGTERM || sig == SIGINT || sig == SIGHUP ||
        sig == SIGQUIT || sig == SIGPIPE || sig == SIGALRM || sig == SIGUSR1 || sig == SIGUSR2)
        syscall(SYS_tgkill, getpid(), os_gettid(), sig);
}

static int install_one(int sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (hl_real.sigaction(sig, &sa, NULL) != 0)
        return -1;
    atomic_store(&ours[sig], 1);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// With guard pages the agent's SIGSEGV handler stands first, whatever the program installs: a
// fault in the pool is the agent's (gpage_fault); any other is the program's, and goes to the
// handler it installed (kept here: sigaction and signal report and replace it as the kernel's
// would), or with none, ends the process as the default action does, after the trace is ended.
// ---------------------------------------------------------------------------------------------
static struct sigaction program_segv;
static _Atomic int segv_chained;

static void segv_default(int sig, siginfo_t* si, void* uc) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    hl_real.sigaction(sig, &dfl, NULL);
    atomic_store(&segv_chained, 0);
    agent_finish_in(HL_END_SIGNAL, sig, uc);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    if (si->si_code <= 0) // sent, not a fault (which happens again on return)
        syscall(SYS_tgkill, getpid(), os_gettid(), sig);
}

static void on_segv(int sig, siginfo_t* si, void* uc) {
    if (gpage_fault(si, uc)) {
        if (hl_opt.gpage_abort)
            segv_default(sig, si, uc); // as the access would have without heaplens
        return; // the page is accessible now (or the default action waits): retried
    }
    struct sigaction a = program_segv;
    int is_info = (a.sa_flags & SA_SIGINFO) != 0;
    // An ignored fault cannot be ignored: the kernel takes the default action for it.
    if (!is_info && (a.sa_handler == SIG_DFL || (a.sa_handler == SIG_IGN && si->si_code > 0))) {
        segv_default(sig, si, uc);
        return;
    }
    if (!is_info && a.sa_handler == SIG_IGN)
        return;
    if (a.sa_flags & SA_RESETHAND) {
        memset(&program_segv, 0, sizeof program_segv);
        program_segv.sa_handler = SIG_DFL;
    }
    sigset_t mask = a.sa_mask, old;
    if (!(a.sa_flags & SA_NODEFER))
        sigaddset(&mask, sig);
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    if (is_info)
        a.sa_sigaction(sig, si, uc);
    else
        a.sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void chain_segv(void) {
    struct sigaction cur, sa;
    if (hl_real.sigaction(SIGSEGV, NULL, &cur) != 0)
        return;
    if (atomic_load(&ours[SIGSEGV]) ||
        ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fatal)) {
        memset(&program_segv, 0, sizeof program_segv);
        program_segv.sa_handler = SIG_DFL;
    } else {
        program_segv = cur;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (hl_real.sigaction(SIGSEGV, &sa, NULL) != 0)
        return;
    atomic_store(&ours[SIGSEGV], 0);
    atomic_store(&segv_chained, 1);
}

void signals_install(void) {
    if (!hl_real.sigaction)
        return;
    for (size_t i = 0; i < HL_ARRAY_LEN(fatal_signals); i++) {
        struct sigaction old;
        if (hl_real.sigaction(fatal_signals[i], NULL, &old) != 0)
            continue;
        // Only where the program left the default: its own handlers stay its own.
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
            install_one(fatal_signals[i]);
    }
    if (hl_opt.gpage_every)
        chain_segv();
}

static int wants_default(const struct sigaction* act) {
    return !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
}

HL_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
    if (hl_unlikely(!hl_real.sigaction)) {
        real_resolve();
        if (!hl_real.sigaction)
            return -1;
    }
    if (sig == SIGSEGV && atomic_load(&segv_chained)) {
        if (old)
            *old = program_segv;
        if (act)
            program_segv = *act;
        return 0;
    }
    int mine = sig > 0 && sig < 65 && atomic_load(&ours[sig]);
    if (mine && act && wants_default(act) && is_fatal(sig)) {
        // Default asked, default kept: the agent's handler stays and behaves as the default.
        if (old) {
            memset(old, 0, sizeof *old);
            old->sa_handler = SIG_DFL;
        }
        return 0;
    }
    int rc = hl_real.sigaction(sig, act, old);
    if (rc == 0) {
        if (mine && old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction == on_fatal) {
            memset(old, 0, sizeof *old);
            old->sa_handler = SIG_DFL;
        }
        if (act && mine)
            atomic_store(&ours[sig], 0); // the program's handler now
        else if (act && !mine && wants_default(act) && is_fatal(sig) &&
                 atomic_load(&hl_phase) == HL_ON)
            install_one(sig);
    }
    return rc;
}

// signal() in glibc sets its action without going through sigaction's public name.
HL_EXPORT void (*signal(int sig, void (*handler)(int)))(int) {
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART; // BSD semantics, as glibc's signal() gives
    sigemptyset(&act.sa_mask);
    if (sig > 0 && sig < 65)
        sigaddset(&act.sa_mask, sig);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}
