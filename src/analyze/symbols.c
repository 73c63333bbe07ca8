// SPDX-License-Identifier: MIT
// symbols.c - symbolizer on top of elfutils libdwfl: one Dwfl per module placed at bias 0 so
// trace addresses (ip - load bias) can be looked up as they are, DWARF scopes for inline chains,
// the ELF symbol table as fallback, and memo + string-intern tables so every distinct address and
// string is resolved and stored once. One symbolizer belongs to one thread; the only other one
// is its own prefetch thread (symbolizer_prefetch), which opens modules and touches nothing else.

#include "symbols.h"
#include "demangle.h"
#include "symcache.h"

#include <dwarf.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Deeper inline nests exist only in pathological code; the extra frames are dropped outward.
#define MAX_CHAIN 64
#define ARENA_BLOCK (64 * 1024)

typedef struct arena_block_s {
    struct arena_block_s* next;
    size_t used, size;
    max_align_t data[];
} arena_block_t;

// MOD_OPENING: the prefetch thread or the caller is opening it (states change under `lock`)
enum { MOD_UNOPENED, MOD_OPEN, MOD_UNKNOWN, MOD_OPENING };

typedef struct {
    char* path;        // as registered; reported back for "module+0xoff"
    uint8_t* build_id; // NULL when the trace did not record one
    size_t build_id_len;
    int state;
    bool is_queued;  // for the prefetch thread
    bool is_settled; // the caller's thread saw it OPEN or UNKNOWN (read without the lock then)
    Dwfl* dwfl;
    Dwfl_Module* mod;
    // The symbol-table answer by address interval. dwfl_module_addrinfo scans the whole table
    // per call (cc1: 29k symbols, 15 s for one JSON report). Its answer depends only on which
    // symbols start at or below the address and which end above it, so it is the same for
    // every address between two consecutive symbol (or section) boundaries: asked once per
    // interval, the first time an address falls into it.
    uint64_t* bounds; // sorted, distinct
    size_t nbounds;
    const char** answer; // per interval i = [bounds[i-1], bounds[i]); index 0 is below all
    bool* asked;
    bool has_bounds;
    // Sized function symbols by start: an address inside one is named without libdwfl.
    struct fsym_s* fsyms;
    size_t nfsyms;
    uint64_t first_sizeless; // lowest start of a sizeless symbol libdwfl would weigh
} module_t;

// A module's answers kept on disk (symcache.h). Apart from module_t, which the prefetch thread
// copies and writes back: the caller's thread alone touches these.
typedef struct module_cache_s {
    char* name;       // its file's name in the cache directory; NULL: not cached
    bool is_named;    // name was worked out
    bool is_loaded;   // its file was read into the memo (or there was none)
    bool has_new;     // the memo holds answers its file does not
    bool has_mangled; // some of its names were mangled ones (demangled when there is a demangler)
} module_cache_t;

typedef struct {
    uint64_t addr;
    int32_t module; // -1: empty slot
    uint32_t nframes;
    sym_frame_t* frames;
} memo_entry_t;

typedef struct {
    const char* str; // NULL: empty slot
    uint64_t hash;
} intern_entry_t;

struct symbolizer_s {
    char* sysroot;
    char* debuginfo_path;     // referenced by callbacks; must live as long as any Dwfl
    Dwfl_Callbacks callbacks; // libdwfl keeps a pointer to it, so it lives here, not on a stack
    module_t* modules;
    int nmodules, cap_modules;
    memo_entry_t* memo;
    size_t memo_cap, memo_count;
    intern_entry_t* interned;
    size_t intern_cap, intern_count;
    arena_block_t* arena;
    bool oom; // set by helpers that cannot report errors themselves; stops memoising bad results
    bool saw_mangled; // intern_function met a mangled name (symbolizer_lookup clears it)
    int cache_fd;            // the cache directory (symbolizer_use_cache), -1: answers not kept
    module_cache_t* caches;  // by module, as many as cap_modules
    // The prefetch thread: opens queued modules (ELF, debug file, DWARF with its compressed
    // sections inflated, symbol table) while the caller reads the trace. It takes a module
    // UNOPENED -> OPENING -> OPEN or UNKNOWN under `lock`, writes only that module's entry, and
    // only under the lock; the caller's thread alone grows `modules` (under the lock too).
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t worker;
    bool has_worker, is_closing;
    int next_queued; // the worker looks for queued modules from here on
};

// ---------------------------------------------------------------------------------------------
// Storage: a bump arena, because frames and strings are never freed before the symbolizer.

