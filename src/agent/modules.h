// SPDX-License-Identifier: MIT
// modules.h - the loaded objects, reported as MODULE / MODULE_GONE records (modules.c), and
// the agent's own extent (frames inside it are never the program's).
#ifndef HL_MODULES_H
#define HL_MODULES_H

#include <stdint.h>

#include "encode.h"

void modules_refresh(hl_enc_t* enc);
void modules_reset(void);
// The MODULE records of the modules loaded now, as written before, into a trace begun again:
// on any thread (the loader's list is not read).
void modules_rewrite(hl_enc_t* enc);
extern uintptr_t hl_self_lo, hl_self_hi;
HL_INLINE int modules_own_text(uintptr_t ip) { // inside libheaplens.so?
    return ip >= hl_self_lo && ip < hl_self_hi;
}
void modules_self_range(void);
void modules_own_range(uintptr_t* lo, uintptr_t* hi);

#endif
