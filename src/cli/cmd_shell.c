// SPDX-License-Identifier: MIT
// cmd_shell.c - heaplens shell PID: talk to a traced process while it runs, through its control
// socket (src/agent/control.c). The process answers small things (it scans, marks, flushes);
// everything a user reads is made here, from its trace file as far as it is written, by the
// same code as `heaplens report`, so the shell's views are report's views.
//
// Interactive on a terminal (a prompt; `help` lists the commands), scriptable from stdin.
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../analyze/idmap.h"
#include "../analyze/model.h"
#include "../analyze/symbols.h"
#include "cli.h"
#include "lineedit.h"
#include "remote.h"

#define SHELL_LINE 4096    // a command line, and an answer from the process
#define SHELL_TOP_DEFAULT 10

typedef struct shell_s {
    long pid;
    FILE* to;   // the control socket, both ways
    FILE* from;
    char trace[PATH_MAX]; // what the shell reads: /proc/PID/fd/N, or the trace's path
    cli_report_opts_t report;
    int64_t last_scan_ns; // the previous scan's time (-1: none yet)
    const char* collector; // the collector relaying to the process (unix:PATH, tcp:HOST:PORT)
} shell_t;

void cli_usage_shell(FILE* out) {
    fputs("usage: heaplens shell [options] PID\n"
          "       heaplens shell [options] ADDR [PID]\n"
          "Talk to a process heaplens traces while it runs: scan it for leaks, see its biggest\n"
          "call sites, mark a moment and see what is still live from after it. Commands come\n"
          "from the terminal (a prompt) or from standard input, one per line. With ADDR\n"
          "(unix:PATH or tcp:HOST:PORT), through the `heaplens server` there, to a process that\n"
          "sends it its trace (run --remote ADDR), on this host or another; the reports are made\n"
          "here, from the trace the collector writes. ADDR alone lists those processes.\n"
          "shell options:\n"
          "  --socket PATH            the process's control socket (default:\n"
          "                           $TMPDIR/heaplens-UID/ctl.PID, TMPDIR defaulting to /tmp)\n"
          "  --token FILE             the collector's secret (its --token), for ADDR over TCP\n"
          "  --show-leak-kinds=LIST   as report's, for `leaks`\n"
          "  --suppressions=FILE      as report's\n"
          "  --sysroot DIR, --debug-dir DIR   as report's\n"
          "  -h, --help               this help\n"
          "commands: type `help` in the shell.\n",
          out);
}

static const char shell_help[] =
    "status                 the process, its heap now (totals, peak), its trace\n"
    "top [N] [sort KEY]     the N biggest call sites (KEY: allocations, bytes, peak, leaked,\n"
    "                       temporary)\n"
    "leaks [new|leak]       scan the running process for leaks now; the leak records (new:\n"
    "                       only of the blocks made since the previous scan; leak: only of\n"
    "                       those earlier scans found lost: still lost, or reachable again)\n"
    "mark                   mark this moment: prints the mark's number\n"
    "since MARK [N]         what is still live from after MARK, by call site\n"
    "dump FILE              the report of now: FILE.html a page, anything else JSON\n"
    "grow [SECONDS]         call sites whose live bytes rose in each quarter of the last\n"
    "                       SECONDS (default 60): the leaks of a long-running process\n"
    "stop                   end the trace now (as at exit: scanned); the process runs on\n"
    "start                  after stop: a new trace, beginning with the blocks live now\n"
    "reset                  stop, then start\n"
    "depth N                frames per stack: a new trace (reset) with N\n"
    "watch [ADDR]           say when the live block at ADDR (hex) is released or resized,\n"
    "                       with where; alone: what watched blocks went through\n"
    "flush                  write everything the process has recorded to its trace\n"
    "help                   this list\n"
    "quit                   leave (the process runs on)\n";

void cli_control_socket(char* out, size_t cap, long pid) {
    const char* tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/' || strlen(tmp) + 32 > sizeof(((struct sockaddr_un*)0)->sun_path) - 16)
        tmp = "/tmp";
    snprintf(out, cap, "%s/heaplens-%u/ctl.%ld", tmp, (unsigned)geteuid(), pid);
}

