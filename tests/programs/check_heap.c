// check_heap MODE: heap bugs for heaplens's checking options (--redzone, --paint, --hoard), one
// mode per run. The bad writes land in the red zones or in blocks held back, so with those
// options the program runs on as it would; without them several of these writes would corrupt
// the allocator's own data: run each mode under heaplens with its option, or under memcheck.
//   underrun   write 3 bytes before a 40-byte block, free it (found at the free, in
//              underrun_write's block); write 8 bytes before another one kept (found at exit)
//   overrun    write 5 bytes past a 20-byte block's end, free it
//   realloc    write 1 byte past a 16-byte block, realloc it bigger (found at the realloc); then
//              shrink, grow and move blocks through realloc (no error) and check their contents
//   aligned    memalign, posix_memalign, aligned_alloc, valloc, pvalloc: each aligned as asked,
//              written whole, freed (no error); then 1 byte before an aligned_alloc(64) block
//   paint      prints whether a new block holds 0xAA everywhere, calloc's zeroes, a freed
//              block's byte 40 0xDD (run with --paint=alloc:0xAA,free:0xDD --hoard=1M)
//   uaf        write 1 byte at offset 10 of a freed 48-byte block (kept in the hoard: found at
//              exit), and 4 bytes at offset 100 of a freed 256-byte block that then leaves a
//              4 KiB hoard as more blocks are freed (found when it leaves)
//   dangling   a live 16-byte block (made in make_holder) keeps a pointer 8 bytes into a freed
//              32-byte block (a dangling pointer, found at exit with --hoard)
//   gp         (--guard-pages=1) a 1-byte write just past a 96-byte block (in write_past), a
//              read just past another (read_past), a read of a freed 64-byte block at offset 8
//              (read_freed), a write to another at offset 16 (write_freed); prints the bytes read
//   gp_own     the program's own SIGSEGV handler (siglongjmp out of a NULL read) still runs,
//              twice, around a guard page fault (write_past)
//   gp_before  (--guard-pages=1 --guard-pages-before) a write 1 byte before a 96-byte block (in
//              write_past, given -1) and a read 4 bytes before another (read_past, given -4)
//   gp_threads 4 threads each write 1 byte past a 64-byte block of their own (in write_past)
//              and read a freed one (read_freed), all at once
//   sites      two allocation sites: site_good reads 1 byte past its 48-byte block (in
//              read_past), site_bad writes 1 byte past its own; both freed (--guard-sites=)
//   sites_dlopen  dlopen libplugin.so (this program's directory), whose plugin_site_overflow
//              writes 1 byte past a 48-byte block
//   kinds      (--guard-pages=1 --redzone=16) every kind at once: gp's four, a read two pages
//              past a block (read_far: into a slot of the pool no block ever had, an invalid
//              access) and a write 1 byte before a 3-page block (big_block's, too big for a
//              guard page: found by its red zone at release); leaks one 40-byte block
//              (lose_one), so that the page has a leak to show
//   threads    4 threads allocate, write and free 20,000 blocks each (no error)
#include <dlfcn.h>
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

char* kept; // not static: gcc drops a malloc whose block is never read

NOINLINE static char* underrun_write(size_t size, int before) {
    char* p = malloc(size);
    volatile int n = before;
    p[-n] = 'u';
    return p;
}
NOINLINE static void release(void* p) {
    free(p);
    NO_TAIL_CALL();
}

static int underrun(void) {
    release(underrun_write(40, 3));
    kept = underrun_write(40, 8);
    return 0;
}

NOINLINE static char* overrun_write(void) {
    char* p = malloc(20);
    volatile int n = 25;
    p[n] = 'o';
    return p;
}
static int overrun(void) {
    release(overrun_write());
    return 0;
}

NOINLINE static char* realloc_overrun(void) {
    char* p = malloc(16);
    volatile int n = 16;
    p[n] = 'r';
    return p;
}
NOINLINE static char* grow(char* p, size_t size) {
    char* q = realloc(p, size);
    NO_TAIL_CALL();
    return q;
}
static int realloc_mode(void) {
    char* p = grow(realloc_overrun(), 64);
    memset(p, 'a', 64);
    p = grow(p, 8); // shrink
    p = grow(p, 4000); // grow far (moves)
    for (int i = 0; i < 8; i++)
        if (p[i] != 'a')
            return say("realloc lost the contents\n"), 1;
    memset(p, 'b', 4000);
    p = grow(p, 100000);
    for (int i = 0; i < 4000; i++)
        if (p[i] != 'b')
            return say("realloc lost the contents\n"), 1;
    p = grow(p, 0); // the allocator's choice: released and NULL (glibc), or a new block
    say(p ? "realloc(p, 0) gave a block\n" : "realloc(p, 0) gave NULL\n");
    if (p)
        free(p);
    char* q = grow(NULL, 32); // realloc(NULL) is malloc
    free(q);
    say("realloc contents kept\n");
    return 0;
}

