// SPDX-License-Identifier: MIT
// got.c - rerouting calls through relocation slots (the contract is in got.h). Each walk goes
// through every module dl_iterate_phdr lists, reads its dynamic section, and looks at the
// relocations that bind a symbol by name: jump slots (DT_JMPREL), GOT entries and data pointers
// (DT_RELA / DT_REL). A slot is written only when it holds what the loader bound it to, so a
// module bound to another definition of the name (a versioned or a deep-bound one) keeps it.
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "got.h"
#include "os.h"

// The relocation types that bind a slot to a symbol's address with nothing added: the PLT's
// jump slot, the GOT entry, and a pointer in data (an addend other than 0 is never routed).
#if defined(__x86_64__)
#define GOT_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define GOT_R_GLOB_DAT R_X86_64_GLOB_DAT
#define GOT_R_ABS R_X86_64_64
#elif defined(__aarch64__)
#define GOT_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GOT_R_GLOB_DAT R_AARCH64_GLOB_DAT
#define GOT_R_ABS R_AARCH64_ABS64
#else // types no relocation has: nothing is routed, and every install reports 0 slots
#define GOT_R_JUMP_SLOT 0xffffffffu
#define GOT_R_GLOB_DAT 0xffffffffu
#define GOT_R_ABS 0xffffffffu
#endif

#if __ELF_NATIVE_CLASS == 64
#define GOT_R_SYM(info) ELF64_R_SYM(info)
#define GOT_R_TYPE(info) ELF64_R_TYPE(info)
#else
#define GOT_R_SYM(info) ELF32_R_SYM(info)
#define GOT_R_TYPE(info) ELF32_R_TYPE(info)
#endif

static got_route_t* routes;
static size_t nroutes;
static uintptr_t own_address; // inside the installer's module, which is never changed
static _Atomic int is_installed;
static unsigned long long seen_adds; // dlpi_adds at the last walk: modules loaded so far

// ---------------------------------------------------------------------------------------------
// Page protections, from /proc/self/maps: a page is given back exactly the protection it had
// (the loader may still be relocating a module another thread is loading: its pages are still
// writable and must stay so). Without /proc, the module's program headers tell (see elf_prot).
// ---------------------------------------------------------------------------------------------
typedef struct prot_range_s {
    uintptr_t lo, hi;
    int prot;
} prot_range_t;

typedef struct prot_map_s {
    int is_read; // tried already (once per walk)
    prot_range_t* ranges;
    size_t n, bytes;
} prot_map_t;

#define GOT_MAPS_FIRST_READ (64u << 10) // enough for ~1000 mappings; doubled while it is not
#define GOT_MAPS_MIN_LINE 16            // "0-0 ---p 0 0:0 0": no line of maps is shorter