// Sends a command, reads its one-line answer into out: 0 for "ok ...", 1 for "error ..." (the
// rest printed), -1 when the process is gone (said).
static int ask(shell_t* s, const char* cmd, char* out, size_t cap) {
    if (fprintf(s->to, "%s\n", cmd) < 0 || fflush(s->to) != 0 || !fgets(out, (int)cap, s->from)) {
        cli_error("process %ld: the connection ended (the process exited?)", s->pid);
        return -1;
    }
    out[strcspn(out, "\r\n")] = 0;
    if (!strncmp(out, "ok", 2))
        return 0;
    fprintf(stdout, "%s\n", !strncmp(out, "error ", 6) ? out + 6 : out);
    return 1;
}

// "key=value" in an answer: the value up to the next space (the trace's path is last and may
// hold spaces: key "trace" takes the rest).
static int field(const char* answer, const char* key, char* out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char* at = strstr(answer, pat);
    if (!at)
        return -1;
    at += strlen(pat);
    size_t n = strcmp(key, "trace") == 0 ? strlen(at) : strcspn(at, " ");
    if (n >= cap)
        return -1;
    memcpy(out, at, n);
    out[n] = 0;
    return 0;
}

static int flush_trace(shell_t* s) {
    char ans[SHELL_LINE];
    return ask(s, "flush", ans, sizeof ans) == 0 ? 0 : -1;
}

// Runs `heaplens report` with these arguments and the trace; its views print on stdout.
static int run_report(shell_t* s, const char* const* args, int nargs) {
    char* argv[32];
    int argc = 0;
    argv[argc++] = "report";
    for (int i = 0; i < nargs && argc < 24; i++)
        argv[argc++] = (char*)args[i];
    if (s->report.sysroot) {
        argv[argc++] = "--sysroot";
        argv[argc++] = (char*)s->report.sysroot;
    }
    for (int i = 0; i < s->report.ndebug_dirs && argc < 30; i++) {
        argv[argc++] = "--debug-dir";
        argv[argc++] = (char*)s->report.debug_dirs[i];
    }
    argv[argc++] = s->trace;
    argv[argc] = NULL;
    int rc = cmd_report(argc, argv);
    fflush(stdout);
    return rc;
}

static void cmd_status(shell_t* s) {
    // The heap's numbers are the summary's, from the trace: counting the live table would walk
    // every block with the writer held (100 ms at a million).
    char ans[SHELL_LINE], threads[32], tracing[32], where[PATH_MAX + 1100];
    if (ask(s, "status", ans, sizeof ans) != 0)
        return;
    if (field(ans, "threads", threads, sizeof threads) ||
        field(ans, "tracing", tracing, sizeof tracing) || field(ans, "trace", where, sizeof where))
        return;
    int is_on = !strcmp(tracing, "on");
    if (s->collector) // the trace as the collector writes it, where this shell reads it
        snprintf(where, sizeof where, "%s (from %s)", s->trace, s->collector);
    printf("process %ld: %s threads, %s %s\n", s->pid, threads,
           is_on ? "trace" : "tracing stopped; its last trace", where[0] ? where : "(none yet)");
    if (!is_on || flush_trace(s) == 0)
        run_report(s, (const char*[]){"--summary"}, 1);
}

static void cmd_top(shell_t* s, char* args) {
    const char* n = "10";
    const char* key = "bytes";
    for (char* w = strtok(args, " "); w; w = strtok(NULL, " ")) {
        if (!strcmp(w, "sort")) {
            char* k = strtok(NULL, " ");
            if (!k) {
                printf("top: sort what? (allocations, bytes, peak, leaked, temporary)\n");
                return;
            }
            key = k;
        } else {
            n = w;
        }
    }
    if (flush_trace(s) == 0)
        run_report(s, (const char*[]){"--top", n, "--sort", key}, 4);
}

