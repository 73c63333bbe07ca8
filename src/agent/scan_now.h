// SPDX-License-Identifier: MIT
// scan_now.h - the reachability scan on demand (heaplens_leak_check, the shell's leak checks):
// the exit's scan run while the program goes on.
#ifndef HL_SCAN_NOW_H
#define HL_SCAN_NOW_H

#include <stddef.h>
#include <stdint.h>

// Bytes and blocks by HL_LEAK_* kind (format.h), of the blocks the scan classified.
typedef struct hl_scan_counts_s {
    size_t bytes[4], blocks[4];
} hl_scan_counts_t;

// Stops the world, classifies every live block of epoch since_epoch or later (0: all), writes
// the scan's records into the trace, resumes the world. 0, or -1 with errno. Called from a
// program thread outside the agent.
int scan_now(uint32_t since_epoch, hl_scan_counts_t* counts);

#endif
