// SPDX-License-Identifier: MIT
// sites.h - the writer's numbering of (size, stack) pairs, as format.h defines sites (sites.c).
#ifndef HL_SITES_H
#define HL_SITES_H

#include <stdint.h>

void sites_note(uint64_t size, uint32_t stack);     // an ALLOC or INHERIT is being written
uint32_t sites_number(uint64_t size, uint32_t stack); // 0: not numbered (write the FREE in full)
void sites_reset(void);
void sites_note_rss(uint64_t bytes); // the program's RSS, sampled: what the table may take
// The same in a fork child: the table's pages are given back (they read as zeros), not written.
void sites_reset_after_fork(void);

#endif