static void cmd_leaks(shell_t* s, char* args) {
    char ans[SHELL_LINE], when[32], before[32], gone[32];
    int only_new = !strcmp(args, "new"), only_lost = !strcmp(args, "leak");
    if (args[0] && strcmp(args, "all") != 0 && !only_new && !only_lost) {
        printf("leaks: expected `leaks`, `leaks all`, `leaks new` or `leaks leak`, got '%s'\n",
               args);
        return;
    }
    if (ask(s, only_new ? "scan new" : only_lost ? "scan leak" : "scan", ans, sizeof ans) != 0 ||
        field(ans, "time", when, sizeof when) != 0)
        return;
    s->last_scan_ns = strtoll(when, NULL, 10);
    cli_trace_t t;
    if (cli_trace_open(&t, s->trace, &s->report) != 0)
        return;
    report_opts_t ro = {
        // `new` and `leak`: the other blocks were judged too, but are not listed (not
        // "unscanned")
        .show_kinds = only_new || only_lost ? s->report.show_kinds & ~(1u << HL_KIND_UNSCANNED)
                                            : s->report.show_kinds,
        .max_records = 25,
        .supp = t.supp,
        .trace_path = s->trace,
        .exit_status = -1,
        .is_live = 1,
    };
    printf("scan at %.3f ms%s\n", (double)s->last_scan_ns / 1e6,
           only_new ? ": the blocks made since the previous scan"
           : only_lost ? ": the blocks earlier scans found lost, looked at again"
                       : "");
    if (only_lost && field(ans, "lost_before", before, sizeof before) == 0 &&
        field(ans, "lost_gone", gone, sizeof gone) == 0)
        printf("%s found lost before, %s of them released since\n", before, gone);
    report_text(stdout, t.ctx, &ro);
    fflush(stdout);
    cli_trace_close(&t);
}

static void cmd_mark(shell_t* s) {
    char ans[SHELL_LINE], n[32], when[32];
    if (ask(s, "mark", ans, sizeof ans) != 0 || field(ans, "mark", n, sizeof n) ||
        field(ans, "time", when, sizeof when))
        return;
    printf("mark %s at %.3f ms\n", n, (double)strtoll(when, NULL, 10) / 1e6);
}

static void cmd_since(shell_t* s, char* args) {
    char* mark = strtok(args, " ");
    char* n = strtok(NULL, " ");
    if (!mark) {
        printf("since: which mark? (`mark` makes one)\n");
        return;
    }
    char cmd[64], ans[SHELL_LINE], when[32], from[48];
    snprintf(cmd, sizeof cmd, "marktime %s", mark);
    if (ask(s, cmd, ans, sizeof ans) != 0 || field(ans, "time", when, sizeof when))
        return;
    snprintf(from, sizeof from, "%sns", when);
    if (flush_trace(s) == 0)
        run_report(s, (const char*[]){"--from", from, "--top", n ? n : "10", "--sort", "leaked"},
                   6);
}

#define SHELL_GROW_DEFAULT_S 60

static void cmd_grow(shell_t* s, char* args) {
    char* end;
    double seconds = args[0] ? strtod(args, &end) : SHELL_GROW_DEFAULT_S;
    if (args[0] && (*end || seconds <= 0)) {
        printf("grow: expected seconds, got '%s'\n", args);
        return;
    }
    char ans[SHELL_LINE], when[32], from[48];
    if (ask(s, "status", ans, sizeof ans) != 0 || field(ans, "time", when, sizeof when))
        return;
    long long now = strtoll(when, NULL, 10), start = now - (long long)(seconds * 1e9);
    snprintf(from, sizeof from, "%lldns", start > 0 ? start : 0);
    if (flush_trace(s) == 0)
        run_report(s, (const char*[]){"--growth", "--from", from}, 3);
}

static void cmd_dump(shell_t* s, char* args) {
    if (!args[0]) {
        printf("dump: to which file? (FILE.html: a page; else JSON)\n");
        return;
    }
    size_t n = strlen(args);
    int is_html = n > 5 && !strcmp(args + n - 5, ".html");
    if (flush_trace(s) == 0 &&
        run_report(s, (const char*[]){"-q", is_html ? "--html" : "--json", args}, 3) == 0)
        printf("wrote %s\n", args);
}

int cli_control_ask(long pid, const char* cmd, char* out, size_t cap) {
    char path[PATH_MAX];
    cli_control_socket(path, sizeof path, pid);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return -1;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    FILE* f = NULL;
    int rc = -1;
    if (connect(fd, (struct sockaddr*)&a, sizeof a) == 0 && (f = fdopen(fd, "r+")) != NULL) {
        fd = -1;
        if (fprintf(f, "%s\nquit\n", cmd) > 0 && fflush(f) == 0 && fgets(out, (int)cap, f)) {
            out[strcspn(out, "\r\n")] = 0;
            rc = strncmp(out, "ok", 2) == 0 ? 0 : -1;
        }
    }
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    return rc;
}

int cli_control_field(const char* answer, const char* key, char* out, size_t cap) {
    return field(answer, key, out, cap);
}

