// SPDX-License-Identifier: MIT
// cmd_attach.c - heaplens attach PID: trace a dynamically linked process that is running
// already, without restarting it and without a debugger. A thread of it blocked in a waiting
// system call is stopped with ptrace and made to dlopen the agent and call its
// heaplens_attach_start (inject.c; the agent's side is src/agent/attach.c); from then on its
// allocation calls go through the agent, as under heaplens run. heaplens detach PID (or the end
// of --duration) makes it call heaplens_attach_stop: the calls go back where they went, the
// trace ends with a scan, and the process runs on as before.
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "inject.h"

#define ATTACH_SOCKET_WAIT_MS 3000 // the agent's writer opens its control socket within a pass
#define ATTACH_POLL_MS 100         // --duration: how often the process is looked at
#define RTLD_NOW_FLAG 2            // dlopen's RTLD_NOW, in the process (glibc's value)

void cli_usage_attach(FILE* out) {
    fputs("usage: heaplens attach [options] PID\n"
          "Trace a running, dynamically linked process from now on, without restarting it.\n"
          "attach options:\n"
          "  -o, --output FILE        the trace (default heaplens.PROG.PID.hl here; .1, .2...\n"
          "                           when taken)\n"
          "  -d, --depth N            frames per backtrace (default 32)\n"
          "  --duration S             detach after S seconds (or when the process ends) and\n"
          "                           report; without it heaplens attach returns at once and\n"
          "                           `heaplens detach PID` ends the trace\n"
          "  --no-scan                no reachability scan at the end\n"
          "  -h, --help               this help\n",
          out);
    cli_usage_report_options(out);
}