static void* raw_map(size_t size) {
    void* p = (void*)syscall(HL_SYS_MMAP, NULL, size, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void raw_unmap(void* p, size_t size) {
    if (p)
        syscall(SYS_munmap, p, size);
}

// The whole of /proc/self/maps in *buf (mapped, *cap bytes); its length, or -1.
static long read_maps(char** buf, size_t* cap) {
    for (size_t size = GOT_MAPS_FIRST_READ;; size *= 2) {
        char* b = raw_map(size);
        if (!b)
            return -1;
        int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            raw_unmap(b, size);
            return -1;
        }
        size_t len = 0;
        long n;
        while (len < size && (n = syscall(SYS_read, fd, b + len, size - len)) > 0)
            len += (size_t)n;
        syscall(SYS_close, fd);
        if (len < size) {
            *buf = b;
            *cap = size;
            return (long)len;
        }
        raw_unmap(b, size); // did not fit: read it again, whole, into twice the room
    }
}

static uintptr_t parse_hex(const char** s, const char* end) {
    uintptr_t v = 0;
    for (; *s < end; (*s)++) {
        char c = **s;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            break;
        v = v << 4 | (uintptr_t)d;
    }
    return v;
}

static void prot_map_read(prot_map_t* pm) {
    pm->is_read = 1;
    char* text;
    size_t cap;
    long len = read_maps(&text, &cap);
    if (len < 0)
        return;
    pm->bytes = ((size_t)len / GOT_MAPS_MIN_LINE + 1) * sizeof(prot_range_t);
    pm->ranges = raw_map(pm->bytes);
    for (const char *s = text, *end = text + len; pm->ranges && s < end;) {
        const char* eol = memchr(s, '\n', (size_t)(end - s));
        if (!eol)
            eol = end;
        prot_range_t r = {.lo = parse_hex(&s, eol)};
        if (s < eol && *s == '-') {
            s++;
            r.hi = parse_hex(&s, eol);
            if (eol - s >= 4 && *s == ' ') {
                r.prot = (s[1] == 'r' ? PROT_READ : 0) | (s[2] == 'w' ? PROT_WRITE : 0) |
                         (s[3] == 'x' ? PROT_EXEC : 0);
                pm->ranges[pm->n++] = r;
            }
        }
        s = eol + 1;
    }
    raw_unmap(text, cap);
}

// The protection of the page at addr, or -1 when /proc/self/maps could not be read or does
// not list it. The list is in address order.
static int prot_map_find(prot_map_t* pm, uintptr_t addr) {
    if (!pm->is_read)
        prot_map_read(pm);
    size_t lo = 0, hi = pm->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (addr < pm->ranges[mid].lo)
            hi = mid;
        else if (addr >= pm->ranges[mid].hi)
            lo = mid + 1;
        else
            return pm->ranges[mid].prot;
    }
    return -1;
}

static void prot_map_free(prot_map_t* pm) {
    raw_unmap(pm->ranges, pm->bytes);
    *pm = (prot_map_t){0};
}

// ---------------------------------------------------------------------------------------------
// A module, as its program headers and dynamic section describe it.
// ---------------------------------------------------------------------------------------------
typedef struct module_s {
    uintptr_t base;
    const ElfW(Phdr) * phdr;
    int phnum;
    const ElfW(Sym) * symtab;
    const char* strtab;
    size_t strsz;
    uintptr_t relro_lo, relro_hi; // the pages the loader made read-only after relocating
} module_t;

static size_t page_size(void) {
    static size_t size;
    if (!size) {
        unsigned long s = getauxval(AT_PAGESZ);
        size = s ? s : 4096;
    }
    return size;
}

// Does [addr, addr + len) lie inside one of the module's loaded segments (with these flags)?
static int module_holds(const module_t* m, uintptr_t addr, size_t len, unsigned flags) {
    for (int i = 0; i < m->phnum; i++) {
        const ElfW(Phdr)* ph = &m->phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & flags) != flags)
            continue;
        uintptr_t lo = m->base + ph->p_vaddr;
        if (addr >= lo && addr - lo <= ph->p_memsz && len <= ph->p_memsz - (addr - lo))
            return 1;
    }
    return 0;
}

// What the loader left a page of the module as: its segment's protection, read-only inside
// RELRO. Used only when /proc/self/maps cannot tell.
static int elf_prot(const module_t* m, uintptr_t page) {
    if (page >= m->relro_lo && page < m->relro_hi)
        return PROT_READ;
    for (int i = 0; i < m->phnum; i++) {
        const ElfW(Phdr)* ph = &m->phdr[i];
        uintptr_t lo = m->base + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && page + page_size() > lo && page < lo + ph->p_memsz)
            return (ph->p_flags & PF_R ? PROT_READ : 0) | (ph->p_flags & PF_W ? PROT_WRITE : 0) |
                   (ph->p_flags & PF_X ? PROT_EXEC : 0);
    }
    return -1;
}

// glibc stores the dynamic section's addresses relocated, other loaders (and the vDSO) as
// offsets from the base: an address below the base is an offset.
static uintptr_t dyn_addr(const module_t* m, uintptr_t v) {
    return v < m->base ? m->base + v : v;
}

