// SPDX-License-Identifier: MIT
// inject.h - making a running process call functions of its own, with ptrace (inject.c): how
// heaplens attach loads the agent into a process, and heaplens detach unloads its hooks.
#ifndef HL_INJECT_H
#define HL_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct inject_s {
    pid_t pid;
    pid_t tid;           // the thread that makes the calls
    int is_seized;
    int pending_signal;  // a signal the thread was stopping for: delivered at the end
    char err[512];       // why the last step failed, one line
    unsigned char saved_regs[1024]; // the thread's registers as it was stopped
} inject_t;

// Stops one thread of pid at a moment where it holds no lock of the C library's (blocked in a
// system call other than a futex wait): 0, or -1 with the reason in in->err (the process is
// gone, ptrace is not allowed, no such moment came within a few seconds).
int inject_begin(inject_t* in, pid_t pid);
// The address of a function of the process, by its module (a file name such as "libc.so.6",
// or a path) and symbol: 0 with *addr, or -1 (in->err).
int inject_symbol(inject_t* in, const char* module, const char* name, uintptr_t* addr);
// Calls fn(str, arg) in the stopped thread (str copied onto its stack, below its own frames):
// 0 with the function's result in *result, or -1 (in->err). The thread's registers are put back
// after it.
int inject_call(inject_t* in, uintptr_t fn, const char* str, long arg, long* result);
// Puts the registers back and lets the thread go on (with the signal it was stopping for).
void inject_end(inject_t* in);

#endif
