// SPDX-License-Identifier: MIT
// test_symbols.c - symbolizer against real code: this binary's own -O2 -g functions (plain and
// with an always_inline helper), libstdc++'s mangled exports, libc via separate debuginfo, and
// the failure modes (missing file, wrong build-id) that must degrade to "unknown"; the answers
// kept on disk (symcache.c): the same answers, files private, nothing trusted in them.
#define _GNU_SOURCE
#include "harness.h"
#include "symbols.h"
#include "symcache.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Code under inspection. Each capture() call is followed by work so it is never a tail call,
// which would make the return address point into our caller instead.

static volatile uintptr_t captured_ra;
static volatile int sink;
static int plain_line, helper_line, caller_line;

__attribute__((noinline, noclone)) static void capture(int x) {
    captured_ra = (uintptr_t)__builtin_return_address(0);
    sink += x;
}

__attribute__((noinline, noclone)) static int plain_function(int x) {
    plain_line = __LINE__ + 1;
    capture(x + 1);
    return sink * 7 + x;
}

// A C function under a C++ mangled name (test::mangled(int)): a module with a C++ name.
__attribute__((noinline, noclone)) int mangled_function(int x) __asm__("_ZN4test7mangledEi");
__attribute__((noinline, noclone)) int mangled_function(int x) {
    capture(x + 2);
    return sink * 5 + x;
}

static inline __attribute__((always_inline)) int inline_helper(int x) {
    helper_line = __LINE__ + 1;
    capture(x * 5);
    return sink ^ x;
}

__attribute__((noinline, noclone)) static int inline_caller(int x) {
    caller_line = __LINE__ + 1;
    int r = inline_helper(x + 3);
    return r + sink * 11;
}

// ---------------------------------------------------------------------------------------------
// Locating modules the way the agent does: dl_iterate_phdr gives path and bias.

typedef struct {
    uintptr_t want; // address to find, or 0 for the main program (first entry)
    uintptr_t bias;
    char path[4096];
    uint8_t build_id[64];
    size_t build_id_len;
    int found;
} module_query_t;

static void note_build_id(struct dl_phdr_info* info, module_query_t* q) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const char* p = (const char*)(info->dlpi_addr + ph->p_vaddr);
        const char* end = p + ph->p_memsz;
        size_t align = ph->p_align == 8 ? 8 : 4;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr)* nh = (const ElfW(Nhdr)*)p;
            const char* name = p + sizeof(*nh);
            const char* desc = name + ((nh->n_namesz + align - 1) & ~(align - 1));
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                nh->n_descsz <= sizeof(q->build_id)) {
                memcpy(q->build_id, desc, nh->n_descsz);
                q->build_id_len = nh->n_descsz;
                return;
            }
            p = desc + ((nh->n_descsz + align - 1) & ~(align - 1));
        }
    }
}

static int find_module_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    (void)size;
    module_query_t* q = arg;
    if (q->want) {
        int inside = 0;
        for (int i = 0; i < info->dlpi_phnum; i++) {
            const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            if (ph->p_type == PT_LOAD && q->want >= lo && q->want < lo + ph->p_memsz)
                inside = 1;
        }
        if (!inside)
            return 0;
        snprintf(q->path, sizeof(q->path), "%s", info->dlpi_name);
    } else {
        // The main program comes first and is listed with an empty name.
        ssize_t n = readlink("/proc/self/exe", q->path, sizeof(q->path) - 1);
        if (n <= 0)
            return 1;
        q->path[n] = 0;
    }
    q->bias = info->dlpi_addr;
    note_build_id(info, q);
    q->found = 1;
    return 1;
}

static module_query_t find_module(uintptr_t addr) {
    module_query_t q = {.want = addr};
    dl_iterate_phdr(find_module_cb, &q);
    return q;
}

