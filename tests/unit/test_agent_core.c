// SPDX-License-Identifier: MIT
// test_agent_core.c - the agent driven from a test, without LD_PRELOAD: a child process loads
// libheaplens.so with dlopen (its hooks then interpose nothing) and calls the agent's own malloc
// and free, which run the path every hooked call runs (record.c -> the thread's ring -> the
// writer thread -> chunk.c -> a sink), then its _exit, which finishes the trace (drain, the
// reachability scan of the child's memory, END). The parent reads what arrived with the
// analyzer's reader (model_load: reader.c, decode.c) and checks it number for number: from a
// file sink, and from the socket sink into a UNIX listener the parent holds. (Loaded after libc,
// the agent says once on stderr that libc's calls to its own malloc are not seen: true here.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/analyze/model.h"
#include "../../src/common/format.h"
#include "harness.h"

static const char* agent_path;
static char dir[64];

#define KEPT 10
#define LOST 5
#define PAIRS 100000 // more events than a ring holds: the program waits for the writer
#define BLOCK 48
#define STATUS 7
void* kept[KEPT]; // reachable: this global points at each (extern: its stores are kept)
static volatile uintptr_t lost[LOST];  // lost: only disguised copies remain
#define DISGUISE ((uintptr_t)0x5a5a5a5a5a5a5a5aull)

typedef void* (*malloc_fn)(size_t);
typedef void (*free_fn)(void*);
typedef void (*exit_fn)(int);

static __attribute__((noinline)) void make_lost(malloc_fn m) {
    for (int i = 0; i < LOST; i++)
        lost[i] = (uintptr_t)m(BLOCK) ^ DISGUISE;
}

// The child: the agent, its calls, its end. Never returns.
static void run_child(const char* output, const char* remote) {
    setenv("HEAPLENS_OUTPUT", output, 1);
    setenv("HEAPLENS_SCAN", "1", 1);
    unsetenv("HEAPLENS_SESSION");
    unsetenv("HEAPLENS_DISABLE");
    if (remote)
        setenv("HEAPLENS_REMOTE", remote, 1);
    else
        unsetenv("HEAPLENS_REMOTE");
    void* agent = dlopen(agent_path, RTLD_NOW | RTLD_LOCAL);
    if (!agent)
        _exit(100);
    malloc_fn m = (malloc_fn)dlsym(agent, "malloc");
    free_fn f = (free_fn)dlsym(agent, "free");
    exit_fn x = (exit_fn)dlsym(agent, "_exit");
    if (!m || !f || !x)
        _exit(101);
    for (int i = 0; i < KEPT; i++)
        kept[i] = m(BLOCK);
    make_lost(m);
    for (int i = 0; i < PAIRS; i++)
        f(m((size_t)(i % 500) + 1));
    x(STATUS);
    _exit(102);
}

static void check_trace(const char* path) {
    model_t m;
    ASSERT_TRUE(model_load(&m, path) == 0);
    EXPECT_EQ_U(m.allocations, KEPT + LOST + PAIRS);
    EXPECT_EQ_U(m.frees, PAIRS);
    EXPECT_EQ_U(m.heap_blocks, KEPT + LOST);
    EXPECT_EQ_U(m.heap_bytes, (KEPT + LOST) * BLOCK);
    EXPECT_EQ_U(m.has_end, 1);
    EXPECT_EQ_U(m.end_how, HL_END_EXIT);
    EXPECT_EQ_U(m.end_value, STATUS);
    EXPECT_EQ_U(m.is_scanned, 1);
    EXPECT_EQ_U(m.leaks[HL_LEAK_REACHABLE].bytes, KEPT * BLOCK);
    EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].bytes, LOST * BLOCK);
    EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].blocks, LOST);
    model_free(&m);
}

// The child runs in a fresh image of this program: one forked from the test would inherit the
// parent's stack and heap, whose stale words (earlier tests' buffers and strings) can point
// into the blocks it makes at the same addresses, as memcheck would also find them.
static void exec_child(const char* output, const char* remote) {
    execl("/proc/self/exe", "test_agent_core", "--child", output, remote ? remote : "", agent_path,
          (char*)NULL);
    _exit(103);
}

static int wait_child(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(file_sink_trace_arrives_whole) {
    char path[128];
    snprintf(path, sizeof path, "%s/file.hl", dir);
    pid_t pid = fork();
    if (pid == 0)
        exec_child(path, NULL);
    EXPECT_EQ_I(wait_child(pid), STATUS);
    check_trace(path);
    unlink(path);
}

TEST(socket_sink_trace_arrives_whole) {
    char sock[128], got[128], remote[140], unused[128];
    snprintf(sock, sizeof sock, "%s/collector.sock", dir);
    snprintf(got, sizeof got, "%s/received.hl", dir);
    snprintf(unused, sizeof unused, "%s/local.hl", dir);
    snprintf(remote, sizeof remote, "unix:%s", sock);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, sock);
    ASSERT_TRUE(l >= 0 && bind(l, (struct sockaddr*)&a, sizeof a) == 0 && listen(l, 1) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(l);
        exec_child(unused, remote);
    }
    int c = accept(l, NULL, NULL);
    FILE* out = fopen(got, "wb");
    ASSERT_TRUE(c >= 0 && out);
    char buf[65536];
    ssize_t n;
    while ((n = read(c, buf, sizeof buf)) > 0)
        fwrite(buf, 1, (size_t)n, out);
    fclose(out);
    close(c);
    close(l);
    EXPECT_EQ_I(wait_child(pid), STATUS);
    EXPECT_TRUE(access(unused, F_OK) != 0); // nothing written locally
    check_trace(got);
    unlink(got);
    unlink(sock);
}