static void* arena_alloc(symbolizer_t* sym, size_t size) {
    size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    arena_block_t* b = sym->arena;
    if (!b || b->size - b->used < size) {
        size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        b = malloc(sizeof(*b) + cap);
        if (!b) {
            sym->oom = true;
            return NULL;
        }
        b->next = sym->arena;
        b->used = 0;
        b->size = cap;
        sym->arena = b;
    }
    void* p = (char*)b->data + b->used;
    b->used += size;
    return p;
}

static uint64_t hash_bytes(const char* s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t hash_key(int module, uint64_t addr) {
    uint64_t x = addr ^ ((uint64_t)(uint32_t)module << 40) ^ 0x9e3779b97f4a7c15ull; // splitmix64
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int intern_grow(symbolizer_t* sym) {
    size_t cap = sym->intern_cap ? sym->intern_cap * 2 : 1024;
    intern_entry_t* t = calloc(cap, sizeof(*t));
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < sym->intern_cap; i++) {
        intern_entry_t e = sym->interned[i];
        if (!e.str)
            continue;
        size_t j = e.hash & (cap - 1);
        while (t[j].str)
            j = (j + 1) & (cap - 1);
        t[j] = e;
    }
    free(sym->interned);
    sym->interned = t;
    sym->intern_cap = cap;
    return 0;
}

// Returns the symbolizer's single copy of s, or NULL (s NULL, or out of memory: sym->oom).
static const char* intern(symbolizer_t* sym, const char* s) {
    if (!s)
        return NULL;
    if (sym->intern_count * 2 >= sym->intern_cap && intern_grow(sym) < 0) {
        sym->oom = true;
        return NULL;
    }
    size_t len = strlen(s);
    uint64_t h = hash_bytes(s, len);
    size_t j = h & (sym->intern_cap - 1);
    while (sym->interned[j].str) {
        if (sym->interned[j].hash == h && strcmp(sym->interned[j].str, s) == 0)
            return sym->interned[j].str;
        j = (j + 1) & (sym->intern_cap - 1);
    }
    char* copy = arena_alloc(sym, len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len + 1);
    sym->interned[j].str = copy;
    sym->interned[j].hash = h;
    sym->intern_count++;
    return copy;
}

static const char* intern_function(symbolizer_t* sym, const char* name) {
    if (!name)
        return NULL;
    if (name[0] == '_' && name[1] == 'Z')
        sym->saw_mangled = true;
    int oom = 0;
    char* demangled = hl_demangle(name, &oom);
    if (oom)
        sym->oom = true; // a name left mangled for want of memory is no answer to keep
    if (demangled) {
        const char* r = intern(sym, demangled);
        free(demangled);
        return r;
    }
    return intern(sym, name);
}

static memo_entry_t* memo_find(symbolizer_t* sym, int module, uint64_t addr) {
    if (!sym->memo_cap)
        return NULL;
    size_t j = hash_key(module, addr) & (sym->memo_cap - 1);
    while (sym->memo[j].module >= 0) {
        if (sym->memo[j].module == module && sym->memo[j].addr == addr)
            return &sym->memo[j];
        j = (j + 1) & (sym->memo_cap - 1);
    }
    return NULL;
}

static int memo_grow(symbolizer_t* sym) {
    size_t cap = sym->memo_cap ? sym->memo_cap * 2 : 4096;
    memo_entry_t* t = malloc(cap * sizeof(*t));
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < cap; i++)
        t[i].module = -1;
    for (size_t i = 0; i < sym->memo_cap; i++) {
        memo_entry_t e = sym->memo[i];
        if (e.module < 0)
            continue;
        size_t j = hash_key(e.module, e.addr) & (cap - 1);
        while (t[j].module >= 0)
            j = (j + 1) & (cap - 1);
        t[j] = e;
    }
    free(sym->memo);
    sym->memo = t;
    sym->memo_cap = cap;
    return 0;
}

static memo_entry_t* memo_insert(symbolizer_t* sym, int module, uint64_t addr,
                                 const sym_frame_t* frames, int n) {
    if ((sym->memo_count + 1) * 2 > sym->memo_cap && memo_grow(sym) < 0)
        return NULL;
    sym_frame_t* copy = arena_alloc(sym, (size_t)n * sizeof(*copy));
    if (!copy)
        return NULL;
    memcpy(copy, frames, (size_t)n * sizeof(*copy));
    size_t j = hash_key(module, addr) & (sym->memo_cap - 1);
    while (sym->memo[j].module >= 0)
        j = (j + 1) & (sym->memo_cap - 1);
    sym->memo[j] =
        (memo_entry_t){.addr = addr, .module = module, .nframes = (uint32_t)n, .frames = copy};
    sym->memo_count++;
    return &sym->memo[j];
}