static int ends_with(const char* s, const char* suffix) {
    if (!s)
        return 0;
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static uint64_t plain_site(const module_query_t* self) {
    plain_function(1);
    return captured_ra - 1 - self->bias;
}

static uint64_t mangled_site(const module_query_t* self) {
    mangled_function(1);
    return captured_ra - 1 - self->bias;
}

static uint64_t inline_site(const module_query_t* self) {
    inline_caller(2);
    return captured_ra - 1 - self->bias;
}

// ---------------------------------------------------------------------------------------------

TEST(test_plain_function) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found);
    symbolizer_t* sym = symbolizer_new(NULL);
    ASSERT_TRUE(sym);
    int mod = symbolizer_add_module(sym, self.path, self.build_id, self.build_id_len);
    EXPECT_EQ_I(mod, 0);
    EXPECT_STREQ(symbolizer_module_path(sym, mod), self.path);

    sym_frame_t f[8];
    int n = symbolizer_lookup(sym, mod, plain_site(&self), f, 8);
    EXPECT_EQ_I(n, 1);
    if (n >= 1) {
        EXPECT_STREQ(f[0].function, "plain_function");
        EXPECT_TRUE(ends_with(f[0].file, "test_symbols.c"));
        EXPECT_EQ_U(f[0].line, plain_line);
        EXPECT_EQ_U(f[0].is_inlined, 0);
    }
    symbolizer_free(sym);
}

TEST(test_inline_chain) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found);
    symbolizer_t* sym = symbolizer_new(NULL);
    ASSERT_TRUE(sym);
    int mod = symbolizer_add_module(sym, self.path, NULL, 0);
    uint64_t addr = inline_site(&self);

    sym_frame_t f[8];
    int n = symbolizer_lookup(sym, mod, addr, f, 8);
    EXPECT_EQ_I(n, 2);
    ASSERT_TRUE(n == 2);
    EXPECT_STREQ(f[0].function, "inline_helper");
    EXPECT_TRUE(ends_with(f[0].file, "test_symbols.c"));
    EXPECT_EQ_U(f[0].line, helper_line);
    EXPECT_EQ_U(f[0].is_inlined, 1);
    EXPECT_STREQ(f[1].function, "inline_caller");
    EXPECT_TRUE(ends_with(f[1].file, "test_symbols.c"));
    EXPECT_EQ_U(f[1].line, caller_line);
    EXPECT_EQ_U(f[1].is_inlined, 0);

    // Memoised: same interned pointers; a short buffer gets the innermost frames only.
    sym_frame_t g[8];
    EXPECT_EQ_I(symbolizer_lookup(sym, mod, addr, g, 8), 2);
    EXPECT_TRUE(g[0].function == f[0].function && g[1].file == f[1].file);
    EXPECT_EQ_I(symbolizer_lookup(sym, mod, addr, g, 1), 1);
    EXPECT_STREQ(g[0].function, "inline_helper");
    EXPECT_EQ_I(symbolizer_lookup(sym, mod, addr, g, 0), 0);
    EXPECT_TRUE(symbolizer_lookup(sym, mod + 1, addr, g, 8) < 0);
    symbolizer_free(sym);
}

// heaplens links no C++ runtime: the demangler is loaded when a name first needs it, and the
// library whose names are looked up here is loaded by the test.
TEST(test_cxx_demangled) {
    void* cxx = dlopen("libstdc++.so.6", RTLD_NOW);
    ASSERT_TRUE(cxx);
    void* fn = dlsym(cxx, "_ZNSt9bad_allocD1Ev");
    ASSERT_TRUE(fn);
    module_query_t lib = find_module((uintptr_t)fn);
    ASSERT_TRUE(lib.found);
    EXPECT_TRUE(strstr(lib.path, "libstdc++") != NULL);
    symbolizer_t* sym = symbolizer_new(NULL);
    ASSERT_TRUE(sym);
    int mod = symbolizer_add_module(sym, lib.path, lib.build_id, lib.build_id_len);
    sym_frame_t f[8];
    int n = symbolizer_lookup(sym, mod, (uintptr_t)fn - lib.bias, f, 8);
    ASSERT_TRUE(n >= 1);
    EXPECT_TRUE(f[n - 1].function && strstr(f[n - 1].function, "std::bad_alloc::~bad_alloc"));
    if (!f[n - 1].function || !strstr(f[n - 1].function, "std::bad_alloc::~bad_alloc"))
        fprintf(stderr, "  got function %s\n", f[n - 1].function ? f[n - 1].function : "(null)");
    symbolizer_free(sym);
}