static int find_trace(shell_t* s);

// A watched block's release stack, from the trace (the process wrote its records when it
// answered `events`): as the text report prints a stack.
static void print_release_stack(const cli_trace_t* t, unsigned stack) {
    uint32_t id = stack ? idmap_find(&t->m->stack_ids, stack) : 0; // the model's number for it
    if (id)
        report_text_stack(stdout, t->ctx, id, "    ");
}

// The watch events since the last look, a line each with the release's stack (the process
// answers "ok missed=N" and then PTR KIND WHERE BASE FUNCTION+OFFSET MODULE STACK for each).
static void show_events(shell_t* s) {
    char ans[SHELL_LINE];
    if (ask(s, "events", ans, sizeof ans) != 0)
        return;
    unsigned missed = 0;
    int used = 0;
    if (sscanf(ans, "ok missed=%u%n", &missed, &used) < 1)
        return;
    if (missed)
        printf("watch: %u events missed (not read in time)\n", missed);
    char ptr[32], kind[16], where[32], base[32], fn[512], module[1024];
    unsigned stack;
    const char* at = ans + used;
    int n;
    cli_trace_t t;
    int has_trace = 0;
    while (sscanf(at, " %31s %15s %31s %31s %511s %1023s %u%n", ptr, kind, where, base, fn, module,
                  &stack, &n) == 7) {
        at += n;
        // The host's symbols (DWARF: static functions, file and line), the loader's name else.
        symbolizer_t* sym = symbolizer_new_cached(s->report.sysroot);
        sym_frame_t fr[8];
        int k = 0, got = 0;
        uint64_t ip = strtoull(where, NULL, 16), bias = strtoull(base, NULL, 16);
        if (sym && module[0] == '/' && ip > bias &&
            (k = symbolizer_add_module(sym, module, NULL, 0)) >= 0)
            got = symbolizer_lookup(sym, k, ip - bias - 1, fr, 8);
        const sym_frame_t* f = got > 0 ? &fr[got - 1] : NULL; // the outermost: the function
        if (f && fr[0].function)
            printf("watch: the block at %s was %s at %s (%s, %s:%u)\n", ptr, kind, where,
                   fr[0].function, fr[0].file ? fr[0].file : "?", fr[0].line);
        else
            printf("watch: the block at %s was %s at %s (%s, in %s)\n", ptr, kind, where, fn,
                   module);
        symbolizer_free(sym);
        if (stack && !has_trace)
            has_trace = flush_trace(s) == 0 && cli_trace_open(&t, s->trace, &s->report) == 0;
        if (has_trace)
            print_release_stack(&t, stack);
    }
    if (has_trace)
        cli_trace_close(&t);
}

static void cmd_watch(shell_t* s, char* args) {
    char req[96], ans[SHELL_LINE];
    if (!args[0]) {
        show_events(s);
        return;
    }
    snprintf(req, sizeof req, "watch %.64s", args);
    if (ask(s, req, ans, sizeof ans) == 0)
        printf("%s: released or resized, it is said here\n", ans + 3);
}

static const char* const shell_commands[] = {"depth", "dump",  "flush", "grow",   "help", "leaks",
                                             "mark",  "quit",  "reset",  "since", "start",
                                             "status", "stop", "top", "watch"};
static const char* const sort_keys[] = {"allocations", "bytes", "peak", "leaked", "temporary"};

// Tab completion: the command as the first word; after `top`, `sort` and its keys; `leaks all`.
static int complete_word(const char* line, size_t word, size_t len, const char** out, int max) {
    const char* const* words = NULL;
    size_t nwords = 0;
    static const char* const after_top[] = {"sort"};
    static const char* const after_leaks[] = {"all", "leak", "new"};
    if (word == 0) {
        words = shell_commands;
        nwords = sizeof shell_commands / sizeof *shell_commands;
    } else if (word >= 5 && !strncmp(line + word - 5, "sort ", 5)) {
        words = sort_keys;
        nwords = sizeof sort_keys / sizeof *sort_keys;
    } else if (!strncmp(line, "top ", 4)) {
        words = after_top;
        nwords = 1;
    } else if (!strncmp(line, "leaks ", 6)) {
        words = after_leaks;
        nwords = sizeof after_leaks / sizeof *after_leaks;
    }
    int n = 0;
    for (size_t i = 0; i < nwords && n < max; i++)
        if (!strncmp(words[i], line + word, len - word))
            out[n++] = words[i];
    return n;
}