void cli_usage_detach(FILE* out) {
    fputs("usage: heaplens detach [options] PID\n"
          "End the trace heaplens attach began: the process runs on as before it, and the\n"
          "trace is reported.\n"
          "detach options:\n"
          "  -h, --help               this help\n",
          out);
    cli_usage_report_options(out);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int is_alive(long pid) {
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

// The trace the process writes, from its control socket ("" when it cannot say).
static void trace_of(long pid, char* out, size_t cap, int wait_ms) {
    char ans[PATH_MAX + 256];
    out[0] = 0;
    for (int waited = 0;; waited += 10) {
        if (cli_control_ask(pid, "status", ans, sizeof ans) == 0 &&
            cli_control_field(ans, "trace", out, cap) == 0 && out[0])
            return;
        if (waited >= wait_ms)
            return;
        sleep_ms(10);
    }
}

// Calls the agent's function `fn` in the process (with `arg` copied there): its result, or -1
// after saying why (prefix: what was being done).
static int call_agent(long pid, const char* agent, const char* fn, const char* arg,
                      const char* doing, long* result) {
    inject_t in;
    uintptr_t at;
    if (inject_begin(&in, (pid_t)pid) != 0 || inject_symbol(&in, agent, fn, &at) != 0 ||
        inject_call(&in, at, arg, 0, result) != 0) {
        cli_error("%s: %s", doing, in.err);
        inject_end(&in);
        return -1;
    }
    inject_end(&in);
    return 0;
}

static int report_after(const char* trace, const cli_report_opts_t* ro) {
    if (!trace[0])
        return 0;
    int has_errors;
    if (cli_report_trace(trace, ro, NULL, 0, -1, 0, &has_errors) != 0)
        return 1;
    return ro->error_exitcode && has_errors ? ro->error_exitcode : 0;
}

static int detach_now(long pid, const char* agent, const cli_report_opts_t* ro) {
    char trace[PATH_MAX];
    trace_of(pid, trace, sizeof trace, 0);
    long rc;
    if (call_agent(pid, agent, "heaplens_attach_stop", "", "detach", &rc) != 0)
        return 1;
    if (rc != 0) {
        cli_error("detach: process %ld is not traced by an attach", pid);
        return 1;
    }
    if (!ro->is_quiet)
        fprintf(stderr, "heaplens: detached from process %ld; trace: %s\n", pid,
                trace[0] ? trace : "(unknown)");
    return report_after(trace, ro);
}

// The trace's path for the agent: absolute (the process has a directory of its own), with the
// agent's escapes for ':' and '\'.
static char* agent_options(const char* output, int depth, int no_scan) {
    char* s = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&s, &len);
    if (!f)
        return NULL;
    fprintf(f, "depth=%d:scan=%d:output=", depth, !no_scan);
    for (const char* p = output; *p; p++) {
        if (*p == ':' || *p == '\\')
            fputc('\\', f);
        fputc(*p, f);
    }
    fclose(f);
    return s;
}

// The agent by its real path: the process's maps name it so (inject_symbol finds it there).
static int find_agent(char* agent, size_t cap) {
    if (cli_find_agent(agent, cap) != 0) {
        cli_error("cannot find libheaplens.so next to the heaplens binary (set HEAPLENS_AGENT)");
        return -1;
    }
    char* real = realpath(agent, NULL);
    if (real) {
        snprintf(agent, cap, "%s", real);
        free(real);
    }
    return 0;
}

static long parse_pid(const char* cmd, const char* a) {
    char* end;
    long pid = strtol(a, &end, 10);
    if (*end || pid <= 0) {
        cli_error("%s: expected a PID, got '%s'", cmd, a);
        return -1;
    }
    return pid;
}

int cmd_attach(int argc, char** argv) {
    cli_report_opts_t ro;
    cli_report_defaults(&ro);
    const char* output = NULL;
    int depth = 32, no_scan = 0;
    double duration = -1;
    long pid = -1;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (cli_is_help(a)) {
            cli_usage_attach(stdout);
            return 0;
        }
        int missing = 0;
        const char* v;
        if ((v = cli_option_value(argc, argv, &i, "--output", &missing)) ||
            (v = cli_option_value(argc, argv, &i, "-o", &missing))) {
            output = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--depth", &missing)) ||
                   (v = cli_option_value(argc, argv, &i, "-d", &missing))) {
            depth = atoi(v);
            if (depth < 1 || depth > 256) {
                cli_error("attach: --depth takes 1 to 256, got '%s'", v);
                return 2;
            }
        } else if ((v = cli_option_value(argc, argv, &i, "--duration", &missing))) {
            char* end;
            duration = strtod(v, &end);
            if (*end || duration < 0) {
                cli_error("attach: --duration takes seconds, got '%s'", v);
                return 2;
            }
        } else if (missing) {
            cli_error("attach: %s needs a value", a);
            return 2;
        } else if (!strcmp(a, "--no-scan")) {
            no_scan = 1;
        } else {
            int r = cli_report_option(argc, argv, &i, &ro);
            if (r < 0)
                return 2;
            if (r > 0)
                continue;
            if (a[0] == '-' || pid > 0) {
                cli_error("attach: unexpected '%s' (usage: heaplens attach [options] PID)", a);
                return 2;
            }
            if ((pid = parse_pid("attach", a)) < 0)
                return 2;
        }
    }
    if (pid <= 0) {
        cli_error("attach: which process? usage: heaplens attach [options] PID");
        return 2;
    }
    if (!is_alive(pid)) {
        cli_error("attach: no process %ld", pid);
        return 1;
    }
    char agent[PATH_MAX], out_path[PATH_MAX], cwd[PATH_MAX];
    if (find_agent(agent, sizeof agent) != 0)
        return 2;
    if (!getcwd(cwd, sizeof cwd)) {
        cli_error("attach: cannot tell the current directory: %s", strerror(errno));
        return 2;
    }
    if (!output)
        output = "heaplens.%e.%p.hl";
    if (snprintf(out_path, sizeof out_path, "%s%s%s", output[0] == '/' ? "" : cwd,
                 output[0] == '/' ? "" : "/", output) >= (int)sizeof out_path) {
        cli_error("attach: the trace's path is too long");
        return 2;
    }
    char* options = agent_options(out_path, depth, no_scan);
    if (!options) {
        cli_error("out of memory");
        return 2;
    }
    inject_t in;
    uintptr_t dlopen_at, start_at;
    long handle = 0, rc = -1;
    int failed = inject_begin(&in, (pid_t)pid) != 0 ||
                 inject_symbol(&in, "libc.so.6", "dlopen", &dlopen_at) != 0 ||
                 inject_call(&in, dlopen_at, agent, RTLD_NOW_FLAG, &handle) != 0;
    if (!failed && !handle)
        snprintf(in.err, sizeof in.err, "process %ld could not load the agent (dlopen failed)",
                 pid);
    failed = failed || !handle || inject_symbol(&in, agent, "heaplens_attach_start", &start_at) != 0 ||
             inject_call(&in, start_at, options, 0, &rc) != 0;
    if (!failed && rc != 0)
        snprintf(in.err, sizeof in.err,
                 "process %ld is traced already (heaplens run, or an attach not yet detached)",
                 pid);
    inject_end(&in);
    free(options);
    if (failed || rc != 0) {
        cli_error("attach: %s", in.err);
        return 1;
    }
    char trace[PATH_MAX];
    trace_of(pid, trace, sizeof trace, ATTACH_SOCKET_WAIT_MS);
    if (!ro.is_quiet)
        fprintf(stderr, "heaplens: attached to process %ld; trace: %s\n", pid,
                trace[0] ? trace : "(unknown)");
    if (duration < 0) {
        if (!ro.is_quiet)
            fprintf(stderr, "heaplens: `heaplens shell %ld` talks to it, `heaplens detach %ld` "
                            "ends the trace\n",
                    pid, pid);
        return 0;
    }
    for (long waited = 0; waited < (long)(duration * 1000) && is_alive(pid); waited += ATTACH_POLL_MS)
        sleep_ms(ATTACH_POLL_MS);
    if (!is_alive(pid)) { // it ended while traced: the trace ended with it
        if (!ro.is_quiet)
            fprintf(stderr, "heaplens: process %ld ended while traced\n", pid);
        return report_after(trace, &ro);
    }
    return detach_now(pid, agent, &ro);
}

int cmd_detach(int argc, char** argv) {
    cli_report_opts_t ro;
    cli_report_defaults(&ro);
    long pid = -1;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            cli_usage_detach(stdout);
            return 0;
        }
        int r = cli_report_option(argc, argv, &i, &ro);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (argv[i][0] == '-' || pid > 0) {
            cli_error("detach: unexpected '%s' (usage: heaplens detach [options] PID)", argv[i]);
            return 2;
        }
        if ((pid = parse_pid("detach", argv[i])) < 0)
            return 2;
    }
    if (pid <= 0) {
        cli_error("detach: which process? usage: heaplens detach [options] PID");
        return 2;
    }
    if (!is_alive(pid)) {
        cli_error("detach: no process %ld", pid);
        return 1;
    }
    char agent[PATH_MAX];
    if (find_agent(agent, sizeof agent) != 0)
        return 2;
    return detach_now(pid, agent, &ro);
}
