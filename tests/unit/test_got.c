// SPDX-License-Identifier: MIT
// test_got.c - got.c's contract on real modules, in this process, without the agent: malloc and
// free of libforeign.so (bound at load, its GOT under full RELRO), of libforeign_lazy.so
// (loaded after the install, bound lazily, no RELRO) and of libforeign_noplt.so (no PLT) are
// routed to counting functions of this test, libc's own slots too (strdup), this test's not; the
// pages keep their protection; a refresh routes the module loaded since; removal gives every slot
// back; a slot whose page cannot be made writable is left and counted; got_own_symbol finds a
// module's own definitions. Both libraries come from build/programs (foreign_lib.c).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/agent/got.h"
#include "harness.h"

static void* (*real_malloc)(size_t);
static void (*real_free)(void*);
static unsigned long mallocs, frees;

// Exported (-rdynamic): got_own_symbol must find it in this executable's own table.
__attribute__((visibility("default"), noinline)) void* counting_malloc(size_t n) {
    mallocs++;
    return real_malloc(n);
}

__attribute__((visibility("default"), noinline)) void counting_free(void* p) {
    frees++;
    real_free(p);
}

static got_route_t routes[2];

typedef struct lib_s {
    void* handle;
    void (*work)(void);     // foreign_lib_work: 15 mallocs (strdup's in libc), 11 frees
    void* (*alloc)(size_t); // foreign_lib_alloc: one malloc
    void (*release)(void*); // foreign_lib_free: one free
    char perms[16][8];      // the protections of its mappings, in address order
    size_t nperms;
} lib_t;

static lib_t now_lib, lazy_lib;

// build/programs/NAME, from this test's place in build/tests.
static int lib_path(char* path, const char* name) {
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 64);
    if (n <= 0)
        return -1;
    path[n] = 0;
    *strrchr(path, '/') = 0;
    strcat(path, "/../programs/");
    strcat(path, name);
    return 0;
}

static int open_path(lib_t* l, const char* path, int mode) {
    l->handle = dlopen(path, mode | RTLD_LOCAL);
    if (!l->handle) {
        fprintf(stderr, "  %s\n", dlerror());
        return -1;
    }
    *(void**)&l->work = dlsym(l->handle, "foreign_lib_work");
    *(void**)&l->alloc = dlsym(l->handle, "foreign_lib_alloc");
    *(void**)&l->release = dlsym(l->handle, "foreign_lib_free");
    return l->work && l->alloc && l->release ? 0 : -1;
}

static int open_lib(lib_t* l, const char* name, int mode) {
    char path[PATH_MAX];
    return lib_path(path, name) == 0 ? open_path(l, path, mode) : -1;
}

// The "rwxp" of each mapping of the library's file, from /proc/self/maps; their count.
static size_t read_perms(const char* name, char (*out)[8], size_t max) {
    FILE* f = fopen("/proc/self/maps", "r");
    char line[1024];
    size_t n = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char* file = strrchr(line, '/');
        if (!file || strncmp(file + 1, name, strlen(name)) != 0 || file[1 + strlen(name)] != '\n')
            continue;
        char perms[8] = {0};
        if (sscanf(line, "%*x-%*x %7s", perms) == 1 && n < max)
            memcpy(out[n++], perms, sizeof perms);
    }
    if (f)
        fclose(f);
    return n;
}

static int same_perms(const lib_t* l, const char* name) {
    char now[16][8];
    size_t n = read_perms(name, now, 16);
    if (n != l->nperms)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(now[i], l->perms[i]) != 0)
            return 0;
    return 1;
}