// Sessions: the agent loaded after libc is started and stopped by its attach entry points, three
// times in one process. Each session is a trace of its own, with the calls made through libc's
// malloc and free (routed to the agent) during it, and none of those before or between; a block
// made before a session and released in it is no error; a block held only from a block older
// than the session is not lost. It runs first, in a child of a process that has released
// nothing yet: the heap outside the agent's blocks is read as roots, and memory released
// earlier would still hold stale copies of the addresses the child's blocks get.
#define SESSIONS 3
#define LOST_SESSION_BLOCK BLOCK
static __attribute__((noinline)) void make_lost_session(void) {
    for (int i = 0; i < LOST; i++)
        lost[i] = (uintptr_t)malloc(LOST_SESSION_BLOCK) ^ DISGUISE;
}
static void run_sessions(void) {
    unsetenv("HEAPLENS_SESSION");
    void* before = malloc(BLOCK);
    void* agent = dlopen(agent_path, RTLD_NOW | RTLD_LOCAL);
    int (*start)(const char*) = agent ? (int (*)(const char*))dlsym(agent, "heaplens_attach_start") : NULL;
    int (*stop)(void) = agent ? (int (*)(void))dlsym(agent, "heaplens_attach_stop") : NULL;
    if (!start || !stop)
        _exit(101);
    void** holder = malloc(sizeof(void*)); // older than every session
    for (int s = 0; s < SESSIONS; s++) {
        char opts[256];
        snprintf(opts, sizeof opts, "output=%s/session%d.hl", dir, s);
        if (start(opts) != 0 || start(opts) == 0) // a second start while on is refused
            _exit(102);
        make_lost_session();
        for (int i = 0; i <= s; i++)
            kept[i] = malloc(BLOCK);
        *holder = malloc(BLOCK + 1); // reachable only through the block made before
        if (s == 0)
            free(before);
        if (stop() != 0 || stop() == 0)
            _exit(103);
        for (int i = 0; i < PAIRS / 100; i++) // between sessions: not traced
            free(malloc(BLOCK));
    }
    _exit(STATUS);
}

TEST(sessions_start_stop_restart) {
    pid_t pid = fork();
    if (pid == 0)
        run_sessions();
    EXPECT_EQ_I(wait_child(pid), STATUS);
    for (int s = 0; s < SESSIONS; s++) {
        char path[128];
        snprintf(path, sizeof path, "%s/session%d.hl", dir, s);
        model_t m;
        ASSERT_TRUE(model_load(&m, path) == 0);
        EXPECT_EQ_U(m.has_end, 1);
        EXPECT_EQ_U(m.end_how, HL_END_DETACH);
        EXPECT_EQ_U(m.is_scanned, 1);
        EXPECT_EQ_U(m.allocations, LOST + (uint64_t)s + 1 + 1);
        EXPECT_EQ_U(m.frees, 0); // `before`, unknown: passed through, not an event of this trace
        EXPECT_EQ_U(m.nerrors, 0);
        EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].blocks, LOST);
        EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].bytes, LOST * LOST_SESSION_BLOCK);
        EXPECT_EQ_U(m.leaks[HL_LEAK_REACHABLE].blocks, (uint64_t)s + 1 + 1);
        model_free(&m);
        unlink(path);
    }
}

int main(int argc, char** argv) {
    if (argc >= 2 && strcmp(argv[1], "--child") == 0) { // exec_child's image, never the tests
        if (argc != 5)
            _exit(104);
        agent_path = argv[4];
        run_child(argv[2], argv[3][0] ? argv[3] : NULL);
    }
    // The agent built beside this test (BUILD/tests/test_agent_core -> BUILD/libheaplens.so).
    static char agent[4096];
    snprintf(agent, sizeof agent, "%s", argv[0]);
    char* slash = strrchr(agent, '/');
    snprintf(slash ? slash + 1 : agent, sizeof agent - (size_t)(slash ? slash + 1 - agent : 0),
             "../libheaplens.so");
    agent_path = agent;
    strcpy(dir, "/tmp/heaplens-core.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    RUN_TEST(sessions_start_stop_restart);
    RUN_TEST(file_sink_trace_arrives_whole);
    RUN_TEST(socket_sink_trace_arrives_whole);
    rmdir(dir);
    return TEST_SUMMARY();
}
