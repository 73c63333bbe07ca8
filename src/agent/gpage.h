// SPDX-License-Identifier: MIT
// gpage.h - sampled blocks against an inaccessible page (gpage.c): --guard-pages=1 or 1/N.
// A sampled block ends where a PROT_NONE page begins, and once released its page is made
// inaccessible too and kept so for a while; a read or write past its end or after its release
// faults, and the fault handler reports it and lets the program go on.
#ifndef HL_GPAGE_H
#define HL_GPAGE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/compiler.h"
#include "live.h"
#include "thread.h"

extern uintptr_t hl_gpage_lo, hl_gpage_hi; // the pool's address range (0, 0 until made)

HL_INLINE int gpage_owns(uintptr_t addr) {
    return addr - hl_gpage_lo < hl_gpage_hi - hl_gpage_lo;
}
// A sampled block for the program (t busy, recorded here), or NULL: not sampled, too big for a
// page, not from a --guard-sites function, or no slot free (the caller lays the block out as
// usual). *stack (0 on entry) is the allocation's stack when it was unwound to choose: the
// caller records the block with it rather than unwinding again.
void* gpage_alloc(hl_thread_t* t, size_t size, size_t align, int fn, int is_zeroed,
                  uint32_t* stack);
// A sampled block released (b as the live table had it): checked, made inaccessible.
void gpage_release(const hl_block_t* b, uint32_t release_stack, int fn);
// The fault handler's part: 1 when the fault at si_addr was in the pool (reported, the page
// made accessible: return to retry the access), 0 when it is not the agent's.
int gpage_fault(const siginfo_t* si, void* ucontext);
void gpage_reset_after_fork(void);

#endif