// ---------------------------------------------------------------------------------------------
// The walk
// ---------------------------------------------------------------------------------------------
enum walk_mode { WALK_APPLY, WALK_REFRESH, WALK_REMOVE };

typedef struct walk_s {
    int mode;
    int is_started; // the first module has been seen
    prot_map_t prot;
} walk_t;

static got_route_t* route_named(const char* name) {
    for (size_t i = 0; i < nroutes; i++)
        if (name[0] == routes[i].name[0] && strcmp(name, routes[i].name) == 0)
            return &routes[i];
    return NULL;
}

static int write_slot(walk_t* w, const module_t* m, uintptr_t* slot, uintptr_t value) {
    uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(page_size() - 1);
    int prot = prot_map_find(&w->prot, page);
    if (prot < 0)
        prot = elf_prot(m, page);
    if (prot < 0)
        return -1;
    if (prot & PROT_WRITE) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return 0;
    }
    if (syscall(SYS_mprotect, page, page_size(), prot | PROT_WRITE) != 0)
        return -1;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    syscall(SYS_mprotect, page, page_size(), prot);
    return 0;
}

// One relocation: route its slot, or point it back.
static void route_slot(walk_t* w, const module_t* m, uintptr_t offset, uintptr_t info,
                       intptr_t addend) {
    unsigned type = (unsigned)GOT_R_TYPE(info);
    size_t sym = GOT_R_SYM(info);
    if (sym == 0 || (type != GOT_R_JUMP_SLOT && type != GOT_R_GLOB_DAT && type != GOT_R_ABS) ||
        addend != 0)
        return;
    const ElfW(Sym)* s = m->symtab + sym;
    if (!module_holds(m, (uintptr_t)s, sizeof *s, PF_R) || s->st_name >= m->strsz)
        return;
    got_route_t* r = route_named(m->strtab + s->st_name);
    uintptr_t* slot = (uintptr_t*)(m->base + offset);
    if (!r || ((uintptr_t)slot & (sizeof *slot - 1)) ||
        !module_holds(m, (uintptr_t)slot, sizeof *slot, PF_R))
        return;
    uintptr_t now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    uintptr_t from = (uintptr_t)r->from, to = (uintptr_t)r->to;
    if (w->mode == WALK_REMOVE) {
        if (now == to)
            write_slot(w, m, slot, from);
        return;
    }
    // A jump slot not bound yet points into its own module's PLT. A slot the loader has not
    // relocated yet (a module being loaded by another thread) holds neither: left alone.
    int is_unbound = type == GOT_R_JUMP_SLOT && now != from && module_holds(m, now, 1, PF_X);
    if (now == to) {
        r->slots++;
    } else if (now == from || is_unbound) {
        if (write_slot(w, m, slot, to) == 0)
            r->slots++;
        else
            r->failed++;
    }
}

// Every relocation of a table (RELA entries carry their addend; REL ones hold it in the slot,
// where a routed slot's value is compared whole).
static void route_table(walk_t* w, const module_t* m, uintptr_t table, size_t bytes, size_t ent,
                        int has_addend) {
    if (!table || !bytes)
        return;
    table = dyn_addr(m, table);
    if (!module_holds(m, table, bytes, PF_R))
        return;
    if (has_addend) {
        if (ent != sizeof(ElfW(Rela)))
            return;
        const ElfW(Rela)* r = (const ElfW(Rela)*)table;
        for (size_t i = 0; i < bytes / sizeof *r; i++)
            if (GOT_R_SYM(r[i].r_info) != 0) // most are relative: no symbol, skipped at once
                route_slot(w, m, r[i].r_offset, r[i].r_info, (intptr_t)r[i].r_addend);
    } else {
        if (ent != sizeof(ElfW(Rel)))
            return;
        const ElfW(Rel)* r = (const ElfW(Rel)*)table;
        for (size_t i = 0; i < bytes / sizeof *r; i++)
            if (GOT_R_SYM(r[i].r_info) != 0)
                route_slot(w, m, r[i].r_offset, r[i].r_info, 0);
    }
}