// libc.so.6 is stripped; file:line can only come from /usr/lib/debug/.build-id (libc6-dbg).
TEST(test_separate_debuginfo) {
    void* fn = dlsym(RTLD_DEFAULT, "getpid");
    ASSERT_TRUE(fn);
    module_query_t lib = find_module((uintptr_t)fn);
    ASSERT_TRUE(lib.found && lib.build_id_len > 0);
    char dbg[256];
    int len = snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%02x/", lib.build_id[0]);
    for (size_t i = 1; i < lib.build_id_len; i++)
        len += snprintf(dbg + len, sizeof(dbg) - (size_t)len, "%02x", lib.build_id[i]);
    snprintf(dbg + len, sizeof(dbg) - (size_t)len, ".debug");
    if (access(dbg, R_OK) != 0) {
        printf("  (skipped: no %s)\n", dbg);
        return;
    }
    symbolizer_t* sym = symbolizer_new(NULL);
    ASSERT_TRUE(sym);
    int mod = symbolizer_add_module(sym, lib.path, lib.build_id, lib.build_id_len);
    sym_frame_t f[8];
    int n = symbolizer_lookup(sym, mod, (uintptr_t)fn - lib.bias, f, 8);
    ASSERT_TRUE(n >= 1);
    EXPECT_TRUE(f[n - 1].function && strstr(f[n - 1].function, "getpid"));
    EXPECT_TRUE(f[0].file != NULL);
    EXPECT_TRUE(f[0].line > 0);
    printf("  libc getpid -> %s at %s:%u\n", f[n - 1].function ? f[n - 1].function : "(null)",
           f[0].file ? f[0].file : "(null)", f[0].line);
    symbolizer_free(sym);
}

TEST(test_missing_file) {
    symbolizer_t* sym = symbolizer_new(NULL);
    ASSERT_TRUE(sym);
    int mod = symbolizer_add_module(sym, "/nonexistent/heaplens/libgone.so", NULL, 0);
    ASSERT_TRUE(mod >= 0);
    sym_frame_t f[4];
    memset(f, 0xab, sizeof(f));
    int n = symbolizer_lookup(sym, mod, 0x1234, f, 4);
    EXPECT_EQ_I(n, 1);
    EXPECT_TRUE(f[0].function == NULL);
    EXPECT_TRUE(f[0].file == NULL);
    EXPECT_EQ_U(f[0].line, 0);
    EXPECT_STREQ(symbolizer_module_path(sym, mod), "/nonexistent/heaplens/libgone.so");
    // Not an ELF file and not a regular file: unknown as well, and silent.
    int m2 = symbolizer_add_module(sym, "/proc/self/status", NULL, 0);
    int m3 = symbolizer_add_module(sym, "/dev/null", NULL, 0);
    EXPECT_EQ_I(symbolizer_lookup(sym, m2, 0x10, f, 4), 1);
    EXPECT_TRUE(f[0].function == NULL);
    EXPECT_EQ_I(symbolizer_lookup(sym, m3, 0x10, f, 4), 1);
    EXPECT_TRUE(f[0].function == NULL);
    symbolizer_free(sym);
}

TEST(test_wrong_build_id) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found);
    symbolizer_t* sym = symbolizer_new(NULL);
    ASSERT_TRUE(sym);
    uint8_t bogus[20];
    memset(bogus, 0x5a, sizeof(bogus));
    int mod = symbolizer_add_module(sym, self.path, bogus, sizeof(bogus));
    sym_frame_t f[4];
    EXPECT_EQ_I(symbolizer_lookup(sym, mod, plain_site(&self), f, 4), 1);
    EXPECT_TRUE(f[0].function == NULL);
    EXPECT_TRUE(f[0].file == NULL);
    symbolizer_free(sym);
}

TEST(test_sysroot) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found);
    char root[4096];
    snprintf(root, sizeof(root), "%s", self.path);
    char* slash = strrchr(root, '/');
    ASSERT_TRUE(slash && slash != root);
    char base[4096];
    snprintf(base, sizeof(base), "%s", slash); // "/test_symbols"
    *slash = 0;
    symbolizer_t* sym = symbolizer_new(root);
    ASSERT_TRUE(sym);
    int mod = symbolizer_add_module(sym, base, self.build_id, self.build_id_len);
    EXPECT_STREQ(symbolizer_module_path(sym, mod), base);
    sym_frame_t f[4];
    EXPECT_EQ_I(symbolizer_lookup(sym, mod, plain_site(&self), f, 4), 1);
    EXPECT_STREQ(f[0].function, "plain_function");
    symbolizer_free(sym);
}

