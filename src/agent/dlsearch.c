// SPDX-License-Identifier: MIT
// dlsearch.c - dlopen("libx.so") from a program whose DT_RUNPATH names where libx.so is
// ("$ORIGIN/plugins") works because the loader takes the caller's return address to find the
// calling object and searches its run path. With the agent's dlopen hook in between, the caller
// the loader sees is the agent, which has no run path: the program's call would fail under
// heaplens only. When the real call has failed, the hook asks here for the file in the calling
// object's own directories and opens that path instead. Nothing allocates: the object's dynamic
// section and string table are read where the loader mapped them.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dlsearch.h"

// The directory of the object's file ($ORIGIN); the executable's l_name is "".
static size_t origin_of(const struct link_map* lm, char* out, size_t cap) {
    size_t n;
    if (lm->l_name && lm->l_name[0]) {
        n = strlen(lm->l_name);
        if (n >= cap)
            return 0;
        memcpy(out, lm->l_name, n);
    } else {
        long r = syscall(SYS_readlink, "/proc/self/exe", out, cap - 1);
        if (r <= 0)
            return 0;
        n = (size_t)r;
    }
    while (n > 0 && out[n - 1] != '/')
        n--;
    if (n > 1)
        n--; // without the trailing '/', except for "/"
    out[n] = 0;
    return n;
}

// dir/file into out, with $ORIGIN and ${ORIGIN} in dir (len bytes) replaced by origin.
static int join(const char* dir, size_t len, const char* origin, const char* file, char* out,
                size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t tok = !strncmp(dir + i, "${ORIGIN}", 9) ? 9 : !strncmp(dir + i, "$ORIGIN", 7) ? 7 : 0;
        const char* piece = tok ? origin : dir + i;
        size_t plen = tok ? strlen(origin) : 1;
        if (tok && i + tok > len)
            return -1;
        if (n + plen >= cap)
            return -1;
        memcpy(out + n, piece, plen);
        n += plen;
        i += tok ? tok : 1;
    }
    size_t flen = strlen(file);
    if (n + 1 + flen >= cap)
        return -1;
    out[n++] = '/';
    memcpy(out + n, file, flen + 1);
    return 0;
}

int dlsearch_caller_path(const void* caller, const char* file, char* out, size_t cap) {
    Dl_info info;
    struct link_map* lm = NULL;
    if (!file || strchr(file, '/') || !dladdr1(caller, &info, (void**)&lm, RTLD_DL_LINKMAP) ||
        !lm || !lm->l_ld)
        return -1;
    const char* strtab = NULL;
    ElfW(Xword) runpath = 0, rpath = 0;
    int has_runpath = 0, has_rpath = 0;
    for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_STRTAB)
            strtab = (const char*)d->d_un.d_ptr; // relocated by the loader to where it lies
        else if (d->d_tag == DT_RUNPATH)
            runpath = d->d_un.d_val, has_runpath = 1;
        else if (d->d_tag == DT_RPATH)
            rpath = d->d_un.d_val, has_rpath = 1;
    }
    if (!strtab || (!has_runpath && !has_rpath))
        return -1;
    const char* list = strtab + (has_runpath ? runpath : rpath);
    char origin[1024];
    if (!origin_of(lm, origin, sizeof origin))
        return -1;
    for (const char* p = list; *p;) {
        size_t len = strcspn(p, ":");
        if (len && join(p, len, origin, file, out, cap) == 0 && access(out, F_OK) == 0)
            return 0;
        p += len + (p[len] != 0);
    }
    return -1;
}
