// SPDX-License-Identifier: MIT
// attach.h - the agent loaded into a process that is already running (heaplens attach, which
// makes the process dlopen the agent and call heaplens_attach_start): attach.c.
#ifndef HL_ATTACH_H
#define HL_ATTACH_H

// Was the agent loaded after the C library (dlopen), not preloaded? Then its constructor does
// nothing: tracing starts only when heaplens_attach_start says how.
int attach_loaded_late(void);
// Is this a session started by heaplens_attach_start? Blocks made before it are unknown: their
// releases pass through, unjudged; the allocator's layout is left untouched (no guard, no
// header); glibc is not told it still has one thread (the writer goes away at detach).
int attach_is_attached(void);

// Exported, for the injector (the names are its contract):
//   int heaplens_attach_start(const char* options): options as HEAPLENS_OPTIONS holds them; the
//     allocation calls of every loaded module (and of modules loaded later) are routed to the
//     agent and a new trace begins. 0, or -1 when tracing is on already or cannot start.
//   int heaplens_attach_stop(void): the calls are routed back, the trace ends (a scan, then END
//     "detach") and the writer thread exits. 0, or -1 when not attached.

#endif