TEST(test_speed) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found);
    symbolizer_t* sym = symbolizer_new(NULL);
    ASSERT_TRUE(sym);
    int mod = symbolizer_add_module(sym, self.path, NULL, 0);
    uint64_t base = inline_site(&self) & ~(uint64_t)0xfff;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int known = 0;
    for (int i = 0; i < 100000; i++) {
        // 2000 distinct addresses across this binary's text, each seen ~50 times.
        uint64_t addr = base + (uint64_t)((i * 7919) % 2000) * 3;
        sym_frame_t f[8];
        int n = symbolizer_lookup(sym, mod, addr, f, 8);
        EXPECT_TRUE(n >= 1);
        known += n >= 1 && f[n - 1].function != NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("  100000 lookups (2000 distinct, %d named) in %.1f ms\n", known, ms);
    EXPECT_TRUE(known > 0);
    symbolizer_free(sym);
}

static int same_str(const char* a, const char* b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

// Modules opened on the prefetch thread answer as modules opened at their first lookup: the
// same frames for 2000 addresses of this binary, unknown files unknown, a wrong build-id
// refused; whether the lookup comes before, during or after the thread opens the module, and
// when the symbolizer is freed while the thread is still at work.
TEST(test_prefetch) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found);
    uint8_t bogus[20];
    memset(bogus, 0x5a, sizeof(bogus));
    uint64_t base = inline_site(&self) & ~(uint64_t)0xfff;
    symbolizer_t* plain = symbolizer_new(NULL);
    ASSERT_TRUE(plain);
    int ref = symbolizer_add_module(plain, self.path, self.build_id, self.build_id_len);
    int differ = 0, named = 0;
    for (int round = 0; round < 8; round++) {
        symbolizer_t* sym = symbolizer_new(NULL);
        ASSERT_TRUE(sym);
        int gone = symbolizer_add_module(sym, "/nonexistent/heaplens/libgone.so", NULL, 0);
        int mod = symbolizer_add_module(sym, self.path, self.build_id, self.build_id_len);
        EXPECT_EQ_I(symbolizer_prefetch(sym, gone), 0);
        EXPECT_EQ_I(symbolizer_prefetch(sym, mod), 0);
        // added and queued while the thread runs
        int wrong = symbolizer_add_module(sym, self.path, bogus, sizeof(bogus));
        int devnull = symbolizer_add_module(sym, "/dev/null", NULL, 0);
        EXPECT_EQ_I(symbolizer_prefetch(sym, wrong), 0);
        EXPECT_EQ_I(symbolizer_prefetch(sym, devnull), 0);
        EXPECT_TRUE(symbolizer_prefetch(sym, 99) < 0);
        if (round == 7) { // freed at once: the thread stops after the module it is opening
            symbolizer_free(sym);
            break;
        }
        if (round & 1) { // the thread has opened them all by now
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        sym_frame_t f[8], g[8];
        for (int i = 0; i < 2000; i++) {
            uint64_t addr = base + (uint64_t)((i * 7919) % 2000) * 3;
            int n = symbolizer_lookup(sym, mod, addr, f, 8);
            int k = symbolizer_lookup(plain, ref, addr, g, 8);
            int same = n == k;
            for (int j = 0; same && j < n; j++)
                same = same_str(f[j].function, g[j].function) && same_str(f[j].file, g[j].file) &&
                       f[j].line == g[j].line && f[j].is_inlined == g[j].is_inlined;
            differ += !same;
            named += n >= 1 && f[n - 1].function != NULL;
        }
        EXPECT_EQ_I(symbolizer_lookup(sym, gone, 0x1234, f, 4), 1);
        EXPECT_TRUE(f[0].function == NULL);
        EXPECT_EQ_I(symbolizer_lookup(sym, wrong, plain_site(&self), f, 4), 1);
        EXPECT_TRUE(f[0].function == NULL);
        EXPECT_EQ_I(symbolizer_lookup(sym, devnull, 0x10, f, 4), 1);
        EXPECT_TRUE(f[0].function == NULL);
        EXPECT_EQ_I(symbolizer_lookup(sym, mod, plain_site(&self), f, 4), 1);
        EXPECT_STREQ(f[0].function, "plain_function");
        symbolizer_free(sym);
    }
    EXPECT_EQ_I(differ, 0);
    EXPECT_TRUE(named > 0);
    symbolizer_free(plain);
}