static void cmd_stop(shell_t* s) {
    char ans[SHELL_LINE];
    if (ask(s, "stop", ans, sizeof ans) == 0)
        printf("stopped: the trace %s has ended\n", s->trace);
}

static void cmd_start(shell_t* s) {
    char ans[SHELL_LINE], where[PATH_MAX];
    if (ask(s, "start", ans, sizeof ans) != 0)
        return;
    if (field(ans, "trace", where, sizeof where) == 0)
        printf("started: a new trace, %s\n", where);
    s->last_scan_ns = -1;
    find_trace(s); // the new trace is a new file
}

// One command line; 1 when the shell ends.
static int execute(shell_t* s, char* line) {
    line[strcspn(line, "\r\n")] = 0;
    char* cmd = line;
    while (*cmd == ' ' || *cmd == '\t')
        cmd++;
    if (!*cmd || *cmd == '#')
        return 0;
    char* args = cmd + strcspn(cmd, " \t");
    if (*args)
        *args++ = 0;
    while (*args == ' ' || *args == '\t')
        args++;
    char ans[SHELL_LINE];
    if (!strcmp(cmd, "quit") || !strcmp(cmd, "exit"))
        return 1;
    if (!strcmp(cmd, "help"))
        fputs(shell_help, stdout);
    else if (!strcmp(cmd, "status"))
        cmd_status(s);
    else if (!strcmp(cmd, "top"))
        cmd_top(s, args);
    else if (!strcmp(cmd, "leaks"))
        cmd_leaks(s, args);
    else if (!strcmp(cmd, "mark"))
        cmd_mark(s);
    else if (!strcmp(cmd, "since"))
        cmd_since(s, args);
    else if (!strcmp(cmd, "dump"))
        cmd_dump(s, args);
    else if (!strcmp(cmd, "grow"))
        cmd_grow(s, args);
    else if (!strcmp(cmd, "watch"))
        cmd_watch(s, args);
    else if (!strcmp(cmd, "depth")) {
        char req[64];
        snprintf(req, sizeof req, "depth %s", args);
        if (ask(s, req, ans, sizeof ans) == 0) { // it holds for a whole trace: a new one
            cmd_stop(s);
            cmd_start(s);
            printf("depth %s from now on\n", args);
        }
    } else if (!strcmp(cmd, "stop"))
        cmd_stop(s);
    else if (!strcmp(cmd, "start"))
        cmd_start(s);
    else if (!strcmp(cmd, "reset")) {
        cmd_stop(s);
        cmd_start(s);
    } else if (!strcmp(cmd, "flush")) {
        if (ask(s, "flush", ans, sizeof ans) == 0)
            printf("flushed\n");
    } else
        printf("unknown command '%s' (help lists them)\n", cmd);
    if (strcmp(cmd, "watch") != 0)
        show_events(s); // what a watched block went through meanwhile
    fflush(stdout);
    return 0;
}

// The connected socket as the shell's two streams: 0, or 1 (said).
static int take_connection(shell_t* s, int fd) {
    int fd2 = dup(fd);
    s->to = fdopen(fd, "w");
    s->from = fd2 >= 0 ? fdopen(fd2, "r") : NULL;
    if (!s->to || !s->from) {
        cli_error("shell: out of memory");
        return 1;
    }
    return 0;
}

static int connect_to(shell_t* s, const char* path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        cli_error("shell: socket path too long: %s", path);
        return 1;
    }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        if (kill((pid_t)s->pid, 0) != 0 && errno == ESRCH)
            cli_error("shell: no process %ld", s->pid);
        else if (err == ENOENT || err == ECONNREFUSED)
            cli_error("shell: process %ld is not traced by heaplens (no control socket at %s)",
                      s->pid, path);
        else
            cli_error("shell: cannot connect to %s: %s", path, strerror(err));
        return 1;
    }
    return take_connection(s, fd);
}

