// SPDX-License-Identifier: MIT
// report_live.h - what is live now, by allocation stack, written by the agent itself
// (report_live.c): heaplens_report / heaplens_report_since, and the shell's `top` and `since`.
#ifndef HL_REPORT_LIVE_H
#define HL_REPORT_LIVE_H

#include <stdint.h>

enum { HL_REPORT_TEXT = 0, HL_REPORT_JSON = 1 }; // = HEAPLENS_TEXT, HEAPLENS_JSON

// The live blocks allocated in since_epoch or later (0: every one), grouped by allocation
// stack, the most bytes first, top_n groups (0: all) written to fd. From any thread but the
// writer and never with the world stopped: it takes the live table's locks for its walk, then
// symbolizes with dladdr (the loader's lock). Allocates nothing (agent pages, unmapped after).
// 0, or -1 with errno (EIO: fd could not take it all, ENOMEM).
int report_live_write(int fd, int format, uint32_t since_epoch, int top_n);

#endif