// ---------------------------------------------------------------------------------------------
// Answers kept on disk (symcache.h): a module's file is read into the memo before its first
// lookup, and written anew at the end when lookups added to it.

// The module's file as it is opened: the sysroot before the trace's path. malloc'd.
static char* module_file(const symbolizer_t* sym, const module_t* m) {
    const char* root = sym->sysroot ? sym->sysroot : "";
    size_t len = strlen(root) + strlen(m->path) + 1;
    char* file = malloc(len);
    if (file)
        snprintf(file, len, "%s%s", root, m->path);
    return file;
}

#define CACHE_DEBUG_DIRS 32 // debug directories a module's cache name covers

static const char* cache_name_of(symbolizer_t* sym, int module) {
    module_cache_t* c = &sym->caches[module];
    const module_t* m = &sym->modules[module];
    if (c->is_named)
        return c->name;
    c->is_named = true;
    // The absolute entries of libdwfl's search path are where it looks for the build-id's
    // separate debug file; the relative ones are the binary's own directory (by debuglink).
    char* path = strdup(sym->debuginfo_path ? sym->debuginfo_path : ":.debug:/usr/lib/debug");
    char* file = module_file(sym, m);
    const char* dirs[CACHE_DEBUG_DIRS];
    int ndirs = 0;
    char* save = NULL;
    for (char* d = path ? strtok_r(path, ":", &save) : NULL; d && ndirs < CACHE_DEBUG_DIRS;
         d = strtok_r(NULL, ":", &save))
        if (d[0] == '/')
            dirs[ndirs++] = d;
    char name[256];
    if (path && file &&
        symcache_name(file, m->build_id, m->build_id_len, dirs, ndirs,
                      symbolizer_cache_producer(), name, sizeof name) == 0)
        c->name = strdup(name);
    free(path);
    free(file);
    return c->name;
}

typedef struct cache_walk_s {
    symbolizer_t* sym;
    int module;
    size_t at; // the next memo slot to look at (storing)
} cache_walk_t;

static int cache_take(void* arg, const symcache_entry_t* e) {
    cache_walk_t* w = arg;
    symbolizer_t* sym = w->sym;
    if (memo_find(sym, w->module, e->addr))
        return 0;
    sym_frame_t frames[SYMCACHE_FRAMES_MAX];
    for (int i = 0; i < e->nframes; i++) {
        frames[i] = e->frames[i];
        frames[i].function = intern(sym, e->frames[i].function);
        frames[i].file = intern(sym, e->frames[i].file);
    }
    if (sym->oom || !memo_insert(sym, w->module, e->addr, frames, e->nframes))
        return -1; // what is in stays: each answer is whole
    return 0;
}

// What demangles names here, as a cache file names it (never 0). The demangler is part of a
// file's contents, not of its name: a C program's report finds its answers without loading
// libstdc++ to name them (0.4 ms and 1.3 MiB, a fifth of the report of a short program), and a
// file with C++ names written by another libstdc++ is worked out again.
static uint64_t demangler_identity(void) {
    static uint64_t identity;
    if (!identity) {
        const void* code[] = {hl_demangler()};
        identity = symcache_producer(code, 1) | 1;
    }
    return identity;
}

static void cache_load(symbolizer_t* sym, int module) {
    sym->caches[module].is_loaded = true;
    const char* name = cache_name_of(sym, module);
    if (!name)
        return;
    cache_walk_t w = {sym, module, 0};
    sym->oom = false;
    if (symcache_load(sym->cache_fd, name, demangler_identity, cache_take, &w) == 1)
        sym->caches[module].has_mangled = true;
}

static int cache_give(void* arg, symcache_entry_t* e) {
    cache_walk_t* w = arg;
    const symbolizer_t* sym = w->sym;
    while (w->at < sym->memo_cap) {
        const memo_entry_t* me = &sym->memo[w->at++];
        if (me->module == w->module) {
            *e = (symcache_entry_t){me->addr, me->frames, (int)me->nframes};
            return 1;
        }
    }
    return 0;
}

// Only the answers of a module whose DWARF was read are kept: one that could not be opened
// (missing, another build, out of descriptors) or whose DWARF could not be read (none installed
// yet, out of memory) answered from less than it may have next time. Called once the prefetch
// thread has stopped.
static void cache_store_all(symbolizer_t* sym) {
    if (sym->cache_fd < 0)
        return;
    for (int k = 0; k < sym->nmodules; k++) {
        module_t* m = &sym->modules[k];
        Dwarf_Addr bias = 0;
        if (!sym->caches[k].has_new || m->state != MOD_OPEN || !m->mod ||
            !dwfl_module_getdwarf(m->mod, &bias) || !cache_name_of(sym, k))
            continue;
        cache_walk_t w = {sym, k, 0};
        symcache_store(sym->cache_fd, sym->caches[k].name,
                       sym->caches[k].has_mangled ? demangler_identity() : 0, cache_give, &w);
    }
}