// The trace, as the process wrote it: through its descriptor when this user may (any
// directory, even after a rename), else by its path (relative: to the process's directory).
// Through a collector: the trace it is writing, as it says (after a flush, so that the trace's
// first chunk, which names its process, is there; a trace just begun by `start` may take a few
// moments to reach it).
#define SHELL_TRACE_TRIES 50
#define SHELL_TRACE_WAIT_US 20000
static int find_collected_trace(shell_t* s) {
    char ans[SHELL_LINE];
    for (int i = 0; i < SHELL_TRACE_TRIES; i++) {
        if (flush_trace(s) != 0)
            return 1;
        if (fprintf(s->to, "HEAPLENS-TRACE\n") < 0 || fflush(s->to) != 0 ||
            !fgets(ans, sizeof ans, s->from)) {
            cli_error("shell: the collector at %s closed the connection", s->collector);
            return 1;
        }
        ans[strcspn(ans, "\r\n")] = 0;
        if (!field(ans, "trace", s->trace, sizeof s->trace))
            return 0;
        usleep(SHELL_TRACE_WAIT_US);
    }
    cli_error("shell: the collector at %s has no trace of process %ld", s->collector, s->pid);
    return 1;
}

static int find_trace(shell_t* s) {
    char ans[SHELL_LINE], fd[32], where[PATH_MAX];
    if (s->collector)
        return find_collected_trace(s);
    if (ask(s, "hello", ans, sizeof ans) != 0)
        return 1;
    if (field(ans, "trace_fd", fd, sizeof fd) || field(ans, "trace", where, sizeof where)) {
        cli_error("shell: process %ld answered in a way this heaplens does not know: %s", s->pid,
                  ans);
        return 1;
    }
    if (where[0] == '@') {
        cli_error("shell: process %ld sends its trace to the collector at %s: run `heaplens "
                  "shell %s %ld` where the collector runs",
                  s->pid, where + 1, where + 1, s->pid);
        return 1;
    }
    // The path itself while it names the file (it stays after a stop ends the trace); the
    // process's descriptor for a relative path or one this user cannot reach.
    if (where[0] == '/' && access(where, R_OK) == 0) {
        snprintf(s->trace, sizeof s->trace, "%s", where);
        return 0;
    }
    snprintf(s->trace, sizeof s->trace, "/proc/%ld/fd/%s", s->pid, fd);
    if (atoi(fd) >= 0 && access(s->trace, R_OK) == 0)
        return 0;
    int n = where[0] == '/' ? snprintf(s->trace, sizeof s->trace, "%s", where)
                            : snprintf(s->trace, sizeof s->trace, "/proc/%ld/cwd/%.*s", s->pid,
                                       PATH_MAX - 64, where);
    if (n < 0 || (size_t)n >= sizeof s->trace) {
        cli_error("shell: the trace's path is too long: %s", where);
        return 1;
    }
    return 0;
}

// heaplens shell ADDR [PID]: through the collector at ADDR, to a process that sends it its
// trace; without PID, the list of those. 0 when connected to the process, 1 on an error
// (said), 2 when the list was printed.
static int connect_collector(shell_t* s, const char* token) {
    int fd = -1;
    const char* addr = s->collector;
    if (!strncmp(addr, "unix:", 5)) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        if (strlen(addr + 5) >= sizeof a.sun_path || !addr[5]) {
            cli_error("shell: bad socket path in %s", addr);
            return 1;
        }
        strcpy(a.sun_path, addr + 5);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
            close(fd);
            fd = -1;
        }
    } else {
        char host[256];
        char port[16] = "";
        host[0] = 0;
        if (remote_split_tcp(addr + 4, host, sizeof host, port, sizeof port) != 0 || !host[0] ||
            !port[0]) {
            cli_error("shell: expected tcp:HOST:PORT, got %s", addr);
            return 1;
        }
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        int rc = getaddrinfo(host, port, &hints, &ai);
        if (rc != 0) {
            cli_error("shell: %s: %s", addr, gai_strerror(rc));
            return 1;
        }
        for (struct addrinfo* p = ai; p && fd < 0; p = p->ai_next) {
            fd = socket(p->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) != 0) {
                close(fd);
                fd = -1;
            }
        }
        freeaddrinfo(ai);
    }
    if (fd < 0) {
        cli_error("shell: no collector answers at %s: %s", addr, strerror(errno));
        return 1;
    }
    if (take_connection(s, fd) != 0)
        return 1;
    char secret[REMOTE_TOKEN_MAX];
    if (token && (remote_read_token("shell", token, secret) < 0 ||
                  fprintf(s->to, "HEAPLENS-TOKEN %s\n", secret) < 0))
        return 1;
    char ans[SHELL_LINE];
    if ((s->pid > 0 ? fprintf(s->to, "HEAPLENS-SHELL %ld\n", s->pid)
                    : fprintf(s->to, "HEAPLENS-SHELL\n")) < 0 ||
        fflush(s->to) != 0 || !fgets(ans, sizeof ans, s->from)) {
        cli_error("shell: the collector at %s closed the connection%s", addr,
                  token ? "" : " (does it ask for a --token?)");
        return 1;
    }
    ans[strcspn(ans, "\r\n")] = 0;
    if (strncmp(ans, "ok", 2) != 0) {
        cli_error("shell: collector at %s: %s", addr, !strncmp(ans, "error ", 6) ? ans + 6 : ans);
        return 1;
    }
    if (s->pid <= 0) {
        const char* list = strstr(ans, "targets=");
        list = list ? list + 8 : "";
        printf("%s\n", *list ? list : "(no process sends its trace there now)");
        return 2;
    }
    return 0;
}

