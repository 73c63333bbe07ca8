// SPDX-License-Identifier: MIT
// options.c - HEAPLENS_* environment variables, read once at start into one struct. The CLI
// sets them; a user preloading the agent by hand may too. getenv does not allocate.
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "options.h"
#include "stacks.h"

hl_options_t hl_opt = {
    .depth = 32,
    .guard = 8,
    .sample_ms = 10,
    .scan_at_exit = 1,
    .release_stacks = 1,
};

static int env_int(const char* name, int fallback, int lo, int hi) {
    const char* s = getenv(name);
    if (!s || !*s)
        return fallback;
    long v = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (*s - '0');
    if (*s || v < lo || v > hi) {
        hl_log("ignoring %s: not a number in [%d, %d]", name, lo, hi);
        return fallback;
    }
    return (int)v;
}

static void env_str(const char* name, char* out, size_t cap) {
    const char* s = getenv(name);
    if (s && strlen(s) < cap)
        strcpy(out, s);
}

void options_load(void) {
    hl_opt.depth = env_int("HEAPLENS_DEPTH", hl_opt.depth, 1, HL_MAX_DEPTH);
    hl_opt.guard = env_int("HEAPLENS_GUARD", hl_opt.guard, 0, 4096);
    hl_opt.sample_ms = env_int("HEAPLENS_SAMPLE_MS", hl_opt.sample_ms, 1, 3600000);
    hl_opt.no_follow = env_int("HEAPLENS_NO_FOLLOW", 0, 0, 1);
    hl_opt.scan_at_exit = env_int("HEAPLENS_SCAN", 1, 0, 1);
    hl_opt.is_disabled = env_int("HEAPLENS_DISABLE", 0, 0, 1);
    hl_opt.release_stacks = env_int("HEAPLENS_RELEASE_STACKS", 1, 0, 1);
    // Guards must keep the real block's alignment: round to the pointer size.
    hl_opt.guard = (hl_opt.guard + 7) & ~7;
    // Without guards the allocator's layout stays untouched: no headers either.
    hl_opt.header_min =
        hl_opt.guard ? (size_t)env_int("HEAPLENS_HEADER_MIN", 256, 0, 1 << 30) : SIZE_MAX;
    strcpy(hl_opt.output, "heaplens.%e.%p.hl");
    env_str("HEAPLENS_OUTPUT", hl_opt.output, sizeof hl_opt.output);
    env_str("HEAPLENS_SESSION", hl_opt.session, sizeof hl_opt.session);
    env_str("HEAPLENS_REMOTE", hl_opt.remote, sizeof hl_opt.remote);
}