// ---------------------------------------------------------------------------------------------
// The cache on disk.

static char* cache_dir_make(void) {
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/hl-symcache-test.XXXXXX");
    return mkdtemp(dir);
}

static void cache_dir_remove(const char* dir) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "  could not remove %s\n", dir);
}

// The one cache file of the directory (its name into name): 0, or -1 when there is not one.
static int only_file(const char* dir, char* name, size_t len) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    FILE* p = popen(cmd, "r");
    if (!p)
        return -1;
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(name, len, "%.200s", line);
        n++;
    }
    pclose(p);
    return n == 1 ? 0 : -1;
}

// The innermost frame at the test program's address site, its function's name in fn, by a
// symbolizer of its own (using the cache in dir, if any).
static int lookup_at(const char* dir, const module_query_t* self, uint64_t site, sym_frame_t* f,
                     char* fn, size_t fnlen) {
    symbolizer_t* sym = symbolizer_new(NULL);
    if (!sym)
        return -1;
    if (dir)
        symbolizer_use_cache(sym, dir);
    int mod = symbolizer_add_module(sym, self->path, self->build_id, self->build_id_len);
    int n = symbolizer_lookup(sym, mod, site, f, 1);
    snprintf(fn, fnlen, "%s", n == 1 && f[0].function ? f[0].function : "(none)");
    f[0].function = NULL; // the string dies with the symbolizer
    f[0].file = NULL;
    symbolizer_free(sym);
    return n;
}

static int lookup_plain(const char* dir, const module_query_t* self, sym_frame_t* f, char* fn,
                        size_t fnlen) {
    return lookup_at(dir, self, plain_site(self), f, fn, fnlen);
}

TEST(test_cache_same_answers_private_files) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found && self.build_id_len > 0);
    char* dir = cache_dir_make();
    ASSERT_TRUE(dir);
    sym_frame_t f[1];
    char fn[128];
    // Cold: looked up, then written; warm: read back, the same answer.
    ASSERT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "plain_function");
    uint32_t line = f[0].line;
    EXPECT_EQ_U(line, plain_line);
    char name[256], path[512];
    ASSERT_TRUE(only_file(dir, name, sizeof name) == 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    ASSERT_TRUE(lstat(path, &st) == 0);
    EXPECT_TRUE(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
    EXPECT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "plain_function");
    EXPECT_EQ_U(f[0].line, line);
    cache_dir_remove(dir);
}

static int give_one(void* arg, symcache_entry_t* e) {
    int* left = arg;
    static const sym_frame_t fake = {.function = "answered_from_the_cache", .file = "cache.c",
                                     .line = 4242};
    if (!(*left)--)
        return 0;
    *e = (symcache_entry_t){0, &fake, 1};
    return 1;
}

