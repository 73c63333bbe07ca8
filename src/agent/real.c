// SPDX-License-Identifier: MIT
// real.c - the allocator underneath, found with dlsym(RTLD_NEXT) so that a preloaded jemalloc,
// tcmalloc or mimalloc is the one called. dlsym itself may allocate; those calls are served
// from a static bump arena and replayed into the trace once the agent is up. An allocator
// defined ahead of the agent (in the executable) is the one underneath instead, and the calls
// bound to it are routed to the agent (see "Foreign allocators" below).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "attach.h"
#include "log.h"
#include "os.h"
#include "real.h"
#include "got.h"

hl_real_t hl_real;
_Atomic int hl_real_ready;

// ---------------------------------------------------------------------------------------------
// Bootstrap arena. Never returned to the allocator: free() of such a pointer is recorded only.
// ---------------------------------------------------------------------------------------------
#define HL_BOOTSTRAP_SIZE (256u << 10)
static _Alignas(64) uint8_t bootstrap_mem[HL_BOOTSTRAP_SIZE];
static _Atomic size_t bootstrap_used;

void* bootstrap_alloc(size_t size, size_t align) {
    if (align < 16)
        align = 16;
    for (;;) {
        size_t used = atomic_load(&bootstrap_used);
        size_t start = (used + align - 1) & ~(align - 1);
        if (start + size > HL_BOOTSTRAP_SIZE || start + size < start) {
            // Out of arena: the host must not die for it, so hand out agent pages instead.
            return os_map(size ? size : 1);
        }
        if (atomic_compare_exchange_weak(&bootstrap_used, &used, start + size))
            return bootstrap_mem + start;
    }
}

size_t bootstrap_room(const void* p) {
    return (size_t)(bootstrap_mem + atomic_load(&bootstrap_used) - (const uint8_t*)p);
}

int bootstrap_owns(const void* p) {
    return (const uint8_t*)p >= bootstrap_mem &&
           (const uint8_t*)p < bootstrap_mem + HL_BOOTSTRAP_SIZE;
}

// ---------------------------------------------------------------------------------------------
// Resolution.
// ---------------------------------------------------------------------------------------------
#define RESOLVE(field, name) *(void**)&hl_real.field = dlsym(RTLD_NEXT, name)
static void find_foreign(void);

void real_resolve(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hl_real_ready, &expected, 1)) {
        // Another thread resolves: wait for it, unless it is this thread recursing (its nested
        // calls see busy and take the bootstrap path instead of coming here).
        while (atomic_load(&hl_real_ready) != 2)
            sched_yield();
        return;
    }
    RESOLVE(malloc, "malloc");
    RESOLVE(free, "free");
    RESOLVE(calloc, "calloc");
    RESOLVE(realloc, "realloc");
    RESOLVE(posix_memalign, "posix_memalign");
    RESOLVE(aligned_alloc, "aligned_alloc");
    RESOLVE(memalign, "memalign");
    RESOLVE(valloc, "valloc");
    RESOLVE(pvalloc, "pvalloc");
    RESOLVE(malloc_usable_size, "malloc_usable_size");
    RESOLVE(mmap, "mmap");
    RESOLVE(mmap64, "mmap64");
    RESOLVE(munmap, "munmap");
    RESOLVE(mremap, "mremap");
    RESOLVE(dlopen, "dlopen");
    RESOLVE(dlclose, "dlclose");
    RESOLVE(exit_, "_exit");
    RESOLVE(Exit, "_Exit");
    RESOLVE(execve, "execve");
    RESOLVE(execv, "execv");
    RESOLVE(execvp, "execvp");
    RESOLVE(execvpe, "execvpe");
    RESOLVE(fexecve, "fexecve");
    RESOLVE(fork, "fork");
    RESOLVE(sigaction, "sigaction");
    RESOLVE(signal, "signal");
    RESOLVE(libc_single_threaded, "__libc_single_threaded");
    if (!hl_real.mmap64)
        hl_real.mmap64 = (void*)hl_real.mmap; // a 64-bit libc: the same function
    find_foreign();
    // glibc's malloc is its __libc_malloc; a preloaded or foreign allocator is another function.
    void* libc_malloc = dlsym(RTLD_NEXT, "__libc_malloc");
    hl_real.is_glibc = libc_malloc && libc_malloc == (void*)hl_real.malloc;
    atomic_store(&hl_real_ready, 2);
}