uint64_t symbolizer_cache_producer(void) {
    static uint64_t producer;
    if (!producer) {
        const void* code[] = {(const void*)symbolizer_lookup, (const void*)dwfl_begin};
        producer = symcache_producer(code, 2) | 1;
    }
    return producer;
}

symbolizer_t* symbolizer_new_cached(const char* sysroot) {
    symbolizer_t* sym = symbolizer_new(sysroot);
    if (sym)
        sym->cache_fd = symcache_open_default(); // -1: no cache, the same answers
    return sym;
}

int symbolizer_use_cache(symbolizer_t* sym, const char* dir) {
    if (!sym || !dir || dir[0] != '/')
        return -EINVAL;
    int fd = symcache_open(dir);
    if (fd < 0)
        return -EPERM;
    if (sym->cache_fd >= 0)
        close(sym->cache_fd);
    sym->cache_fd = fd;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Public lifetime API.

symbolizer_t* symbolizer_new(const char* sysroot) {
    symbolizer_t* sym = calloc(1, sizeof(*sym));
    if (!sym)
        return NULL;
    sym->cache_fd = -1;
    pthread_mutex_init(&sym->lock, NULL);
    pthread_cond_init(&sym->changed, NULL);
    if (sysroot && sysroot[0]) {
        sym->sysroot = strdup(sysroot);
        // Same search as libdwfl's default (file's dir, its .debug/, /usr/lib/debug incl.
        // .build-id), but the global directory must come from the recording host's tree.
        size_t len = strlen(sysroot) + sizeof(":.debug:/usr/lib/debug");
        sym->debuginfo_path = malloc(len);
        if (!sym->sysroot || !sym->debuginfo_path) {
            symbolizer_free(sym);
            return NULL;
        }
        snprintf(sym->debuginfo_path, len, ":.debug:%s/usr/lib/debug", sysroot);
    }
    sym->callbacks.find_elf = dwfl_build_id_find_elf;
    sym->callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
    sym->callbacks.section_address = dwfl_offline_section_address;
    sym->callbacks.debuginfo_path = sym->debuginfo_path ? &sym->debuginfo_path : NULL;
    return sym;
}

int symbolizer_add_debug_dir(symbolizer_t* sym, const char* dir) {
    if (!dir || dir[0] != '/' || strchr(dir, ':'))
        return -EINVAL; // libdwfl's path is ':'-separated, and relative entries mean the binary's
    const char* rest = sym->debuginfo_path ? sym->debuginfo_path : ":.debug:/usr/lib/debug";
    // rest starts ":.debug:": the binary's own directory and its .debug first, then DIR, then
    // what came before (earlier directories, the system's).
    const char* tail = strncmp(rest, ":.debug:", 8) == 0 ? rest + 8 : rest;
    size_t len = strlen(":.debug:") + strlen(dir) + 1 + strlen(tail) + 1;
    char* path = malloc(len);
    if (!path)
        return -ENOMEM;
    snprintf(path, len, ":.debug:%s:%s", dir, tail);
    free(sym->debuginfo_path);
    sym->debuginfo_path = path;
    sym->callbacks.debuginfo_path = &sym->debuginfo_path;
    return 0;
}

void symbolizer_free(symbolizer_t* sym) {
    if (!sym)
        return;
    if (sym->has_worker) { // it stops after the module it is opening
        pthread_mutex_lock(&sym->lock);
        sym->is_closing = true;
        pthread_cond_broadcast(&sym->changed);
        pthread_mutex_unlock(&sym->lock);
        pthread_join(sym->worker, NULL);
    }
    cache_store_all(sym);
    pthread_cond_destroy(&sym->changed);
    pthread_mutex_destroy(&sym->lock);
    for (int i = 0; i < sym->nmodules; i++) {
        free(sym->caches[i].name);
        if (sym->modules[i].dwfl)
            dwfl_end(sym->modules[i].dwfl);
        free(sym->modules[i].path);
        free(sym->modules[i].build_id);
        free(sym->modules[i].bounds);
        free(sym->modules[i].answer);
        free(sym->modules[i].asked);
        free(sym->modules[i].fsyms);
    }
    free(sym->modules);
    free(sym->memo);
    free(sym->interned);
    for (arena_block_t* b = sym->arena; b;) {
        arena_block_t* next = b->next;
        free(b);
        b = next;
    }
    free(sym->caches);
    if (sym->cache_fd >= 0)
        close(sym->cache_fd);
    free(sym->debuginfo_path);
    free(sym->sysroot);
    free(sym);
}

int symbolizer_add_module(symbolizer_t* sym, const char* path, const uint8_t* build_id,
                          size_t build_id_len) {
    if (!sym || !path)
        return -EINVAL;
    module_t fresh;
    memset(&fresh, 0, sizeof fresh);
    fresh.state = MOD_UNOPENED;
    fresh.path = strdup(path);
    if (!fresh.path)
        return -ENOMEM;
    if (build_id && build_id_len) {
        fresh.build_id = malloc(build_id_len);
        if (!fresh.build_id) {
            free(fresh.path);
            return -ENOMEM;
        }
        memcpy(fresh.build_id, build_id, build_id_len);
        fresh.build_id_len = build_id_len;
    }
    int k = -ENOMEM;
    pthread_mutex_lock(&sym->lock);
    if (sym->nmodules == sym->cap_modules) {
        int cap = sym->cap_modules ? sym->cap_modules * 2 : 16;
        module_t* m = realloc(sym->modules, (size_t)cap * sizeof(*m));
        if (m)
            sym->modules = m;
        module_cache_t* c = m ? realloc(sym->caches, (size_t)cap * sizeof(*c)) : NULL;
        if (c) {
            memset(c + sym->cap_modules, 0, (size_t)(cap - sym->cap_modules) * sizeof(*c));
            sym->caches = c;
            sym->cap_modules = cap;
        }
    }
    if (sym->nmodules < sym->cap_modules) {
        k = sym->nmodules++;
        sym->modules[k] = fresh;
    }
    pthread_mutex_unlock(&sym->lock);
    if (k < 0) {
        free(fresh.path);
        free(fresh.build_id);
    }
    return k;
}

const char* symbolizer_module_path(const symbolizer_t* sym, int module) {
    if (!sym || module < 0 || module >= sym->nmodules)
        return NULL;
    return sym->modules[module].path;
}

// ---------------------------------------------------------------------------------------------
// Module opening.

// Opens the file behind m and reports it at bias 0. Returns 0 or -errno; any failure simply
// leaves the module unknown, since a trace routinely names files this host does not have.
static int module_open(symbolizer_t* sym, module_t* m) {
    char* full = module_file(sym, m);
    if (!full)
        return -ENOMEM;
    const char* file = full;
    int err = 0;
    // O_NONBLOCK + S_ISREG: a trace path such as a FIFO or device must not hang the report.
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        err = -errno;
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        err = -ENOEXEC;
        goto out;
    }
    m->dwfl = dwfl_begin(&sym->callbacks);
    if (!m->dwfl) {
        close(fd);
        err = -ENOMEM;
        goto out;
    }
    dwfl_report_begin(m->dwfl);
    // add_p_vaddr with base 0 puts an ET_DYN file at its link-time addresses (bias 0); ET_EXEC
    // is always there. Either way a module-relative address is a valid libdwfl address.
    m->mod = dwfl_report_elf(m->dwfl, m->path, file, fd, 0, true);
    if (!m->mod) {
        close(fd); // only consumed on success
        err = -ENOEXEC;
        goto out;
    }
    dwfl_report_end(m->dwfl, NULL, NULL);

    Dwarf_Addr bias = 0;
    Elf* elf = dwfl_module_getelf(m->mod, &bias);
    GElf_Ehdr ehdr;
    if (!elf || !gelf_getehdr(elf, &ehdr) || (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) ||
        bias != 0) {
        err = -ENOEXEC;
        goto out;
    }
    if (m->build_id_len) {
        const void* bits = NULL;
        ssize_t n = dwelf_elf_gnu_build_id(elf, &bits);
        // A rebuilt library at the same path would give confidently wrong names: refuse it.
        if (n <= 0 || (size_t)n != m->build_id_len || memcmp(bits, m->build_id, (size_t)n) != 0) {
            err = -ESTALE;
            goto out;
        }
    }
out:
    free(full);
    if (err < 0 && m->dwfl) {
        dwfl_end(m->dwfl);
        m->dwfl = NULL;
        m->mod = NULL;
    }
    return err;
}