// A file written for the module under its name answers for it, without the module being
// opened: the proof that the cache is what answers. Then the same file damaged in each way a
// disk or another program could: not trusted, looked up again, and written anew.
TEST(test_cache_file_answers_and_bad_files_do_not) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found && self.build_id_len > 0);
    char* dir = cache_dir_make();
    ASSERT_TRUE(dir);
    const char* dirs[] = {"/usr/lib/debug"};
    char name[256], path[512];
    ASSERT_TRUE(symcache_name(self.path, self.build_id, self.build_id_len, dirs, 1,
                              symbolizer_cache_producer(), name, sizeof name) == 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sym_frame_t f[1];
    char fn[128];

    // Forged: an answer at the address the lookup asks for (the plain site's).
    int one = 1, dfd = symcache_open(dir);
    ASSERT_TRUE(dfd >= 0);
    ASSERT_TRUE(symcache_store(dfd, name, 0, give_one, &one) == 0);
    close(dfd);
    // The layout (symcache.c): magic, the name with its length, the demangler, the count, then
    // the entry: address, frames, line, flags, the function's length and bytes.
    off_t entry = 8 + 2 + (off_t)strlen(name) + 1 + 8 + 4, count_at = entry - 4;
    off_t fn_len_at = entry + 8 + 1 + 4 + 1, fn_nul_at = fn_len_at + 2 + 23;
    // give_one answers at address 0: rewrite it at the plain site's address.
    {
        int fd = open(path, O_RDWR);
        ASSERT_TRUE(fd >= 0);
        uint64_t addr = plain_site(&self);
        uint8_t le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)(addr >> (8 * i));
        EXPECT_TRUE(pwrite(fd, le, 8, entry) == 8);
        close(fd);
    }
    EXPECT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "answered_from_the_cache");
    EXPECT_EQ_U(f[0].line, 4242);

    // Each damage: one byte short, a count past its entries, a length past the end, a string
    // without its NUL, a planted link (to the forged file), the file of another name (copied or
    // renamed): the real answer every time.
    struct stat st;
    ASSERT_TRUE(stat(path, &st) == 0);
    char forged_copy[600];
    snprintf(forged_copy, sizeof forged_copy, "%s/forged", dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, forged_copy);
    ASSERT_TRUE(system(cmd) == 0);
    for (int damage = 0; damage < 6; damage++) {
        snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 600 '%s'", forged_copy, path, path);
        ASSERT_TRUE(system(cmd) == 0);
        int fd = open(path, O_RDWR);
        ASSERT_TRUE(fd >= 0);
        uint8_t b = 0xff;
        if (damage == 0)
            EXPECT_TRUE(ftruncate(fd, st.st_size - 1) == 0);
        else if (damage == 1)
            EXPECT_TRUE(pwrite(fd, &b, 1, count_at) == 1); // 255 entries
        else if (damage == 2)
            EXPECT_TRUE(pwrite(fd, &b, 1, fn_len_at + 1) == 1); // the function's length
        else if (damage == 3)
            EXPECT_TRUE(pwrite(fd, "x", 1, fn_nul_at) == 1); // its NUL
        else if (damage == 5)
            EXPECT_TRUE(pwrite(fd, name[0] == 'f' ? "e" : "f", 1, 10) == 1); // the name it holds
        close(fd);
        if (damage == 4) {
            unlink(path);
            ASSERT_TRUE(symlink(forged_copy, path) == 0);
        }
        EXPECT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
        EXPECT_STREQ(fn, "plain_function");
        if (strcmp(fn, "plain_function") != 0)
            fprintf(stderr, "  damage %d was trusted\n", damage);
        // Written anew, a file of the user's in place of what was there (the link's target
        // untouched).
        EXPECT_TRUE(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
    }
    ASSERT_TRUE(lookup_plain(NULL, &self, f, fn, sizeof fn) == 1);
    EXPECT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "plain_function");
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", forged_copy, path);
    EXPECT_TRUE(system(cmd) != 0);
    cache_dir_remove(dir);
}

// The environment's directory: made private below a home that exists, refused when it is not
// private, when a link stands for it (even written with a trailing slash), or when off.
// One forged answer at addr, in a file that says demangler demangled its names.
typedef struct forged_s {
    uint64_t addr;
    int left;
} forged_t;
static int give_forged(void* arg, symcache_entry_t* e) {
    forged_t* f = arg;
    static const sym_frame_t fake = {.function = "answered_from_the_cache", .file = "cache.c",
                                     .line = 4242};
    if (!f->left--)
        return 0;
    *e = (symcache_entry_t){f->addr, &fake, 1};
    return 1;
}
static int forge(const char* dir, const char* name, uint64_t demangler, uint64_t addr) {
    forged_t f = {addr, 1};
    int dfd = symcache_open(dir);
    int rc = dfd >= 0 ? symcache_store(dfd, name, demangler, give_forged, &f) : -1;
    if (dfd >= 0)
        close(dfd);
    return rc;
}

