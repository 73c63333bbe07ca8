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

// OFF until the first hook call (or the constructor), BOOTING while it sets up, ON while
// tracing, DONE once the trace is finished (or tracing could not start).
enum hl_phase { HL_OFF = 0, HL_BOOTING = 1, HL_ON = 2, HL_STOPPING = 3, HL_DONE = 4 };
extern _Atomic int hl_phase;
HL_COLD void agent_init(void);
void agent_finish(int how, int value);
// The same from a signal handler: uc holds the interrupted registers (roots of the scan).
void agent_finish_in(int how, int value, const struct ucontext_t* uc);
void agent_fork_prepare(void); // around fork, and clone without CLONE_VM
void agent_fork_parent(void);
void agent_fork_child(void);
int agent_owns_process(void); // 0 in a child sharing the memory: vfork's, clone(CLONE_VM)'s
void agent_before_exec(const char* path);
int agent_is_from_start(void); // traced from the first allocation (not after a foreign one)

// hooks_signal.c: finishing on fatal signals, invisibly to the program.
void signals_install(void);

#endif
