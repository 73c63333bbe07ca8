// SPDX-License-Identifier: MIT
// api_c.c - every function of include/heaplens.h from C, one mode per argument; the lines it
// prints are checked by tests/integration/api.sh, under heaplens and without it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <heaplens.h>

#define NOINLINE __attribute__((noinline))
static void* volatile keep[64]; // what the program holds (roots of the scan)

static void say(const char* what, long rc) {
    printf("%s %ld%s%s\n", what, rc, rc < 0 ? " " : "", rc < 0 ? strerrorname_np(errno) : "");
}

// ---------------------------------------------------------------------------------------------
// From static constructors and destructors
// ---------------------------------------------------------------------------------------------
static heaplens_mark_t ctor_mark = -1;
static int ctor_traced = -1;
__attribute__((constructor)) static void early(void) {
    if (!getenv("API_CTOR"))
        return;
    ctor_traced = heaplens_is_traced();
    ctor_mark = heaplens_mark();
    keep[60] = malloc(4321);
}
__attribute__((destructor)) static void late(void) {
    if (!getenv("API_CTOR"))
        return;
    struct heaplens_stats s;
    int rc = heaplens_stats(&s);
    char line[128];
    int n = snprintf(line, sizeof line, "dtor stats %d live>=4321 %d\n", rc,
                     rc == 0 && s.live_bytes >= 4321);
    write(1, line, (size_t)n);
    heaplens_report_since(ctor_mark, 1, HEAPLENS_TEXT);
}

// ---------------------------------------------------------------------------------------------
NOINLINE void* alloc_before_mark(size_t n) {
    return malloc(n);
}
NOINLINE void* alloc_after_mark(size_t n) {
    return malloc(n);
}

static void watch_cb(void* ptr, int event, const void* where, void* arg) {
    Dl_info di;
    const char* fn = where && dladdr((void*)where, &di) && di.dli_sname ? di.dli_sname : "?";
    printf("watch %s %s same=%d where=%s tid_main=%d\n", (const char*)arg,
           event == HEAPLENS_FREED ? "FREED" : event == HEAPLENS_RESIZED ? "RESIZED" : "?",
           ptr == keep[0] || ptr == keep[1], fn, (int)syscall(SYS_gettid) == getpid());
}
NOINLINE void release_watched(void* p) {
    free(p);
}
NOINLINE void* resize_watched(void* p, size_t n) {
    return realloc(p, n);
}

static volatile int step;
static void threshold_cb(int which, size_t bytes, void* arg) {
    (void)arg;
    printf("threshold %s %zu at step %d main_thread=%d\n",
           which == HEAPLENS_BLOCK ? "BLOCK" : which == HEAPLENS_DELTA ? "DELTA" : "?", bytes, step,
           (int)syscall(SYS_gettid) == getpid());
    keep[50] = malloc(1 << 21); // a callback's own crossing calls nothing again
    free(keep[50]);
}

// Every function once, with the results printed: the same lines but for the results with and
// without heaplens.
static int mode_all(void) {
    say("is_traced", heaplens_is_traced());
    say("pause", heaplens_pause());
    keep[2] = malloc(10);
    say("resume", heaplens_resume());
    heaplens_mark_t m = heaplens_mark();
    say("mark>0", m > 0 ? 0 : m);
    keep[3] = malloc(20);
    say("report_since", heaplens_report_since(m, open("/dev/null", O_WRONLY), HEAPLENS_JSON));
    say("report", heaplens_report(open("/dev/null", O_WRONLY), HEAPLENS_TEXT));
    struct heaplens_leak_counts lc;
    int rc = heaplens_leak_check(&lc);
    say("leak_check", rc == 0 ? 0 : errno == ENOSYS ? -1 : -2);
    rc = heaplens_leak_check_new(&lc);
    say("leak_check_new", rc == 0 ? 0 : errno == ENOSYS ? -1 : -2);
    say("ignore", heaplens_ignore(keep[3]));
    keep[0] = malloc(30);
    say("watch", heaplens_watch(keep[0], watch_cb, "all"));
    free(keep[0]);
    say("tag", heaplens_tag(1, 2));
    say("untag", heaplens_untag());
    say("set_thresholds", heaplens_set_thresholds(0, 0, 0, NULL, NULL));
    struct heaplens_stats s;
    say("stats", heaplens_stats(&s));
    unsigned sum = 0; // the program's own work, the same either way
    for (int i = 0; i < 1000; i++) {
        unsigned char* p = malloc(1 + i % 100);
        p[0] = (unsigned char)i;
        sum += p[0];
        free(p);
    }
    printf("work %u\n", sum);
    return 0;
}