// The demangler a cache file names (after its magic and its own name).
static uint64_t demangler_of(const char* dir, const char* name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t b[8] = {0};
    int fd = open(path, O_RDONLY);
    if (fd < 0 || pread(fd, b, 8, 8 + 2 + (off_t)strlen(name) + 1) != 8)
        b[0] = 0xee, b[7] = 0xee; // no file: a value no demangler field holds here
    if (fd >= 0)
        close(fd);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

// A module's cache file names no demangler while none of its names was mangled (a C program's
// report then reads it without loading libstdc++); one with a C++ name names the demangler, and
// a file that names another one is not used.
TEST(test_cache_names_the_demangler_of_cxx_names_only) {
    module_query_t self = find_module(0);
    ASSERT_TRUE(self.found && self.build_id_len > 0);
    char* dir = cache_dir_make();
    ASSERT_TRUE(dir);
    char name[256];
    const char* dirs[] = {"/usr/lib/debug"};
    ASSERT_TRUE(symcache_name(self.path, self.build_id, self.build_id_len, dirs, 1,
                              symbolizer_cache_producer(), name, sizeof name) == 0);
    sym_frame_t f[1];
    char fn[128];
    ASSERT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_EQ_U(demangler_of(dir, name), 0);

    EXPECT_TRUE(lookup_at(dir, &self, mangled_site(&self), f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "test::mangled(int)");
    uint64_t demangler = demangler_of(dir, name);
    EXPECT_TRUE(demangler != 0 && demangler != 0xee000000000000eeull);

    // A forged answer is what comes back from a file that names no demangler or this one; from
    // a file that names another, the answer is worked out again.
    ASSERT_TRUE(forge(dir, name, 0, plain_site(&self)) == 0);
    EXPECT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "answered_from_the_cache");
    ASSERT_TRUE(forge(dir, name, demangler, plain_site(&self)) == 0);
    EXPECT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "answered_from_the_cache");
    ASSERT_TRUE(forge(dir, name, demangler ^ 2, plain_site(&self)) == 0);
    EXPECT_TRUE(lookup_plain(dir, &self, f, fn, sizeof fn) == 1);
    EXPECT_STREQ(fn, "plain_function");
    cache_dir_remove(dir);
}

TEST(test_cache_default_dir) {
    char* base = cache_dir_make();
    ASSERT_TRUE(base);
    char want[256], xdg[128], link[128], missing[128];
    snprintf(xdg, sizeof xdg, "%s/x", base);
    snprintf(want, sizeof want, "%s/heaplens/symbols", xdg);
    snprintf(link, sizeof link, "%s/link/", base);
    snprintf(missing, sizeof missing, "%s/no-such-home", base);
    setenv("HEAPLENS_SYMBOL_CACHE", "off", 1);
    EXPECT_TRUE(symcache_open_default() < 0);
    unsetenv("HEAPLENS_SYMBOL_CACHE");
    setenv("XDG_CACHE_HOME", xdg, 1);
    EXPECT_TRUE(symcache_open_default() < 0); // no such XDG_CACHE_HOME: nothing made
    struct stat st;
    EXPECT_TRUE(stat(xdg, &st) != 0);
    ASSERT_TRUE(mkdir(xdg, 0755) == 0);
    int fd = symcache_open_default();
    EXPECT_TRUE(fd >= 0);
    if (fd >= 0)
        close(fd);
    EXPECT_TRUE(lstat(want, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 077) == 0);
    chmod(want, 0770); // others may enter: not used
    EXPECT_TRUE(symcache_open_default() < 0);
    unsetenv("XDG_CACHE_HOME");
    chmod(want, 0700);
    link[strlen(link) - 1] = '\0';
    ASSERT_TRUE(symlink(want, link) == 0);
    strcat(link, "/");
    setenv("HEAPLENS_SYMBOL_CACHE", link, 1); // a link to a private directory: not followed
    EXPECT_TRUE(symcache_open_default() < 0);
    setenv("HEAPLENS_SYMBOL_CACHE", want, 1);
    fd = symcache_open_default();
    EXPECT_TRUE(fd >= 0);
    if (fd >= 0)
        close(fd);
    unsetenv("HEAPLENS_SYMBOL_CACHE");
    char* home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", missing, 1);
    EXPECT_TRUE(symcache_open_default() < 0);
    EXPECT_TRUE(stat(missing, &st) != 0);
    if (home)
        setenv("HOME", home, 1);
    free(home);
    cache_dir_remove(base);
}

int main(void) {
    RUN_TEST(test_plain_function);
    RUN_TEST(test_inline_chain);
    RUN_TEST(test_cxx_demangled);
    RUN_TEST(test_separate_debuginfo);
    RUN_TEST(test_missing_file);
    RUN_TEST(test_wrong_build_id);
    RUN_TEST(test_sysroot);
    RUN_TEST(test_speed);
    RUN_TEST(test_prefetch);
    RUN_TEST(test_cache_same_answers_private_files);
    RUN_TEST(test_cache_file_answers_and_bad_files_do_not);
    RUN_TEST(test_cache_names_the_demangler_of_cxx_names_only);
    RUN_TEST(test_cache_default_dir);
    return TEST_SUMMARY();
}
