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
