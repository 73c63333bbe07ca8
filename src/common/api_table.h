// SPDX-License-Identifier: MIT
// api_table.h - what libheaplens-api (src/api/) finds in the agent: one exported function that
// hands out this table. One symbol and a version, looked up at call time, so the library works
// whether the agent was preloaded, loaded later, or is absent, and never depends on which of
// two definitions of a name the loader binds.
#ifndef HL_API_TABLE_H
#define HL_API_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "../../include/heaplens.h"

#define HL_API_ENTRY "heaplens_agent_api"

typedef struct hl_api_table_s {
    int version; // HEAPLENS_API_VERSION
    int (*is_traced)(void);
    int (*pause)(void);
    int (*resume)(void);
    int64_t (*mark)(void);
    int (*report_since)(int64_t mark, int fd, int format);
    int (*report)(int fd, int format);
    int (*leak_check)(struct heaplens_leak_counts* counts);
    int (*leak_check_new)(struct heaplens_leak_counts* counts);
    int (*ignore)(const void* ptr);
    int (*watch)(const void* ptr, heaplens_watch_fn cb, void* arg);
    int (*tag)(unsigned type, unsigned location);
    int (*untag)(void);
    int (*set_thresholds)(size_t block_bytes, size_t delta_bytes, uint64_t delta_ns,
                          heaplens_threshold_fn cb, void* arg);
    int (*stats)(struct heaplens_stats* s);
} hl_api_table_t;

typedef const hl_api_table_t* (*hl_api_entry_fn)(int version);

#endif