// ---------------------------------------------------------------------------------------------
// Address resolution.

static const char* die_function_name(Dwarf_Die* die) {
    Dwarf_Attribute attr;
    // Only a mangled linkage name adds information (scope and parameters) over DW_AT_name; any
    // other linkage name is an asm label the user did not write in the source.
    const char* name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (name && name[0] == '_' && name[1] == 'Z')
        return name;
    return dwarf_diename(die);
}

// Fills out[] from DWARF scopes, innermost first. Returns the number of frames (0: no DWARF
// function covers addr).
static int dwarf_chain(symbolizer_t* sym, Dwfl_Module* mod, Dwarf_Addr addr, const char* file,
                       uint32_t line, sym_frame_t* out, int cap) {
    Dwarf_Addr bias = 0;
    Dwarf_Die* cudie = dwfl_module_addrdie(mod, addr, &bias);
    if (!cudie)
        return 0;
    Dwarf_Die* scopes = NULL;
    int nscopes = dwarf_getscopes(cudie, addr - bias, &scopes);
    if (nscopes <= 0) {
        free(scopes);
        return 0;
    }
    // Past the innermost inlined_subroutine dwarf_getscopes follows the abstract origin's
    // lexical parents, not the function the code was inlined into; the physical parents of the
    // innermost DIE are the real call chain.
    Dwarf_Die innermost = scopes[0];
    free(scopes);
    scopes = NULL;
    nscopes = dwarf_getscopes_die(&innermost, &scopes);
    if (nscopes <= 0) {
        free(scopes);
        return 0;
    }
    Dwarf_Files* files = NULL;
    Dwarf_Die cu;
    if (!dwarf_diecu(&innermost, &cu, NULL, NULL) || dwarf_getsrcfiles(&cu, &files, NULL) != 0)
        files = NULL;

    int n = 0;
    for (int i = 0; i < nscopes && n < cap; i++) {
        Dwarf_Die* die = &scopes[i];
        int tag = dwarf_tag(die);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
            tag != DW_TAG_entry_point)
            continue;
        out[n].function = intern_function(sym, die_function_name(die));
        out[n].file = file;
        out[n].line = line;
        out[n].is_inlined = tag == DW_TAG_inlined_subroutine;
        n++;
        if (tag != DW_TAG_inlined_subroutine)
            break;
        // The caller's frame is positioned at this inline's call site.
        Dwarf_Attribute attr;
        Dwarf_Word val;
        file = NULL;
        line = 0;
        if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) == 0)
            file = intern(sym, dwarf_filesrc(files, val, NULL, NULL));
        if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) == 0)
            line = (uint32_t)val;
    }
    free(scopes);
    return n;
}