// ---------------------------------------------------------------------------------------------
// Foreign allocators. An executable that defines malloc itself (rustc links jemalloc in; many
// servers link tcmalloc or mimalloc) comes before the agent in the search order, so the loader
// binds every module's malloc to it and the agent's hooks are never called. Each such function
// becomes the one underneath (the program keeps its allocator, block for block), and the
// modules' relocation slots bound to it are pointed at the agent's hook of the same name
// (got.c), for the modules loaded later too. This happens as soon as the agent first runs (as
// early as a preloaded allocator would be reached: other libraries' constructors allocate), and
// the first call routed so starts the agent. The defining module's calls to its own functions
// are direct calls, which no slot carries: they stay unseen, and the run says so.
// ---------------------------------------------------------------------------------------------
enum foreign_role {
    FN_ALLOCATES, // a block comes out of it: a call unseen is an allocation lost
    FN_RELEASES,  // a call unseen leaves a block in use
    FN_QUERIES,   // malloc_usable_size: a call unseen loses nothing
    FN_ENDS,      // _exit, exec: the trace must end first. Routed only when attached: preloaded,
                  // the agent's own come first; attached, the C library's do, and a fork child
                  // of the process that ends by _exit (as shells' and servers' children do) lost
                  // every event its writer had not written yet, and its trace had no end
};

typedef struct foreign_fn_s {
    const char* name;
    void** real; // its hl_real field (NULL: the agent's hook needs none)
    int role;    // foreign_role
} foreign_fn_t;

static const foreign_fn_t foreign_fns[] = {
    {"malloc", (void**)&hl_real.malloc, FN_ALLOCATES},
    {"free", (void**)&hl_real.free, FN_RELEASES},
    {"calloc", (void**)&hl_real.calloc, FN_ALLOCATES},
    {"realloc", (void**)&hl_real.realloc, FN_ALLOCATES},
    {"posix_memalign", (void**)&hl_real.posix_memalign, FN_ALLOCATES},
    {"aligned_alloc", (void**)&hl_real.aligned_alloc, FN_ALLOCATES},
    {"memalign", (void**)&hl_real.memalign, FN_ALLOCATES},
    {"valloc", (void**)&hl_real.valloc, FN_ALLOCATES},
    {"pvalloc", (void**)&hl_real.pvalloc, FN_ALLOCATES},
    {"malloc_usable_size", (void**)&hl_real.malloc_usable_size, FN_QUERIES},
    {"_exit", (void**)&hl_real.exit_, FN_ENDS},
    {"_Exit", (void**)&hl_real.Exit, FN_ENDS},
    {"execve", (void**)&hl_real.execve, FN_ENDS},
    {"execv", (void**)&hl_real.execv, FN_ENDS},
    {"execvp", (void**)&hl_real.execvp, FN_ENDS},
    {"execvpe", (void**)&hl_real.execvpe, FN_ENDS},
    {"fexecve", (void**)&hl_real.fexecve, FN_ENDS},
    {"execl", NULL, FN_ENDS}, // the agent's make an execv* call of them (hooks_os.c)
    {"execlp", NULL, FN_ENDS},
    {"execle", NULL, FN_ENDS},
};
#define HL_FOREIGN_MAX HL_ARRAY_LEN(foreign_fns)

static got_route_t foreign_routes[HL_FOREIGN_MAX];
static int foreign_roles[HL_FOREIGN_MAX];
static size_t nforeign;
static int foreign_malloc;       // malloc itself is foreign
static int foreign_loses;        // a foreign function whose unseen calls lose events
static char foreign_module[256]; // the module defining them, as the warning names it
static int foreign_is_exe;       // ... which is the executable
static int heap_coverage_flags;  // HL_INFO_HEAP_* once routed

