// SPDX-License-Identifier: MIT
// heaplens_api.c - libheaplens-api: the program's side of include/heaplens.h. Each call finds
// the agent's table (one dlsym of HL_API_ENTRY, kept once found) and forwards to it; without
// the agent it returns "not traced" at once. While the agent is absent, the lookup is made
// again only when the set of loaded modules has changed since the last one (the loader's
// count of additions, read without walking the list), so a later attach is seen and a program
// that never has heaplens pays a few nanoseconds per call.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>

#include "../common/api_table.h"

#define HL_AGENT_FILE "libheaplens.so"

static _Atomic(const hl_api_table_t*) table;
static _Atomic unsigned long long looked_at_adds = ~0ull; // dlpi_adds at the last lookup

static int first_module_adds(struct dl_phdr_info* info, size_t size, void* data) {
    (void)size;
    *(unsigned long long*)data = info->dlpi_adds;
    return 1; // the count is the same on every module: the first one says it
}

// An agent loaded with RTLD_LOCAL (an attach) is not in the global scope: found by its file.
static int agent_module(struct dl_phdr_info* info, size_t size, void* data) {
    (void)size;
    const char* name = info->dlpi_name;
    const char* base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (!base || strcmp(base, HL_AGENT_FILE) != 0)
        return 0;
    void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
        *(void**)data = dlsym(h, HL_API_ENTRY);
        dlclose(h); // NOLOAD took a reference: give it back (the agent is never unloaded)
    }
    return *(void**)data != NULL;
}

static const hl_api_table_t* find_agent(void) {
    const hl_api_table_t* t = atomic_load_explicit(&table, memory_order_acquire);
    if (__builtin_expect(t != NULL, 1))
        return t;
    unsigned long long adds = 0;
    dl_iterate_phdr(first_module_adds, &adds);
    if (adds == atomic_load_explicit(&looked_at_adds, memory_order_relaxed))
        return NULL; // looked in vain, and no module came since
    void* sym = dlsym(RTLD_DEFAULT, HL_API_ENTRY);
    if (!sym)
        dl_iterate_phdr(agent_module, &sym);
    hl_api_entry_fn entry = (hl_api_entry_fn)sym;
    t = entry ? entry(HEAPLENS_API_VERSION) : NULL;
    // Noted only once the lookup is over: threads asking at once all look (the first calls of
    // a program's threads), none is told "not traced" while another is still looking.
    if (t)
        atomic_store_explicit(&table, t, memory_order_release);
    else
        atomic_store_explicit(&looked_at_adds, adds, memory_order_relaxed);
    return t;
}

static int not_traced(void) {
    errno = ENOSYS;
    return -1;
}

int heaplens_is_traced(void) {
    const hl_api_table_t* t = find_agent();
    return t ? t->is_traced() : 0;
}

#define FORWARD(call, ...)                                                                      \
    do {                                                                                        \
        const hl_api_table_t* t = find_agent();                                                 \
        return t ? t->call(__VA_ARGS__) : not_traced();                                         \
    } while (0)

int heaplens_pause(void) {
    FORWARD(pause);
}
int heaplens_resume(void) {
    FORWARD(resume);
}
heaplens_mark_t heaplens_mark(void) {
    FORWARD(mark);
}
int heaplens_report_since(heaplens_mark_t mark, int fd, int format) {
    FORWARD(report_since, mark, fd, format);
}
int heaplens_report(int fd, int format) {
    FORWARD(report, fd, format);
}
int heaplens_leak_check(struct heaplens_leak_counts* counts) {
    FORWARD(leak_check, counts);
}
int heaplens_leak_check_new(struct heaplens_leak_counts* counts) {
    FORWARD(leak_check_new, counts);
}
int heaplens_ignore(const void* ptr) {
    FORWARD(ignore, ptr);
}
int heaplens_watch(const void* ptr, heaplens_watch_fn callback, void* arg) {
    FORWARD(watch, ptr, callback, arg);
}
int heaplens_tag(unsigned type, unsigned location) {
    FORWARD(tag, type, location);
}
int heaplens_untag(void) {
    FORWARD(untag);
}
int heaplens_set_thresholds(size_t block_bytes, size_t delta_bytes, uint64_t delta_ns,
                            heaplens_threshold_fn callback, void* arg) {
    FORWARD(set_thresholds, block_bytes, delta_bytes, delta_ns, callback, arg);
}
int heaplens_stats(struct heaplens_stats* stats) {
    FORWARD(stats, stats);
}