typedef struct fsym_s {
    uint64_t addr, size;
    const char* name; // libelf's, lives as long as the module
    int rank;         // binding: 2 global, 1 weak, 0 local: the better name of aliases first
} fsym_t;

static int fsym_cmp(const void* pa, const void* pb) {
    const fsym_t *a = pa, *b = pb;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return b->rank - a->rank;
}

// The sized symbol that holds addr, the latest start first, or NULL (then libdwfl,
// which also weighs sizeless and other symbols, answers).
static const char* fsym_find(const module_t* m, uint64_t addr) {
    size_t lo = 0, hi = m->nfsyms; // first symbol starting past addr
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->fsyms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const fsym_t* f = &m->fsyms[lo - 1];
    while (f > m->fsyms && f[-1].addr == f->addr) // aliases: the best binding sorts first
        f--;
    return addr < f->addr + f->size ? f->name : NULL;
}

static int u64_cmp(const void* pa, const void* pb) {
    uint64_t a = *(const uint64_t*)pa, b = *(const uint64_t*)pb;
    return a < b ? -1 : a > b;
}

static void bounds_build(module_t* m) {
    m->has_bounds = true;
    m->first_sizeless = UINT64_MAX;
    int n = dwfl_module_getsymtab(m->mod);
    size_t nsec = 0;
    Dwarf_Addr ebias = 0;
    Elf* elf = dwfl_module_getelf(m->mod, &ebias);
    if (elf)
        elf_getshdrnum(elf, &nsec);
    size_t cap = 2 * (size_t)(n > 0 ? n : 0) + 2 * nsec + 1;
    uint64_t* v = malloc(cap * sizeof *v);
    if (!v)
        return; // every lookup asks libdwfl
    fsym_t* fs = malloc((size_t)(n > 0 ? n : 1) * sizeof *fs);
    size_t k = 0, nf = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym es;
        GElf_Addr addr = 0;
        GElf_Word shndx = 0;
        Elf* e = NULL;
        Dwarf_Addr bias = 0;
        const char* name = dwfl_module_getsym_info(m->mod, i, &es, &addr, &shndx, &e, &bias);
        if (!name)
            continue;
        v[k++] = addr;
        v[k++] = addr + es.st_size;
        int type = GELF_ST_TYPE(es.st_info), bind = GELF_ST_BIND(es.st_info);
        // the symbols libdwfl weighs for an address: named, defined, not sections, files, TLS
        if (!name[0] || es.st_shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE ||
            type == STT_TLS)
            continue;
        if (!es.st_size && addr < m->first_sizeless)
            m->first_sizeless = addr;
        if (fs && es.st_size)
            fs[nf++] = (fsym_t){.addr = addr, .size = es.st_size, .name = name,
                                .rank = bind == STB_GLOBAL ? 2 : bind == STB_WEAK ? 1 : 0};
    }
    if (fs) {
        qsort(fs, nf, sizeof *fs, fsym_cmp);
        // Only where sized functions do not overlap is the containing one surely libdwfl's
        // answer; a table with nested ones keeps asking libdwfl.
        for (size_t i = 1; i < nf && fs; i++)
            if (fs[i].addr != fs[i - 1].addr && fs[i].addr < fs[i - 1].addr + fs[i - 1].size) {
                free(fs);
                fs = NULL;
            }
        m->fsyms = fs;
        m->nfsyms = fs ? nf : 0;
    }
    for (Elf_Scn* scn = elf ? elf_nextscn(elf, NULL) : NULL; scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
            continue;
        v[k++] = sh.sh_addr + ebias;
        v[k++] = sh.sh_addr + ebias + sh.sh_size;
    }
    qsort(v, k, sizeof *v, u64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[i] != v[u - 1])
            v[u++] = v[i];
    m->answer = calloc(u + 1, sizeof *m->answer);
    m->asked = calloc(u + 1, sizeof *m->asked);
    if (!m->answer || !m->asked) {
        free(v);
        free(m->answer);
        free(m->asked);
        m->answer = NULL;
        m->asked = NULL;
        return;
    }
    m->bounds = v;
    m->nbounds = u;
}