TEST(install_routes_bound_slots_under_relro) {
    ASSERT_TRUE(open_lib(&now_lib, "libforeign.so", RTLD_NOW) == 0);
    now_lib.nperms = read_perms("libforeign.so", now_lib.perms, 16);
    ASSERT_TRUE(now_lib.nperms >= 3);
    int has_relro_page = 0;
    for (size_t i = 0; i < now_lib.nperms; i++)
        has_relro_page |= strcmp(now_lib.perms[i], "r--p") == 0;
    EXPECT_TRUE(has_relro_page);
    *(void**)&real_malloc = dlsym(RTLD_DEFAULT, "malloc");
    *(void**)&real_free = dlsym(RTLD_DEFAULT, "free");
    routes[0] =
        (got_route_t){.name = "malloc", .from = (void*)real_malloc, .to = (void*)counting_malloc};
    routes[1] = (got_route_t){.name = "free", .from = (void*)real_free, .to = (void*)counting_free};
    long n = got_routes_install(routes, 2, (const void*)counting_malloc);
    EXPECT_TRUE(n >= 4); // libforeign's and libc's own, at least
    EXPECT_TRUE(routes[0].slots >= 2 && routes[1].slots >= 2);
    EXPECT_EQ_U(routes[0].failed + routes[1].failed, 0);
    EXPECT_TRUE(same_perms(&now_lib, "libforeign.so"));
    unsigned long m0 = mallocs, f0 = frees;
    now_lib.work();
    // 10 + 1 + 3 from libforeign's GOT, strdup's from libc's; realloc and calloc are not routed
    EXPECT_EQ_U(mallocs - m0, 15);
    EXPECT_EQ_U(frees - f0, 11);
    EXPECT_EQ_I(got_routes_install(routes, 2, (const void*)counting_malloc), -1);
    // The installer's own module (this test) keeps its slots.
    m0 = mallocs;
    char* volatile mine = malloc(5);
    free(mine);
    EXPECT_EQ_U(mallocs - m0, 0);
}

// A module built without a PLT (-fno-plt: every call through a GOT entry, no jump slot).
TEST(refresh_routes_a_module_without_plt) {
    lib_t noplt = {0};
    ASSERT_TRUE(open_lib(&noplt, "libforeign_noplt.so", RTLD_NOW) == 0);
    got_routes_refresh();
    unsigned long m0 = mallocs, f0 = frees;
    noplt.work();
    EXPECT_EQ_U(mallocs - m0, 15);
    EXPECT_EQ_U(frees - f0, 11);
}

TEST(refresh_routes_a_module_loaded_since_with_unbound_slots) {
    ASSERT_TRUE(open_lib(&lazy_lib, "libforeign_lazy.so", RTLD_LAZY) == 0);
    lazy_lib.nperms = read_perms("libforeign_lazy.so", lazy_lib.perms, 16);
    got_routes_refresh(); // neither of its slots was called yet: both still point into its PLT
    EXPECT_TRUE(same_perms(&lazy_lib, "libforeign_lazy.so"));
    unsigned long m0 = mallocs, f0 = frees;
    void* p = lazy_lib.alloc(24);
    lazy_lib.release(p);
    EXPECT_EQ_U(mallocs - m0, 1);
    EXPECT_EQ_U(frees - f0, 1);
    got_routes_refresh(); // nothing new: the same
    p = lazy_lib.alloc(24);
    lazy_lib.release(p);
    EXPECT_EQ_U(mallocs - m0, 2);
    EXPECT_EQ_U(frees - f0, 2);
}

TEST(remove_gives_every_slot_back) {
    got_routes_remove();
    unsigned long m0 = mallocs, f0 = frees;
    now_lib.work();
    void* p = lazy_lib.alloc(24);
    lazy_lib.release(p);
    EXPECT_EQ_U(mallocs - m0, 0);
    EXPECT_EQ_U(frees - f0, 0);
    EXPECT_TRUE(same_perms(&now_lib, "libforeign.so"));
    EXPECT_TRUE(same_perms(&lazy_lib, "libforeign_lazy.so"));
    // Installed again after a removal, it routes as before.
    EXPECT_TRUE(got_routes_install(routes, 2, (const void*)counting_malloc) > 0);
    p = lazy_lib.alloc(24);
    lazy_lib.release(p);
    EXPECT_EQ_U(mallocs - m0, 1);
    got_routes_remove();
}

