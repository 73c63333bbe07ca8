// SPDX-License-Identifier: MIT
// scan_now.c - the reachability scan a program thread asks for while it runs (heaplens_leak_check
// and heaplens_leak_check_new, api.c): the exit's scan, with this thread's roots from its own
// frame, the others parked, the trace holding every event before it.
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "scan.h"
#include "scan_now.h"
#include "thread.h"
#include "writer.h"

int scan_now(uint32_t since_epoch, hl_scan_counts_t* counts) {
    hl_thread_t* t = thread_self();
    int was_busy = t->busy;
    t->busy = 1;
    hl_thread_roots_t self;
    scan_prepare_caller(&self); // before the world stops: it may take the unwinder's locks
    hl_scan_tally_t tally;
    memset(&tally, 0, sizeof tally);
    writer_lock();
    int rc = writer_scan_now_locked(&self, &(hl_scan_request_t){.since_epoch = since_epoch, .tally = &tally});
    writer_unlock();
    t->busy = was_busy;
    if (rc != 0) {
        errno = EAGAIN; // tracing is stopped, or not every thread would stop
        return -1;
    }
    if (counts)
        for (int k = 0; k < 4; k++) {
            counts->bytes[k] = (size_t)tally.bytes[k];
            counts->blocks[k] = (size_t)tally.blocks[k];
        }
    return 0;
}