// The defining module's name: its file name, the executable's when the loader gives none.
static void name_module(const char* path) {
    char exe[1024];
    if (!path || !path[0]) {
        long n = syscall(SYS_readlink, "/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
    }
    const char* slash = strrchr(path, '/');
    const char* base = slash ? slash + 1 : path;
    size_t len = strlen(base);
    if (len >= sizeof foreign_module)
        len = sizeof foreign_module - 1;
    memcpy(foreign_module, base, len);
    foreign_module[len] = 0;
}

// Which allocator functions the program binds to a definition other than the agent's, and
// the agent's own hooks for them; the calls bound to those are routed at once. From inside the
// agent the name alone is bound to the foreign definition too, so the hooks are looked up in
// the agent's own symbol table (got.c). Nothing here may allocate: this runs inside the first
// call that reaches the agent, which can be the foreign allocator's own start, under its lock
// (jemalloc's malloc_init_hard maps pages first).
static void find_foreign(void) {
    for (size_t i = 0; i < HL_FOREIGN_MAX; i++) {
        const foreign_fn_t* f = &foreign_fns[i];
        if (f->role == FN_ENDS && !attach_is_attached())
            continue;
        void* bound = dlsym(RTLD_DEFAULT, f->name);
        void* hook = got_own_symbol((const void*)&find_foreign, f->name);
        if (!bound || !hook || bound == hook)
            continue; // bound to the agent, as a preloaded library's names are
        // A non-PIE executable that takes the function's address imports it through a
        // canonical PLT entry: an undefined symbol with the entry's address as its value, which
        // dlsym returns. That entry jumps through the executable's own relocation slot, bound
        // to the agent like every other call: no definition, nothing foreign (Debian's python3,
        // gcc's cc1). The module's own definition is looked up by its hash table: dladdr would
        // search its every symbol (cc1 exports 29,000, 0.15 ms a process).
        if (!got_own_symbol(bound, f->name))
            continue;
        Dl_info where;
        if (!dladdr(bound, &where))
            continue;
        if (!nforeign) {
            Dl_info exe;
            foreign_is_exe =
                dladdr((void*)getauxval(AT_PHDR), &exe) && exe.dli_fbase == where.dli_fbase;
            name_module(where.dli_fname);
        }
        if (f->real)
            *f->real = bound;
        foreign_malloc |= i == 0;
        foreign_loses |= f->role == FN_ALLOCATES || f->role == FN_RELEASES;
        foreign_roles[nforeign] = f->role;
        foreign_routes[nforeign++] = (got_route_t){.name = f->name, .from = bound, .to = hook};
    }
    if (nforeign) // from now on, before the agent starts: the first call routed starts it
        got_routes_install(foreign_routes, nforeign, (const void*)&find_foreign);
}

int real_is_foreign(void) {
    return foreign_loses;
}

int real_heap_coverage(void) {
    return heap_coverage_flags;
}

// The routes' names, "malloc, free, calloc": all of them, or only those with a slot that could
// not be routed.
static void list_names(char* out, size_t cap, int only_failed) {
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < nforeign && len + 1 < cap; i++) {
        const got_route_t* r = &foreign_routes[i];
        if ((only_failed && !r->failed) || foreign_roles[i] == FN_ENDS)
            continue;
        len += (size_t)hl_fmt(out + len, cap - len, "%s%s", len ? ", " : "", r->name);
    }
}

// Once tracing starts: how much of the heap the agent sees (INFO's HL_INFO_HEAP_* flags), said
// in one line. Not at all when malloc is foreign and no allocating call could be routed.
void real_foreign_report(void) {
    if (!foreign_loses)
        return;
    got_routes_refresh(); // the counts of the modules loaded by now
    size_t allocating = 0, failed = 0;
    for (size_t i = 0; i < nforeign; i++) {
        if (foreign_roles[i] == FN_ALLOCATES)
            allocating += foreign_routes[i].slots;
        failed += foreign_routes[i].failed;
    }
    char names[256], unrouted[256];
    list_names(names, sizeof names, 0);
    list_names(unrouted, sizeof unrouted, 1);
    if (foreign_malloc && allocating == 0) {
        heap_coverage_flags = HL_INFO_HEAP_UNTRACED;
        hl_log("%s defines its own %s and no call to them could be routed to heaplens: the heap "
               "is NOT traced",
               foreign_module, names);
        return;
    }
    heap_coverage_flags = HL_INFO_HEAP_PARTIAL;
    hl_log("%s defines its own %s: calls from %s are traced, calls inside %s itself are not%s%s%s",
           foreign_module, names, foreign_is_exe ? "shared libraries" : "other modules",
           foreign_module, failed ? " (some calls to " : "", failed ? unrouted : "",
           failed ? " could not be routed: their pages stay read-only)" : "");
}

// Modules loaded later bind the foreign definitions too.
void real_route_new_modules(void) {
    got_routes_refresh();
}

void real_routes_install(void) {
    if (nforeign)
        got_routes_install(foreign_routes, nforeign, (const void*)&find_foreign);
}

void real_routes_remove(void) {
    got_routes_remove();
}
