// SPDX-License-Identifier: MIT
// attach.c - the agent in a process that was running before it: `heaplens attach PID` stops a
// thread of the process with ptrace, makes it dlopen the agent, then call heaplens_attach_start.
// A dlopen'ed agent is found after the C library in the link map, so its definitions of malloc
// and the rest bind no call: the calls are routed to its hooks through the relocation slots of
// every module instead (real.c and got.c, as for an allocator the program defines itself), and
// back at heaplens_attach_stop. Each attach is a session of its own: a new trace, the live table
// empty (blocks made before the attach are unknown, and pass through when released).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "agent.h"
#include "attach.h"
#include "log.h"
#include "options.h"
#include "real.h"
#include "thread.h"
#include "writer.h"

static int loaded_late = -1; // -1: not looked yet
static int attached;

typedef struct order_s {
    uintptr_t own_base;
    int verdict; // 0: neither seen yet; 1: the C library came first; 2: the agent did
} order_t;

static int order_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    (void)size;
    order_t* o = arg;
    if (info->dlpi_addr == o->own_base) {
        o->verdict = 2;
        return 1;
    }
    const char* slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    const char* base = slash ? slash + 1 : info->dlpi_name;
    if (base && !strncmp(base, "libc.so", 7)) {
        o->verdict = 1;
        return 1;
    }
    return 0;
}

int attach_loaded_late(void) {
    if (loaded_late < 0) {
        Dl_info self;
        order_t o = {0, 0};
        if (dladdr((void*)&attach_loaded_late, &self))
            o.own_base = (uintptr_t)self.dli_fbase;
        // Preloaded (or linked ahead of the C library), the agent comes first; dlopen'ed, after.
        // The link map's own base for the agent is its load bias, as dladdr's is for a PIE one.
        struct link_map* lm = NULL;
        if (dladdr1((void*)&attach_loaded_late, &self, (void**)&lm, RTLD_DL_LINKMAP) && lm)
            o.own_base = lm->l_addr;
        dl_iterate_phdr(order_cb, &o);
        loaded_late = o.verdict == 1;
    }
    return loaded_late;
}

int attach_is_attached(void) {
    return attached;
}

HL_EXPORT int heaplens_attach_start(const char* options) {
    if (!attach_loaded_late())
        return -1; // preloaded: tracing runs from the start already
    int phase = atomic_load(&hl_phase);
    if (phase == HL_BOOTING || phase == HL_ON)
        return -1;
    hl_thread_t* t = thread_self();
    int was_busy = t->busy;
    t->busy = 1;
    if (phase == HL_DONE) { // an earlier session ended: this one starts from nothing
        writer_wait_gone();
        agent_session_reset();
    }
    attached = 1;
    agent_note_not_from_start();
    options_load_string(options ? options : "");
    if (atomic_load(&hl_real_ready) != 2)
        real_resolve(); // finds the definitions in use, and routes their calls here
    else
        real_routes_install();
    t->busy = was_busy;
    agent_init();
    return atomic_load(&hl_phase) == HL_ON ? 0 : -1;
}

HL_EXPORT int heaplens_attach_stop(void) {
    if (!attached || atomic_load(&hl_phase) != HL_ON)
        return -1;
    hl_thread_t* t = thread_self();
    int was_busy = t->busy;
    t->busy = 1;
    real_routes_remove(); // calls already inside a hook finish there
    t->busy = was_busy;
    agent_finish(HL_END_DETACH, 0);
    writer_wait_gone();
    log_close(); // the process keeps no descriptor of the agent's
    return 0;
}
