// SPDX-License-Identifier: MIT
// scan.h - the reachability scan (scan.c; the classification itself is classify.c's).
#ifndef HL_SCAN_H
#define HL_SCAN_H

#include <stdint.h>

#include "../common/format.h"
#include "encode.h"

struct ucontext_t;
// A thread's own roots: its stack from lo up (its mapping's end), and its registers.
#define HL_THREAD_REGS 32
typedef struct hl_thread_roots_s {
    uintptr_t sp; // tells which mapping is its stack
    uintptr_t lo;
    int nregs;
    uintptr_t regs[HL_THREAD_REGS];
} hl_thread_roots_t;
// Before the world stops (it may take locks): the calling thread's roots, from the frame of the
// program under the agent's and the exit path's (uc: the context a fatal signal interrupted).
void scan_prepare(hl_thread_roots_t* self, const struct ucontext_t* uc);
// The same for a scan a program thread asks for while it runs (heaplens_leak_check): its roots
// from the program's frame under the agent's and the API library's.
void scan_prepare_caller(hl_thread_roots_t* self);
int scan_stop_world(void); // 1 when every other thread parked with its registers
void scan_resume_world(void);
// What a scan found, by kind (HL_LEAK_*): the blocks it judged, the agent's own left out.
typedef struct hl_scan_tally_s {
    uint64_t bytes[HL_LEAK_COUNT], blocks[HL_LEAK_COUNT];
    uint64_t judged;      // blocks listed
    uint64_t lost_before; // blocks earlier scans reported lost (lost_set.h)
    uint64_t lost_gone;   // of those, released since
} hl_scan_tally_t;

typedef struct hl_scan_request_s {
    int all_stopped;       // every other thread parked with its registers
    int at_exit;           // the trace's last scan (the process ends, or tracing stops)
    int process_ends;      // nothing runs after it: no later re-check needs a lost set
    int exits;             // and it ends by exit or _exit, where memcheck has glibc release its
                           // own memory first (libc_exit.h); not by a signal, not a detach
    uint32_t since_epoch;  // list only blocks of this epoch or later (0: every block)
    int only_lost;         // list only the blocks earlier scans reported lost (lost_set.h)
    hl_scan_tally_t* tally; // filled when given
} hl_scan_request_t;

// Once, on a program thread before any scan (it may take the loader's lock): what every scan
// needs from the loader, read ahead so that a scan from the writer thread takes no lock.
void scan_init(void);
// Classify every live block and encode SCAN + VERDICT records (a SCAN saying HL_SCAN_NO_MEMORY
// when the scan cannot get its memory). The world is stopped; self from scan_prepare, or a
// thread of the agent's own (every program thread parked): sp, lo and nregs 0.
int scan_run_with(hl_enc_t* enc, const hl_thread_roots_t* self, const hl_scan_request_t* req);
void scan_park_self(void); // called when park_pending was set while busy
void scan_park_owed(void); // thread_unlock: a park asked for while it held the registry's lock
void scan_note_dead_stack(uintptr_t sp, uintptr_t tp);

#endif
