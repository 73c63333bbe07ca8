// SPDX-License-Identifier: MIT
// modules.c - the loaded objects (path, build-id, load bias, segments), so the analyzer can
// symbolize after the process is gone. Refreshed at start and whenever dlopen/dlclose ran;
// each change becomes MODULE / MODULE_GONE records.
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/format.h"
#include "encode.h"
#include "gsites.h"
#include "modules.h"
#include "os.h"

#define HL_MAX_MODULES 4096

typedef struct module_s {
    size_t record_at, record_len; // its MODULE record's bytes in `records`
    uintptr_t bias;
    uintptr_t first_vaddr; // tells apart two objects loaded at one bias (rare, but vdso)
    uint32_t id;
    int seen; // in the latest dl_iterate_phdr pass
    int alive;
} module_t;

static module_t mods[HL_MAX_MODULES];
static uint32_t nmods;
// Every MODULE record written, kept so that a trace begun again elsewhere (sink.c's fall back to
// a file, on the writer thread) can describe the modules without reading the loader's list,
// which only a program thread may do (writer.c: writer_modules_changed).
static uint8_t* records;
static size_t records_len, records_cap;

static void keep_record(module_t* m, const uint8_t* rec, size_t len) {
    if (records_len + len > records_cap) {
        size_t cap = records_cap ? records_cap : 64u << 10;
        while (cap < records_len + len)
            cap *= 2;
        uint8_t* fresh = os_map(cap);
        if (!fresh)
            return;
        if (records) {
            memcpy(fresh, records, records_len);
            os_unmap(records, records_cap);
        }
        records = fresh;
        records_cap = cap;
    }
    memcpy(records + records_len, rec, len);
    m->record_at = records_len;
    m->record_len = len;
    records_len += len;
}
uintptr_t hl_self_lo, hl_self_hi; // libheaplens.so's extent, for modules_own_text

static int self_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    (void)size;
    uintptr_t probe = (uintptr_t)arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            // Take the whole object's extent: every frame inside the agent is dropped.
            uintptr_t olo = UINTPTR_MAX, ohi = 0;
            for (int j = 0; j < info->dlpi_phnum; j++) {
                const ElfW(Phdr)* q = &info->dlpi_phdr[j];
                if (q->p_type != PT_LOAD)
                    continue;
                uintptr_t a = info->dlpi_addr + q->p_vaddr;
                if (a < olo)
                    olo = a;
                if (a + q->p_memsz > ohi)
                    ohi = a + q->p_memsz;
            }
            hl_self_lo = olo;
            hl_self_hi = ohi;
            return 1;
        }
    }
    return 0;
}

void modules_self_range(void) { dl_iterate_phdr(self_cb, (void*)(uintptr_t)&modules_self_range); }

void modules_own_range(uintptr_t* lo, uintptr_t* hi) {
    *lo = hl_self_lo;
    *hi = hl_self_hi;
}

static size_t build_id_of(const struct dl_phdr_info* info, const uint8_t** out) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const uint8_t* p = (const uint8_t*)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t* end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr)* nh = (const ElfW(Nhdr)*)p;
            const uint8_t* name = p + sizeof *nh;
            const uint8_t* desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                *out = desc;
                return nh->n_descsz;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

static uintptr_t first_vaddr(const struct dl_phdr_info* info) {
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD)
            return info->dlpi_phdr[i].p_vaddr;
    return 0;
}

static void emit_module(hl_enc_t* enc, const struct dl_phdr_info* info, uint32_t id) {
    char exe[1024];
    const char* name = info->dlpi_name;
    if (!name || !name[0]) {
        long n = syscall(SYS_readlink, "/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        name = exe;
    }
    const uint8_t* bid = NULL;
    size_t bid_len = build_id_of(info, &bid);
    size_t name_len = strlen(name);
    if (enc_reserve(enc, 64 + name_len + bid_len + (size_t)info->dlpi_phnum * 32) != 0)
        return;
    enc_tag(enc, REC_MODULE);
    enc_u(enc, id);
    enc_u(enc, info->dlpi_addr);
    enc_bytes(enc, name, name_len);
    enc_bytes(enc, bid, bid_len);
    int nload = 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        nload += info->dlpi_phdr[i].p_type == PT_LOAD;
    enc_u(enc, (uint64_t)nload);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        enc_u(enc, ph->p_vaddr);
        enc_u(enc, ph->p_memsz);
        enc_u(enc, ph->p_flags);
    }
}

static uint32_t next_module_id;

static int refresh_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    (void)size;
    hl_enc_t* enc = arg;
    uintptr_t fv = first_vaddr(info);
    for (uint32_t i = 0; i < nmods; i++) {
        if (mods[i].alive && mods[i].bias == info->dlpi_addr && mods[i].first_vaddr == fv) {
            mods[i].seen = 1;
            return 0;
        }
    }
    if (nmods >= HL_MAX_MODULES)
        return 0;
    module_t* m = &mods[nmods++];
    *m = (module_t){.bias = info->dlpi_addr, .first_vaddr = fv, .id = ++next_module_id,
                    .seen = 1, .alive = 1};
    if (hl_gsites_on) {
        const uint8_t* bid = NULL;
        size_t bid_len = build_id_of(info, &bid);
        gsites_module_loaded(m->bias, fv, bid, bid_len, info->dlpi_name);
    }
    size_t at = enc->len;
    emit_module(enc, info, m->id);
    keep_record(m, enc->buf + at, enc->len - at);
    return 0;
}

void modules_refresh(hl_enc_t* enc) {
    for (uint32_t i = 0; i < nmods; i++)
        mods[i].seen = 0;
    dl_iterate_phdr(refresh_cb, enc);
    for (uint32_t i = 0; i < nmods; i++) {
        if (mods[i].alive && !mods[i].seen) {
            mods[i].alive = 0;
            gsites_module_gone(mods[i].bias, mods[i].first_vaddr);
            if (enc_reserve(enc, 16) == 0) {
                enc_tag(enc, REC_MODULE_GONE);
                enc_u(enc, mods[i].id);
            }
        }
    }
}

// A new trace (fork child) describes every module again.
void modules_reset(void) {
    nmods = 0;
    records_len = 0;
}

void modules_rewrite(hl_enc_t* enc) {
    for (uint32_t i = 0; i < nmods; i++) {
        if (!mods[i].alive || !mods[i].record_len || enc_reserve(enc, mods[i].record_len) != 0)
            continue;
        memcpy(enc->buf + enc->len, records + mods[i].record_at, mods[i].record_len);
        enc->len += mods[i].record_len;
    }
}