static void route_module(walk_t* w, const struct dl_phdr_info* info) {
    module_t m = {.base = info->dlpi_addr, .phdr = info->dlpi_phdr, .phnum = info->dlpi_phnum};
    const ElfW(Dyn)* dyn = NULL;
    for (int i = 0; i < m.phnum; i++) {
        const ElfW(Phdr)* ph = &m.phdr[i];
        if (ph->p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn)*)(m.base + ph->p_vaddr);
        } else if (ph->p_type == PT_GNU_RELRO) {
            // As the loader protects it: whole pages, the last partial one left writable.
            m.relro_lo = (m.base + ph->p_vaddr) & ~(uintptr_t)(page_size() - 1);
            m.relro_hi = (m.base + ph->p_vaddr + ph->p_memsz) & ~(uintptr_t)(page_size() - 1);
        }
    }
    if (!dyn || module_holds(&m, own_address, 1, 0))
        return;
    uintptr_t rela = 0, rel = 0, jmprel = 0;
    size_t relasz = 0, relaent = sizeof(ElfW(Rela)), relsz = 0, relent = sizeof(ElfW(Rel));
    size_t pltrelsz = 0;
    long pltrel = DT_RELA;
    for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:
            m.symtab = (const ElfW(Sym)*)dyn_addr(&m, d->d_un.d_ptr);
            break;
        case DT_STRTAB:
            m.strtab = (const char*)dyn_addr(&m, d->d_un.d_ptr);
            break;
        case DT_STRSZ:
            m.strsz = d->d_un.d_val;
            break;
        case DT_RELA:
            rela = d->d_un.d_ptr;
            break;
        case DT_RELASZ:
            relasz = d->d_un.d_val;
            break;
        case DT_RELAENT:
            relaent = d->d_un.d_val;
            break;
        case DT_REL:
            rel = d->d_un.d_ptr;
            break;
        case DT_RELSZ:
            relsz = d->d_un.d_val;
            break;
        case DT_RELENT:
            relent = d->d_un.d_val;
            break;
        case DT_JMPREL:
            jmprel = d->d_un.d_ptr;
            break;
        case DT_PLTRELSZ:
            pltrelsz = d->d_un.d_val;
            break;
        case DT_PLTREL:
            pltrel = (long)d->d_un.d_val;
            break;
        default:
            break;
        }
    }
    if (!m.symtab || !m.strtab || !module_holds(&m, (uintptr_t)m.strtab, m.strsz, PF_R))
        return;
    route_table(w, &m, rela, relasz, relaent, 1);
    route_table(w, &m, rel, relsz, relent, 0);
    route_table(w, &m, jmprel, pltrelsz, pltrel == DT_RELA ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel)),
                pltrel == DT_RELA);
}

// The first module decides: a refresh that finds no module loaded since ends at once; any other
// walk starts its counts afresh (routing a slot twice leaves it as it was).
static int walk_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    walk_t* w = arg;
    if (!w->is_started) {
        w->is_started = 1;
        int knows_adds = size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds;
        if (knows_adds) {
            if (w->mode == WALK_REFRESH && info->dlpi_adds == seen_adds)
                return 1;
            seen_adds = info->dlpi_adds;
        }
        if (w->mode == WALK_REFRESH)
            w->mode = WALK_APPLY;
        for (size_t i = 0; i < nroutes; i++)
            routes[i].slots = routes[i].failed = 0;
    }
    route_module(w, info);
    return 0;
}

static void walk(int mode) {
    walk_t w = {.mode = mode};
    dl_iterate_phdr(walk_cb, &w);
    prot_map_free(&w.prot);
}

// ---------------------------------------------------------------------------------------------
// A module's own symbols: its GNU hash table (or the SysV one, which counts the symbols).
// ---------------------------------------------------------------------------------------------
typedef struct lookup_s {
    uintptr_t in_module;
    const char* name;
    void* found;
} lookup_t;