int cmd_shell(int argc, char** argv) {
    shell_t s = {.pid = -1, .last_scan_ns = -1};
    cli_report_defaults(&s.report);
    const char* sock = NULL;
    const char* token = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            cli_usage_shell(stdout);
            return 0;
        }
        int missing = 0;
        const char* v = cli_option_value(argc, argv, &i, "--socket", &missing);
        if (missing) {
            cli_error("shell: --socket needs a path");
            return 2;
        }
        if (v) {
            sock = v;
            continue;
        }
        v = cli_option_value(argc, argv, &i, "--token", &missing);
        if (missing) {
            cli_error("shell: --token needs a file");
            return 2;
        }
        if (v) {
            token = v;
            continue;
        }
        if (!strncmp(argv[i], "unix:", 5) || !strncmp(argv[i], "tcp:", 4)) {
            if (s.collector) {
                cli_error("shell: one collector address, got '%s' too", argv[i]);
                return 2;
            }
            s.collector = argv[i];
            continue;
        }
        // Of report's options, those that shape what the shell shows.
        static const char* const taken[] = {"--show-leak-kinds", "--suppressions", "--sysroot",
                                            "--debug-dir"};
        int r = 0;
        for (size_t k = 0; k < sizeof taken / sizeof *taken && !r; k++)
            if (!strncmp(argv[i], taken[k], strlen(taken[k])))
                r = cli_report_option(argc, argv, &i, &s.report);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        char* end;
        long pid = strtol(argv[i], &end, 10);
        if (argv[i][0] == '-' || *end || pid <= 0 || s.pid > 0) {
            cli_error("shell: expected one PID, got '%s' (usage: heaplens shell [options] PID)",
                      argv[i]);
            return 2;
        }
        s.pid = pid;
    }
    signal(SIGPIPE, SIG_IGN); // a process that exits mid-command: said, not a silent death
    if (s.collector) {
        if (sock) {
            cli_error("shell: --socket and a collector's address are two ways to one process: "
                      "give one");
            return 2;
        }
        int rc = connect_collector(&s, token);
        if (rc != 0)
            return rc == 2 ? 0 : 1;
    } else if (token) {
        cli_error("shell: --token is for a collector's address (heaplens shell ADDR PID)");
        return 2;
    }
    if (s.pid <= 0) {
        cli_error("shell: which process? usage: heaplens shell [options] PID");
        return 2;
    }
    char path[PATH_MAX];
    if (!sock && !s.collector) {
        cli_control_socket(path, sizeof path, s.pid);
        sock = path;
    }
    cli_trace_is_live = 1;
    if ((!s.collector && connect_to(&s, sock) != 0) || find_trace(&s) != 0)
        return 1;
    int is_tty = isatty(0) && isatty(1);
    le_t le;
    le_init(&le, 0, 1, complete_word);
    char line[SHELL_LINE], prompt[64];
    snprintf(prompt, sizeof prompt, "heaplens %ld> ", s.pid);
    int rc = 0;
    for (;;) {
        if (is_tty) {
            fflush(stdout);
            if (le_read(&le, prompt, line, sizeof line) < 0)
                break;
        } else if (!fgets(line, sizeof line, stdin)) {
            break;
        }
        if (execute(&s, line))
            break;
        if (ferror(s.from) || feof(s.from)) {
            rc = 1;
            break;
        }
    }
    le_free(&le);
    fprintf(s.to, "quit\n");
    fclose(s.to);
    fclose(s.from);
    return rc;
}