static int aligned_ok(void* p, size_t align, size_t size) {
    if (!p || (uintptr_t)p % align)
        return 0;
    memset(p, 'x', size);
    free(p);
    return 1;
}
static int aligned(void) {
    int ok = 1;
    ok &= aligned_ok(memalign(64, 100), 64, 100);
    void* p = NULL;
    ok &= posix_memalign(&p, 128, 300) == 0 && aligned_ok(p, 128, 300);
    ok &= aligned_ok(aligned_alloc(256, 512), 256, 512);
    ok &= aligned_ok(valloc(10), 4096, 10);
    ok &= aligned_ok(pvalloc(5000), 4096, 8192);
    ok &= aligned_ok(memalign(8, 24), 8, 24);
    char* a = aligned_alloc(64, 64);
    volatile int n = 1;
    a[-n] = 'v';
    release(a);
    say(ok ? "aligned as asked\n" : "NOT aligned as asked\n");
    return ok ? 0 : 1;
}

static int paint(void) {
    unsigned char* p = malloc(64);
    int all = 1;
    for (int i = 0; i < 64; i++)
        all &= p[i] == 0xAA;
    say(all ? "new block painted 0xAA\n" : "new block NOT painted\n");
    unsigned char* z = calloc(8, 8);
    int zero = 1;
    for (int i = 0; i < 64; i++)
        zero &= z[i] == 0;
    say(zero ? "calloc block zero\n" : "calloc block NOT zero\n");
    free(z);
    free(p);
    volatile unsigned char* dangling = p; // held back by the hoard: still readable
    say(dangling[40] == 0xDD ? "freed block painted 0xDD\n" : "freed block NOT painted\n");
    return 0;
}

NOINLINE static void write_after_free(char* p, int at, int len) {
    volatile char* d = p;
    for (int i = 0; i < len; i++)
        d[at + i] = 'w';
}
NOINLINE static char* uaf_block(size_t size) {
    char* p = malloc(size);
    keep(p);
    return p;
}
static int uaf(void) {
    char* a = uaf_block(48);
    release(a);
    char* b = uaf_block(256);
    release(b);
    write_after_free(b, 100, 4);
    // 4 KiB of later releases push b out of a 4 KiB hoard; a (released first) goes too, so a's
    // write comes after, into a block that stays to the end.
    for (int i = 0; i < 20; i++)
        release(uaf_block(256));
    char* c = uaf_block(48);
    release(c);
    write_after_free(c, 10, 1);
    say("uaf done\n");
    return 0;
}

typedef struct holder_s {
    char* data;
    long n;
} holder_t;
NOINLINE static holder_t* make_holder(void) {
    holder_t* h = malloc(sizeof *h);
    h->data = malloc(32);
    h->n = 0;
    return h;
}
static int dangling(void) {
    holder_t* h = make_holder();
    release(h->data);
    h->data += 8; // still points into the block just freed
    kept = (char*)h;
    say("dangling done\n");
    return 0;
}

NOINLINE static void write_past(char* p, int n) {
    volatile char* v = p;
    v[n] = 'g';
}
NOINLINE static int read_past(const char* p, int n) {
    volatile const char* v = p;
    return v[n];
}
NOINLINE static int read_freed(const char* p, int n) {
    volatile const unsigned char* v = (const unsigned char*)p;
    return v[n] + 1000; // not read_past's code: the two must stay two functions
}
NOINLINE static void write_freed(char* p, int n) {
    volatile char* v = p;
    v[n] = 'f';
}
NOINLINE static char* gp_block(size_t size) {
    char* p = malloc(size);
    memset(p, 'k', size);
    return p;
}
static int gp(void) {
    char* a = gp_block(96);
    write_past(a, 96);
    char* b = gp_block(96);
    say_num("read past the end: ", read_past(b, 96));
    char* c = gp_block(64);
    char* d = gp_block(64);
    release(c);
    release(d);
    say_num("read after free: ", read_freed(c, 8));
    write_freed(d, 16);
    release(a);
    release(b);
    say("gp done\n");
    return 0;
}