// The symbol table's name for addr (libdwfl's answer, asked once per interval), or NULL.
static const char* symtab_name(module_t* m, uint64_t addr) {
    if (!m->has_bounds)
        bounds_build(m);
    size_t lo = 0, hi = m->nbounds; // the interval: boundaries at or below addr
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->bounds[mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (m->asked && m->asked[lo])
        return m->answer[lo];
    if (m->fsyms) {
        // Inside a sized symbol: that one. Outside every sized one and below every sizeless
        // one: nothing (libdwfl falls back to a sizeless symbol only).
        const char* named = fsym_find(m, addr);
        if (named || addr < m->first_sizeless)
            return named;
    }
    GElf_Off off = 0;
    GElf_Sym esym;
    GElf_Word shndx = 0;
    Elf* elf = NULL;
    Dwarf_Addr bias = 0;
    const char* name = dwfl_module_addrinfo(m->mod, addr, &off, &esym, &shndx, &elf, &bias);
    if (m->asked) {
        m->asked[lo] = true;
        m->answer[lo] = name;
    }
    return name;
}

// ---------------------------------------------------------------------------------------------
// Prefetch: what the first lookup in a module costs is mostly opening it, and inflating a
// distribution's compressed debug sections (libc's: 35% of a small trace's JSON report) is the
// bulk of that. The thread does it while the caller is still reading the trace.

static void* prefetch_main(void* arg) {
    symbolizer_t* sym = arg;
    pthread_mutex_lock(&sym->lock);
    while (!sym->is_closing) {
        int k = sym->next_queued;
        while (k < sym->nmodules &&
               !(sym->modules[k].is_queued && sym->modules[k].state == MOD_UNOPENED))
            k++;
        sym->next_queued = k;
        if (k == sym->nmodules) {
            pthread_cond_wait(&sym->changed, &sym->lock);
            continue;
        }
        module_t t = sym->modules[k]; // its path and build-id stay put; the rest is ours
        sym->modules[k].state = MOD_OPENING;
        pthread_mutex_unlock(&sym->lock);
        bool ok = module_open(sym, &t) == 0;
        Dwarf_Addr bias = 0;
        if (ok && !dwfl_module_getdwarf(t.mod, &bias))
            bounds_build(&t); // without DWARF the symbol table names every frame
        pthread_mutex_lock(&sym->lock);
        module_t* m = &sym->modules[k];
        m->dwfl = t.dwfl;
        m->mod = t.mod;
        m->bounds = t.bounds;
        m->nbounds = t.nbounds;
        m->answer = t.answer;
        m->asked = t.asked;
        m->has_bounds = t.has_bounds;
        m->fsyms = t.fsyms;
        m->nfsyms = t.nfsyms;
        m->first_sizeless = t.first_sizeless;
        m->state = ok ? MOD_OPEN : MOD_UNKNOWN;
        pthread_cond_broadcast(&sym->changed);
    }
    pthread_mutex_unlock(&sym->lock);
    return NULL;
}

static int start_worker_locked(symbolizer_t* sym) {
    if (sym->has_worker)
        return 0;
    int rc = -pthread_create(&sym->worker, NULL, prefetch_main, sym);
    sym->has_worker = rc == 0;
    return rc;
}

int symbolizer_start(symbolizer_t* sym) {
    pthread_mutex_lock(&sym->lock);
    int rc = start_worker_locked(sym);
    pthread_mutex_unlock(&sym->lock);
    return rc;
}

int symbolizer_prefetch(symbolizer_t* sym, int module) {
    if (!sym || module < 0 || module >= sym->nmodules)
        return -EINVAL;
    // A module whose answers are on disk is opened only if a lookup misses them.
    if (sym->cache_fd >= 0 && cache_name_of(sym, module) &&
        symcache_exists(sym->cache_fd, sym->caches[module].name))
        return 0;
    int rc = 0;
    pthread_mutex_lock(&sym->lock);
    sym->modules[module].is_queued = true;
    if (module < sym->next_queued)
        sym->next_queued = module;
    rc = start_worker_locked(sym);
    pthread_cond_broadcast(&sym->changed);
    pthread_mutex_unlock(&sym->lock);
    return rc;
}

// Before the caller's first lookup in m: the prefetch thread's result (waiting for it while it
// opens m), or m opened here when the thread has not come to it.
static void module_settle(symbolizer_t* sym, module_t* m) {
    pthread_mutex_lock(&sym->lock);
    while (m->state == MOD_OPENING)
        pthread_cond_wait(&sym->changed, &sym->lock);
    bool mine = m->state == MOD_UNOPENED;
    if (mine)
        m->state = MOD_OPENING; // the thread leaves it alone now
    pthread_mutex_unlock(&sym->lock);
    if (mine) {
        int st = module_open(sym, m) == 0 ? MOD_OPEN : MOD_UNKNOWN;
        pthread_mutex_lock(&sym->lock);
        m->state = st;
        pthread_mutex_unlock(&sym->lock);
    }
    m->is_settled = true;
}

static int resolve(symbolizer_t* sym, module_t* m, uint64_t addr, sym_frame_t* out, int cap) {
    memset(&out[0], 0, sizeof(out[0]));
    if (!m->is_settled)
        module_settle(sym, m);
    if (m->state != MOD_OPEN)
        return 1;

    Dwfl_Module* mod = m->mod;
    const char* file = NULL;
    int lineno = 0;
    Dwfl_Line* dl = dwfl_module_getsrc(mod, addr);
    if (dl) {
        Dwarf_Addr la;
        int col;
        file = intern(sym, dwfl_lineinfo(dl, &la, &lineno, &col, NULL, NULL));
        if (lineno < 0)
            lineno = 0;
    }
    int n = dwarf_chain(sym, mod, addr, file, (uint32_t)lineno, out, cap);
    if (n == 0) {
        out[0].file = file;
        out[0].line = (uint32_t)lineno;
        n = 1;
    }
    // Symbol table for what DWARF could not name (stripped file without debuginfo, asm, or a
    // DIE without a name); only meaningful for the outermost, non-inlined frame.
    if (!out[n - 1].function && !out[n - 1].is_inlined) {
        out[n - 1].function = intern_function(sym, symtab_name(m, addr));
    }
    return n;
}

int symbolizer_lookup(symbolizer_t* sym, int module, uint64_t rel_addr, sym_frame_t* frames,
                      int max) {
    if (!sym || module < 0 || module >= sym->nmodules || (max > 0 && !frames))
        return -EINVAL;
    if (max <= 0)
        return 0;
    memo_entry_t* e = memo_find(sym, module, rel_addr);
    if (!e && sym->cache_fd >= 0 && !sym->caches[module].is_loaded) {
        cache_load(sym, module);
        e = memo_find(sym, module, rel_addr);
    }
    if (!e) {
        sym_frame_t tmp[MAX_CHAIN];
        sym->oom = false;
        sym->saw_mangled = false;
        int n = resolve(sym, &sym->modules[module], rel_addr, tmp, MAX_CHAIN);
        if (sym->saw_mangled)
            sym->caches[module].has_mangled = true;
        // A partial answer built while out of memory must not be remembered as the truth.
        if (sym->oom)
            return -ENOMEM;
        e = memo_insert(sym, module, rel_addr, tmp, n);
        if (!e)
            return -ENOMEM;
        sym->caches[module].has_new = true;
    }
    int n = (int)e->nframes < max ? (int)e->nframes : max;
    memcpy(frames, e->frames, (size_t)n * sizeof(*frames));
    return n;
}
