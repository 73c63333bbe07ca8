// SPDX-License-Identifier: MIT
// unwind.c - the backtrace of the current call, from the CFI in .eh_frame (programs built
// -O2 without frame pointers unwind correctly). libgcc's unwinder carries no TLS, so loading
// it leaves the program's thread layout as it was. Frames inside libheaplens.so are dropped.
#define _GNU_SOURCE
#include <unwind.h>

#include "agent.h"

typedef struct collect_s {
    uintptr_t* ips;
    int n, max, skipping;
} collect_t;

static _Unwind_Reason_Code on_frame(struct _Unwind_Context* ctx, void* arg) {
    collect_t* c = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    if (!ip)
        return _URC_END_OF_STACK;
    if (c->skipping && modules_own_text(ip))
        return _URC_NO_REASON;
    c->skipping = 0;
    c->ips[c->n++] = ip;
    return c->n >= c->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

int unwind_here(uintptr_t* ips, int max) {
    collect_t c = {ips, 0, max, 1};
    _Unwind_Backtrace(on_frame, &c);
    return c.n;
}

void unwind_init(void) {}
