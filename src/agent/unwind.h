// SPDX-License-Identifier: MIT
// unwind.h - walking the program's stack from inside the agent (unwind.c): a call's stack for
// the trace, and the program's frame under the agent's for the scan.
#ifndef HL_UNWIND_H
#define HL_UNWIND_H

#include <stdint.h>

#include "thread.h"

// The frame of the program under the agent's own (and, with HL_FRAME_PAST_LIBC, under libc's
// and the loader's; with HL_FRAME_PAST_SIGNAL, the one a signal interrupted, past the handler):
// its stack pointer and the callee-saved registers as that frame has them. 0, or -1 when the
// walk found no such frame (out then holds the outermost frame reached, is_program 0).
#define HL_FRAME_REGS 12
enum { HL_FRAME_PAST_LIBC = 1, HL_FRAME_PAST_SIGNAL = 2 };
typedef struct hl_frame_s {
    uintptr_t sp, ip;
    uintptr_t regs[HL_FRAME_REGS];
    int nregs;
    int is_signal;  // interrupted by a signal: it may use the red zone below sp
    int is_program; // the frame sought (not merely the last one reached)
} hl_frame_t;
int unwind_program_frame(int flags, hl_frame_t* out);
uint32_t stack_capture(hl_thread_t* t);         // unwind + intern, for the current call on thread t
uint32_t stack_capture_release(hl_thread_t* t); // the same, for a release (its own reuse cache)
// From a signal handler: the stack of the instruction at ip that faulted.
uint32_t stack_capture_fault(hl_thread_t* t, uintptr_t ip);
void unwind_init(void);
// With the unwind_check setting: how many stacks were checked and how many differed, said on
// stderr (at the end of a trace).
void unwind_check_report(void);
void unwind_forget_recent(void); // a new trace: every thread walks its stacks anew
void unwind_after_fork(hl_thread_t* t); // the forking thread, in the child
// After dlclose or dlopen (the loader may unload objects of its own): when objects were unloaded
// since the last call, the rules worked out for their code are forgotten.
void unwind_code_unloaded(void);

#endif