static uint32_t gnu_hash(const char* s) {
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static int is_definition(const module_t* m, const ElfW(Sym) * s, const char* name) {
    return s->st_shndx != SHN_UNDEF && s->st_name < m->strsz &&
           strcmp(m->strtab + s->st_name, name) == 0;
}

static void* lookup_gnu(const module_t* m, const uint32_t* table, const char* name) {
    uint32_t nbuckets = table[0], symoffset = table[1], bloom_words = table[2];
    if (!nbuckets)
        return NULL;
    const uint32_t* buckets = (const uint32_t*)((const ElfW(Addr)*)(table + 4) + bloom_words);
    const uint32_t* chain = buckets + nbuckets;
    uint32_t h = gnu_hash(name);
    for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; i++) {
        uint32_t h2 = chain[i - symoffset];
        if ((h | 1) == (h2 | 1) && is_definition(m, &m->symtab[i], name))
            return (void*)(m->base + m->symtab[i].st_value);
        if (h2 & 1)
            break; // the bucket's chain ends here
    }
    return NULL;
}

static void* lookup_sysv(const module_t* m, const uint32_t* table, const char* name) {
    uint32_t nsyms = table[1];
    for (uint32_t i = 1; i < nsyms; i++)
        if (is_definition(m, &m->symtab[i], name))
            return (void*)(m->base + m->symtab[i].st_value);
    return NULL;
}

static int lookup_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    (void)size;
    lookup_t* l = arg;
    module_t m = {.base = info->dlpi_addr, .phdr = info->dlpi_phdr, .phnum = info->dlpi_phnum};
    if (!module_holds(&m, l->in_module, 1, 0))
        return 0;
    const ElfW(Dyn)* dyn = NULL;
    for (int i = 0; i < m.phnum; i++)
        if (m.phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn)*)(m.base + m.phdr[i].p_vaddr);
    const uint32_t *gnu = NULL, *sysv = NULL;
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            m.symtab = (const ElfW(Sym)*)dyn_addr(&m, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            m.strtab = (const char*)dyn_addr(&m, dyn->d_un.d_ptr);
            break;
        case DT_STRSZ:
            m.strsz = dyn->d_un.d_val;
            break;
        case DT_GNU_HASH:
            gnu = (const uint32_t*)dyn_addr(&m, dyn->d_un.d_ptr);
            break;
        case DT_HASH:
            sysv = (const uint32_t*)dyn_addr(&m, dyn->d_un.d_ptr);
            break;
        default:
            break;
        }
    }
    if (m.symtab && m.strtab)
        l->found = gnu    ? lookup_gnu(&m, gnu, l->name)
                   : sysv ? lookup_sysv(&m, sysv, l->name)
                          : NULL;
    return 1;
}

void* got_own_symbol(const void* in_module, const char* name) {
    lookup_t l = {.in_module = (uintptr_t)in_module, .name = name};
    dl_iterate_phdr(lookup_cb, &l);
    return l.found;
}

// ---------------------------------------------------------------------------------------------
// The contract
// ---------------------------------------------------------------------------------------------
long got_routes_install(got_route_t* list, size_t n, const void* self) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&is_installed, &expected, 1))
        return -1;
    routes = list;
    nroutes = n;
    own_address = (uintptr_t)self;
    walk(WALK_APPLY);
    long total = 0;
    for (size_t i = 0; i < n; i++)
        total += (long)routes[i].slots;
    return total;
}

void got_routes_refresh(void) {
    if (atomic_load_explicit(&is_installed, memory_order_acquire))
        walk(WALK_REFRESH);
}

void got_routes_remove(void) {
    if (!atomic_load(&is_installed))
        return;
    walk(WALK_REMOVE);
    nroutes = 0;
    routes = NULL;
    seen_adds = 0;
    atomic_store(&is_installed, 0);
}