// Every read-only private mapping of the file `name` replaced by the same bytes mapped from a
// file opened read-only: mprotect can no longer make them writable (EACCES).
static int freeze_read_only(const char* name) {
    FILE* f = fopen("/proc/self/maps", "r");
    char line[1024];
    int frozen = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        const char* file = strrchr(line, '/');
        if (!file || strncmp(file + 1, name, strlen(name)) != 0 ||
            sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || strcmp(perms, "r--p") != 0)
            continue;
        int fd = memfd_create("test_got", 0);
        char ro[64];
        snprintf(ro, sizeof ro, "/proc/self/fd/%d", fd);
        int rofd = fd >= 0 && write(fd, (void*)lo, hi - lo) == (ssize_t)(hi - lo)
                       ? open(ro, O_RDONLY | O_CLOEXEC)
                       : -1;
        if (rofd >= 0 &&
            mmap((void*)lo, hi - lo, PROT_READ, MAP_SHARED | MAP_FIXED, rofd, 0) == (void*)lo)
            frozen++;
        if (rofd >= 0)
            close(rofd);
        if (fd >= 0)
            close(fd);
    }
    if (f)
        fclose(f);
    return frozen;
}

// A module whose slot pages cannot be made writable (a copy of libforeign.so, so a module of
// its own): its slots are counted as failed and left as they were, and its calls still reach
// the definition in use.
TEST(slots_on_pages_that_stay_read_only_are_left_and_counted) {
    char src[PATH_MAX], dst[64];
    ASSERT_TRUE(lib_path(src, "libforeign.so") == 0);
    snprintf(dst, sizeof dst, "/tmp/test_got.%d.libforeign_ro.so", (int)getpid());
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    char buf[65536];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    lib_t ro = {0};
    ASSERT_TRUE(open_path(&ro, dst, RTLD_NOW) == 0);
    EXPECT_TRUE(freeze_read_only(strrchr(dst, '/') + 1) >= 1);
    EXPECT_TRUE(got_routes_install(routes, 2, (const void*)counting_malloc) > 0); // libc's
    EXPECT_TRUE(routes[0].failed >= 1 && routes[1].failed >= 1);
    unsigned long m0 = mallocs, f0 = frees;
    ro.work();
    EXPECT_EQ_U(mallocs - m0, 1); // strdup's, through libc's slot; its own 14 unrouted
    EXPECT_EQ_U(frees - f0, 0);
    got_routes_remove();
    unlink(dst);
}

TEST(own_symbol_is_the_modules_own_definition) {
    EXPECT_TRUE(got_own_symbol((const void*)counting_free, "counting_malloc") ==
                (void*)counting_malloc);
    EXPECT_TRUE(got_own_symbol((const void*)real_malloc, "malloc") == (void*)real_malloc);
    void* work = dlsym(now_lib.handle, "foreign_lib_work");
    EXPECT_TRUE(got_own_symbol(work, "foreign_lib_work") == work);
    EXPECT_TRUE(got_own_symbol(work, "malloc") == NULL); // it only calls it
    EXPECT_TRUE(got_own_symbol(work, "no_such_symbol") == NULL);
}

int main(void) {
    RUN_TEST(install_routes_bound_slots_under_relro);
    RUN_TEST(refresh_routes_a_module_loaded_since_with_unbound_slots);
    RUN_TEST(refresh_routes_a_module_without_plt);
    RUN_TEST(remove_gives_every_slot_back);
    RUN_TEST(slots_on_pages_that_stay_read_only_are_left_and_counted);
    RUN_TEST(own_symbol_is_the_modules_own_definition);
    return TEST_SUMMARY();
}