static int gp_before(void) {
    char* a = gp_block(96);
    write_past(a, -1);
    char* b = gp_block(96);
    say_num("read before the start: ", read_past(b, -4));
    release(a);
    release(b);
    say("gp_before done\n");
    return 0;
}

NOINLINE static char* site_good(void) {
    char* p = malloc(48);
    memset(p, 'g', 48);
    (void)read_past(p, 48);
    return p;
}
NOINLINE static char* site_bad(void) {
    char* p = malloc(48);
    memset(p, 'b', 48);
    ((volatile char*)p)[48] = 'X';
    return p;
}
static int sites_mode(void) {
    char* a = site_good();
    char* b = site_bad();
    release(a);
    release(b);
    say("sites done\n");
    return 0;
}

static int sites_dlopen(void) {
    static char path[4096];
    if (exe_dir(path, sizeof path - 32) != 0)
        return 5;
    strcat(path, "/libplugin.so");
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*overflow)(void) = h ? (int (*)(void))dlsym(h, "plugin_site_overflow") : NULL;
    if (!overflow)
        return 6;
    say(overflow() == 1 ? "sites_dlopen done\n" : "sites_dlopen failed\n");
    return 0;
}

NOINLINE static int read_far(const char* p, long n) {
    volatile const char* v = p;
    return v[n] + 2000; // not read_past's code
}
NOINLINE static char* big_block(void) {
    char* p = malloc(3 * 4096);
    memset(p, 'B', 3 * 4096);
    return p;
}
NOINLINE static void lose_one(void) {
    char* volatile p = malloc(40);
    p[0] = 1;
}
static int kinds(void) {
    lose_one();
    gp();
    char* a = gp_block(96);
    (void)read_far(a, 2 * sysconf(_SC_PAGESIZE));
    release(a);
    char* big = big_block();
    write_past(big, -1);
    release(big);
    scrub_stack();
    say("kinds done\n");
    return 0;
}

static pthread_barrier_t together;
static void* gp_thread(void* arg) {
    (void)arg;
    char* a = gp_block(64);
    char* b = gp_block(64);
    release(b);
    pthread_barrier_wait(&together);
    write_past(a, 64);
    int v = read_freed(b, 0);
    release(a);
    return (void*)(intptr_t)v;
}
static int gp_threads(void) {
    pthread_t t[4];
    pthread_barrier_init(&together, NULL, 4);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, gp_thread, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    say("gp_threads done\n");
    return 0;
}

static sigjmp_buf env;
static void on_segv(int sig) {
    (void)sig;
    siglongjmp(env, 1);
}
NOINLINE static int null_read(void) {
    volatile int* volatile p = NULL;
    return *p;
}
static int gp_own(void) {
    signal(SIGSEGV, on_segv);
    if (!sigsetjmp(env, 1))
        null_read();
    say("own handler ran\n");
    char* a = gp_block(32);
    write_past(a, 32);
    release(a);
    if (!sigsetjmp(env, 1))
        null_read();
    say("own handler ran again\n");
    return 0;
}

static void* churn(void* arg) {
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        char* p = malloc((size_t)(i % 300) + 1);
        memset(p, i, (size_t)(i % 300) + 1);
        keep(p);
        free(p);
    }
    return NULL;
}
static int threads(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    say("threads done\n");
    return 0;
}

int main(int argc, char** argv) {
    const char* m = argc > 1 ? argv[1] : "";
    if (!strcmp(m, "underrun"))
        return underrun();
    if (!strcmp(m, "overrun"))
        return overrun();
    if (!strcmp(m, "realloc"))
        return realloc_mode();
    if (!strcmp(m, "aligned"))
        return aligned();
    if (!strcmp(m, "paint"))
        return paint();
    if (!strcmp(m, "uaf"))
        return uaf();
    if (!strcmp(m, "gp"))
        return gp();
    if (!strcmp(m, "gp_before"))
        return gp_before();
    if (!strcmp(m, "gp_threads"))
        return gp_threads();
    if (!strcmp(m, "gp_own"))
        return gp_own();
    if (!strcmp(m, "dangling"))
        return dangling();
    if (!strcmp(m, "threads"))
        return threads();
    if (!strcmp(m, "kinds"))
        return kinds();
    if (!strcmp(m, "sites"))
        return sites_mode();
    if (!strcmp(m, "sites_dlopen"))
        return sites_dlopen();
    say("usage: check_heap underrun|overrun|realloc|aligned|paint|uaf|dangling|gp|gp_before|"
        "gp_threads|gp_own|threads|sites|sites_dlopen|kinds\n");
    return 2;
}