// Only what is allocated after the mark, and still live, is in report_since.
static int mode_since(void) {
    keep[0] = alloc_before_mark(1111);
    heaplens_mark_t m = heaplens_mark();
    keep[1] = alloc_after_mark(2222);
    keep[2] = alloc_after_mark(3333);
    keep[4] = alloc_after_mark(100); // a small block: the direct map's two-word label
    void* gone = alloc_after_mark(4444);
    free(gone);
    fflush(stdout);
    say("report_since", heaplens_report_since(m, 1, HEAPLENS_JSON));
    // A mark from long ago: 40000 marks later it has expired, and a block from before the
    // rebases is not mistaken for a recent one.
    for (int i = 0; i < 40000; i++)
        heaplens_mark();
    heaplens_mark_t last = heaplens_mark();
    keep[3] = alloc_after_mark(5555);
    int rc = heaplens_report_since(m, 1, HEAPLENS_JSON);
    fflush(stdout);
    say("stale", rc);
    say("report_since_last", heaplens_report_since(last, 1, HEAPLENS_JSON));
    fflush(stdout);
    say("report_all", heaplens_report(1, HEAPLENS_TEXT));
    return 0;
}

static int mode_watch(void) {
    keep[0] = malloc(64);
    say("watch", heaplens_watch(keep[0], watch_cb, "free"));
    release_watched(keep[0]);
    keep[1] = malloc(32);
    say("watch", heaplens_watch(keep[1], watch_cb, "realloc"));
    keep[1] = resize_watched(keep[1], 100000);
    free(keep[1]); // the watch ended with the old block
    keep[2] = malloc(48);
    say("watch", heaplens_watch(keep[2], watch_cb, "removed"));
    say("unwatch", heaplens_watch(keep[2], NULL, NULL));
    free(keep[2]);
    int on_stack;
    say("watch_not_a_block", heaplens_watch(&on_stack, watch_cb, "stack"));
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int mode_thresholds(void) {
    printf("start\n"); // stdio's buffer, before the thresholds
    say("set", heaplens_set_thresholds(1 << 20, 4 << 20, 5000000000ull, threshold_cb, NULL));
    step = 1, keep[0] = malloc(512 << 10); // 0.5 MiB: nothing
    step = 2, keep[1] = malloc(1 << 20);   // a block of 1 MiB: BLOCK; 1.5 MiB grown
    for (int i = 0; i < 12; i++)           // 256 KiB each: 4 MiB grown at the 10th
        step = 3 + i, keep[2 + i] = malloc(256 << 10);
    for (int i = 0; i < 14; i++)
        free(keep[i]);
    // A window of 100 ms: 3 MiB, then after it passed 2 MiB (no call), then 2 MiB more within
    // it (the call: 4 MiB since the window began).
    say("set", heaplens_set_thresholds(0, 4 << 20, 100000000ull, threshold_cb, NULL));
    step = 20, keep[0] = malloc(3 << 20);
    sleep_ms(300);
    step = 21, keep[1] = malloc(2 << 20);
    step = 22, keep[2] = malloc(2 << 20);
    say("off", heaplens_set_thresholds(0, 0, 0, NULL, NULL));
    step = 23, keep[3] = malloc(8 << 20);
    for (int i = 0; i < 4; i++)
        free(keep[i]);
    return 0;
}

static int mode_stats(void) {
    printf("start\n");
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(1000);
    for (int i = 0; i < 5; i++)
        free(keep[i]);
    struct heaplens_stats s;
    int rc = heaplens_stats(&s);
    printf("stats %d live_bytes %zu live_blocks %zu peak_bytes %zu allocations %llu frees %llu "
           "thread_allocations %llu thread_frees %llu\n",
           rc, s.live_bytes, s.live_blocks, s.peak_bytes, (unsigned long long)s.allocations,
           (unsigned long long)s.frees, (unsigned long long)s.thread_allocations,
           (unsigned long long)s.thread_frees);
    fflush(stdout);
    for (int i = 5; i < 10; i++)
        free(keep[i]);
    rc = heaplens_stats(&s);
    // Written without stdio: the last state of the heap before exit, as the report will say it.
    char line[256];
    int n = snprintf(line, sizeof line,
                     "final %d live_bytes %zu live_blocks %zu peak_bytes %zu peak_blocks %zu "
                     "allocations %llu frees %llu bytes_allocated %llu peak_time_ns %lld\n",
                     rc, s.live_bytes, s.live_blocks, s.peak_bytes, s.peak_blocks,
                     (unsigned long long)s.allocations, (unsigned long long)s.frees,
                     (unsigned long long)s.bytes_allocated, (long long)s.peak_time_ns);
    write(1, line, (size_t)n);
    _exit(0); // nothing allocates after
}

static void* tagged_thread(void* arg) {
    (void)arg;
    heaplens_tag(8, 1);
    keep[40] = malloc(10);
    keep[41] = malloc(10);
    heaplens_untag();
    keep[42] = malloc(10);
    return NULL;
}

static int mode_tags(void) {
    pthread_t th;
    pthread_create(&th, NULL, tagged_thread, NULL);
    pthread_join(th, NULL);
    printf("start\n"); // stdio's buffer, untagged
    say("tag", heaplens_tag(7, 42));
    for (int i = 0; i < 3; i++)
        keep[i] = malloc(100);
    keep[3] = malloc(1000); // still tagged 7/42
    say("untag", heaplens_untag());
    keep[4] = malloc(50);
    return 0;
}

static int mode_pause(void) {
    say("pause", heaplens_pause());
    for (int i = 0; i < 5; i++)
        keep[i] = malloc(7001); // leaked, unseen
    say("resume", heaplens_resume());
    keep[5] = malloc(7002);
    free(keep[0]); // a release of a paused block: not an error
    for (int i = 0; i < 6; i++)
        keep[i] = NULL; // all lost
    say("resume_unpaused", heaplens_resume());
    return 0;
}

// One site for both: the first block is ignored then released, the second leaks (reported).
NOINLINE void* make99(void) {
    return malloc(99);
}

static int mode_ignore(void) {
    keep[0] = malloc(77);
    keep[1] = malloc(555); // a header block, when guards are on
    say("ignore", heaplens_ignore(keep[0]));
    say("ignore", heaplens_ignore(keep[1]));
    keep[2] = malloc(55);
    int local;
    say("ignore_not_a_block", heaplens_ignore(&local));
    static volatile int rounds = 2, first; // volatile: no copy of the loop's first round
    for (first = 1; rounds-- > 0; first = 0) { // one call site, one stack
        keep[4] = make99();
        if (first) {
            heaplens_ignore(keep[4]);
            free(keep[4]);
        }
    }
    keep[0] = keep[1] = keep[2] = keep[4] = NULL; // all lost; 55 + 99 bytes reported
    return 0;
}

static NOINLINE void scrub(void);

// An ignored block is a root, as LeakSanitizer's ignored objects are: the block only it points
// to is still reachable, not lost.
static NOINLINE void make_ignored_holder(void) {
    void** holder = malloc(40);
    holder[0] = malloc(66);
    heaplens_ignore(holder);
    __asm__ volatile("" : : "r"(holder) : "memory");
}

static int mode_ignore_root(void) {
    make_ignored_holder();
    scrub();
    return 0;
}

#define NTHREADS 8
static void* api_thread(void* arg) {
    long ok = 0, i = (long)arg;
    for (int k = 0; k < 200; k++) {
        ok += heaplens_is_traced() == 1;
        ok += heaplens_pause() == 0;
        void* p = malloc(16);
        ok += heaplens_resume() == 0;
        heaplens_mark_t m = heaplens_mark();
        ok += m > 0;
        ok += heaplens_tag((unsigned)i, (unsigned)k) == 0;
        void* q = malloc(32 + (size_t)k);
        ok += heaplens_watch(q, watch_cb, "thread") == 0 && heaplens_watch(q, NULL, NULL) == 0;
        ok += heaplens_ignore(q) == 0;
        ok += heaplens_untag() == 0;
        struct heaplens_stats s;
        ok += heaplens_stats(&s) == 0 && s.thread_allocations >= (uint64_t)k + 1;
        if (k % 50 == 0) {
            int fd = open("/dev/null", O_WRONLY);
            ok += heaplens_report_since(m, fd, HEAPLENS_JSON) == 0;
            close(fd);
        } else {
            ok++;
        }
        free(p);
        free(q);
    }
    return (void*)ok;
}

static int mode_threads(void) {
    pthread_t th[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, api_thread, (void*)i);
    long total = 0;
    for (int i = 0; i < NTHREADS; i++) {
        void* r;
        pthread_join(th[i], &r);
        total += (long)r;
    }
    printf("threads ok %ld of %d\n", total, NTHREADS * 200 * 10);
    return 0;
}

static int mode_fork(void) {
    keep[0] = malloc(1234);
    void* ignored = malloc(4242);
    heaplens_ignore(ignored); // in the child's trace too
    ignored = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        say("child is_traced", heaplens_is_traced());
        heaplens_mark_t m = heaplens_mark();
        keep[1] = alloc_after_mark(8888);
        fflush(stdout);
        say("child report_since", heaplens_report_since(m, 1, HEAPLENS_JSON));
        struct heaplens_stats s = {0};
        int rc = heaplens_stats(&s);
        printf("child stats %d live_bytes>=14364 %d allocations %llu\n", rc,
               rc == 0 && s.live_bytes >= 1234 + 4242 + 8888, (unsigned long long)s.allocations);
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    say("parent is_traced", heaplens_is_traced());
    return 0;
}

// The agent loaded into the running process as `heaplens attach` does (dlopen, then its start
// entry where the agent has one): the library finds it then.
static int mode_attach(void) {
    say("before is_traced", heaplens_is_traced());
    say("before mark", heaplens_mark());
    void* agent = dlopen(getenv("API_AGENT"), RTLD_NOW | RTLD_LOCAL);
    int (*start)(const char*) = agent ? (int (*)(const char*))dlsym(agent, "heaplens_attach_start")
                                      : NULL;
    if (start)
        start(getenv("HEAPLENS_OPTIONS"));
    printf("loaded %d\n", agent != NULL);
    say("after is_traced", heaplens_is_traced());
    heaplens_mark_t m = heaplens_mark();
    say("after mark>0", m > 0 ? 0 : m);
    keep[0] = alloc_after_mark(6666);
    fflush(stdout);
    say("after report_since", heaplens_report_since(m, 1, HEAPLENS_JSON));
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Leak checks mid-run: a state with every kind, checked, changed, checked again; then the exit
// scan of the same state (api.sh compares). Lost blocks are made in frames that are gone and
// whose stack is scrubbed, so no stale copy of their address is left where the scan looks.
// ---------------------------------------------------------------------------------------------
struct lnode {
    struct lnode* child;
    char pad[24];
};

static NOINLINE void scrub(void) {
    volatile char wipe[4096];
    memset((char*)wipe, 0, sizeof wipe);
}
static NOINLINE void lose(size_t size) {
    char* p = malloc(size);
    memset(p, 7, size);
    __asm__ volatile("" : : "r"(p) : "memory");
}
static NOINLINE void lose_tree(void) { // a lost head holding the only pointer to its child
    struct lnode* head = malloc(sizeof *head);
    head->child = malloc(48);
    __asm__ volatile("" : : "r"(head) : "memory");
}
static void say_counts(const char* what, int rc, const struct heaplens_leak_counts* c) {
    printf("%s %d d=%zu/%zu i=%zu/%zu p=%zu/%zu\n", what, rc, c->definitely_lost.bytes,
           c->definitely_lost.blocks, c->indirectly_lost.bytes, c->indirectly_lost.blocks,
           c->possibly_lost.bytes, c->possibly_lost.blocks);
}

static int mode_leaks(void) {
    struct heaplens_leak_counts c;
    keep[0] = malloc(64); // still reachable
    keep[1] = malloc(80); // still reachable, then released
    lose(100);
    lose_tree();
    scrub();
    memset(&c, 0, sizeof c);
    say_counts("check1", heaplens_leak_check(&c), &c);
    free(keep[1]);
    keep[1] = NULL;
    lose(300);
    scrub();
    memset(&c, 0, sizeof c);
    say_counts("check2", heaplens_leak_check(&c), &c);
    lose(200); // the only block new to the next check that is lost
    keep[2] = malloc(24);
    scrub();
    memset(&c, 0, sizeof c);
    say_counts("new", heaplens_leak_check_new(&c), &c);
    scrub();
    fflush(stdout);
    return 0;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "all";
    if (ctor_traced >= 0)
        printf("ctor is_traced %d mark>0 %d\n", ctor_traced, ctor_mark > 0);
    if (!strcmp(mode, "all"))
        return mode_all();
    if (!strcmp(mode, "since"))
        return mode_since();
    if (!strcmp(mode, "watch"))
        return mode_watch();
    if (!strcmp(mode, "thresholds"))
        return mode_thresholds();
    if (!strcmp(mode, "stats"))
        return mode_stats();
    if (!strcmp(mode, "tags"))
        return mode_tags();
    if (!strcmp(mode, "pause"))
        return mode_pause();
    if (!strcmp(mode, "ignore"))
        return mode_ignore();
    if (!strcmp(mode, "threads"))
        return mode_threads();
    if (!strcmp(mode, "fork"))
        return mode_fork();
    if (!strcmp(mode, "attach"))
        return mode_attach();
    if (!strcmp(mode, "leaks"))
        return mode_leaks();
    if (!strcmp(mode, "ignore_root"))
        return mode_ignore_root();
    fprintf(stderr, "api_c: unknown mode %s\n", mode);
    return 2;
}
