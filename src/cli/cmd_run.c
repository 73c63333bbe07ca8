// SPDX-License-Identifier: MIT
// cmd_run.c - heaplens run -- PROGRAM ARGS: checks the program can be traced, starts it with
// the agent preloaded, waits, reports, and ends the way the program ended (same exit status,
// or death by the same signal) unless --error-exitcode says otherwise.
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../analyze/aggregate.h"
#include "../common/checkopts.h"
#include "cli.h"
#include "growth_alert.h"
#include "gsites.h"
#include "rundir.h"
#include "run_follow.h"

typedef cli_run_opts_t run_opts_t;

// --allocator-stats alone: ten samples a second. mallinfo2 walks every free chunk under its
// arena's lock, so a much shorter period would cost a program with a large fragmented heap.
#define HL_ALLOC_STATS_MS_DEFAULT 100

static int parse_int(const char* s, int lo, int hi, int* out) {
    char* end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

// Finds PROGRAM the way execvp would, so errors can be told before anything runs.
static int resolve_program(const char* prog, char* out, size_t cap) {
    if (strchr(prog, '/')) {
        snprintf(out, cap, "%s", prog);
        return access(out, F_OK) == 0 ? 0 : -errno;
    }
    const char* path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    int err = -ENOENT;
    for (const char* p = path; *p;) {
        const char* colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", prog);
        if (access(out, X_OK) == 0) {
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
                return 0;
        } else if (errno == EACCES) {
            err = -EACCES;
        }
        p = colon ? colon + 1 : p + n;
    }
    return err;
}

// Is it something the agent can be preloaded into? Returns NULL, or why not; *runs_untraced
// is set when the program still runs without the agent (it has no dynamic loader to preload
// it with, or is of the other ELF class).
static const char* why_untraceable(const char* path, const char* agent, int* runs_untraced) {
    static char why[256];
    struct stat st;
    if (stat(path, &st) != 0)
        return strerror(errno);
    if (S_ISDIR(st.st_mode))
        return "is a directory";
    if (access(path, X_OK) != 0)
        return "is not executable (permission denied)";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return strerror(errno);
    unsigned char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n >= 2 && buf[0] == '#' && buf[1] == '!')
        return NULL; // a script: its interpreter is what gets traced
    if (n < (ssize_t)sizeof(Elf32_Ehdr) || memcmp(buf, ELFMAG, SELFMAG) != 0)
        return "is not an ELF executable or a #! script";
    int is_64 = buf[EI_CLASS] == ELFCLASS64;
    if (!is_64 && !cli_agent_for(agent, "i686", NULL, 0)) {
        *runs_untraced = 1;
        snprintf(why, sizeof why, "is a 32-bit program (this heaplens has no 32-bit agent: "
                                  "build it with gcc-multilib and libzstd-dev:i386 installed)");
        return why;
    }
    // Its program headers, of either class: is there a dynamic loader to preload the agent with?
    uint16_t type, phnum;
    uint64_t phoff;
    size_t phsize;
    if (is_64) {
        const Elf64_Ehdr* eh = (const Elf64_Ehdr*)buf;
        type = eh->e_type, phoff = eh->e_phoff, phnum = eh->e_phnum, phsize = sizeof(Elf64_Phdr);
    } else {
        const Elf32_Ehdr* eh = (const Elf32_Ehdr*)buf;
        type = eh->e_type, phoff = eh->e_phoff, phnum = eh->e_phnum, phsize = sizeof(Elf32_Phdr);
    }
    if (type != ET_EXEC && type != ET_DYN)
        return "is not an executable ELF file";
    if (phoff + (uint64_t)phnum * phsize > (uint64_t)n)
        return NULL; // headers beyond what we read: let the loader decide
    for (int i = 0; i < phnum; i++) {
        const unsigned char* ph = buf + phoff + (size_t)i * phsize;
        uint32_t p_type = is_64 ? ((const Elf64_Phdr*)ph)->p_type : ((const Elf32_Phdr*)ph)->p_type;
        if (p_type == PT_INTERP)
            return NULL;
    }
    *runs_untraced = 1;
    return "is statically linked (heaplens is loaded into dynamically linked programs only)";
}

// A program the agent cannot be loaded into still runs, as it is: heaplens becomes it (the same
// process, descriptors, signals, exit status or death) after one line saying it is not traced.
static int run_untraced(const char* prog, char** prog_argv, const char* why) {
    cli_error("%s %s: running it untraced", prog, why);
    fflush(NULL);
    execv(prog, prog_argv);
    int e = errno;
    cli_error("%s: %s", prog, strerror(e));
    return e == ENOENT ? 127 : 126;
}

int cli_find_agent(char* out, size_t cap) {
    const char* env = getenv("HEAPLENS_AGENT");
    if (env) {
        snprintf(out, cap, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    char* slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    const char* candidates[] = {"%s/libheaplens.so", "%s/../lib/heaplens/libheaplens.so",
                                "%s/../lib/libheaplens.so"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        snprintf(out, cap, candidates[i], self);
        if (access(out, R_OK) == 0) {
            char* real = realpath(out, NULL);
            if (real) {
                snprintf(out, cap, "%s", real);
                free(real);
            }
            return 0;
        }
    }
    return -1;
}

int cli_agent_for(const char* agent, const char* platform, char* out, size_t cap) {
    char dir[PATH_MAX], path[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", agent);
    char* slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    *slash = 0;
    snprintf(path, sizeof path, "%s/agents/%s/libheaplens.so", dir, platform);
    if (access(path, R_OK) != 0)
        return 0;
    if (out)
        snprintf(out, cap, "%s/agents/$PLATFORM/libheaplens.so", dir);
    return 1;
}

static int64_t run_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Waits for the program as waitpid does, and meanwhile, every part of the alert window once a
// whole window has passed, looks for growing call sites (growth_alert.c).
#define ALERT_MIN_PERIOD_MS 100
#define RUN_ALERT_WINDOW_S 60 // as heaplens shell's `grow`
static void wait_alerting(pid_t pid, const cli_run_opts_t* o, int* status) {
    growth_alert_t g = {.pid = pid,
                        .rate = o->alert_growth,
                        .window_s = o->alert_window_s > 0 ? o->alert_window_s : RUN_ALERT_WINDOW_S,
                        .report = &o->report};
    int64_t period = (int64_t)(g.window_s * 1000) / AG_GROWTH_WINDOWS;
    if (period < ALERT_MIN_PERIOD_MS)
        period = ALERT_MIN_PERIOD_MS;
    int64_t next = run_now_ms() + (int64_t)(g.window_s * 1000);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0); // readable once the program ends
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            break;
        int64_t left = next - run_now_ms();
        if (left <= 0) {
            growth_alert_check(&g);
            next += period;
            continue;
        }
        if (pidfd >= 0) {
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            poll(&p, 1, (int)left);
        } else {
            struct timespec ts = {0, (left < 50 ? left : 50) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    growth_alert_free(&g);
}

// What LD_PRELOAD names: the agents by platform when they are there (the loader picks the one
// of each program it starts, 64-bit or 32-bit), else the one agent.
static void agent_preload_name(const char* agent, char* out, size_t cap) {
    struct utsname u;
    if (uname(&u) != 0 || !cli_agent_for(agent, u.machine, out, cap))
        snprintf(out, cap, "%s", agent);
}

// The agent's settings, in the one variable it reads them from (src/agent/options.c):
// NAME=VALUE separated by ':', a backslash before a ':' or '\\' of a value. NULL when out of
// memory.
static char* agent_options(const run_opts_t* o, const char* output, const char* session,
                           const char* sites) {
    char* s = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&s, &len);
    if (!f)
        return NULL;
    fprintf(f, "depth=%d:guard=%d:sample_ms=%d:no_follow=%d:scan=%d:release_stacks=%d", o->depth,
            o->guard, o->sample_ms, o->no_follow, !o->no_scan, !o->no_release_stacks);
    if (o->no_control)
        fputs(":control=0", f);
    if (o->no_libc_freeres)
        fputs(":libc_freeres=0", f);
    if (o->no_cxx_freeres)
        fputs(":cxx_freeres=0", f);
    if (o->alloc_stats_ms)
        fprintf(f, ":allocator_stats=%d", o->alloc_stats_ms);
    if (o->wait)
        fputs(":wait=1", f);
    if (o->redzone)
        fprintf(f, ":redzone=%d", o->redzone);
    if (o->guard_pages_before)
        fprintf(f, ":guard_pages_before=1");
    if (o->guard_pages_abort)
        fprintf(f, ":guard_pages_abort=1");
    const char* names[] = {"output", "session", "remote",     "remote_token",
                           "paint",  "hoard",   "guard_pages", "guard_sites"};
    const char* values[] = {output,   session,  o->remote,      o->remote_token,
                            o->paint, o->hoard, o->guard_pages, sites};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        if (!values[k])
            continue;
        fprintf(f, ":%s=", names[k]);
        for (const char* p = values[k]; *p; p++) {
            if (*p == ':' || *p == '\\')
                fputc('\\', f);
            fputc(*p, f);
        }
    }
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

static pid_t child_pid;
static void forward_signal(int sig) {
    if (child_pid > 0)
        kill(child_pid, sig);
}

// What stands at the trace's name when it is not a regular file, for the line refusing it.
static const char* kind_of(mode_t mode) {
    switch (mode & S_IFMT) {
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    case S_IFIFO:
        return "a FIFO";
    case S_IFSOCK:
        return "a socket";
    case S_IFDIR:
        return "a directory";
    default:
        return "not a regular file";
    }
}

// -o NAME: this run's trace takes the name. A regular file or a link there (an earlier trace,
// or a link to one) is removed, never written through; anything else is refused, as the agent
// would refuse it: a trace is a regular file (/dev/full must stay a device). 0, or 1 after
// printing one line.
static int free_trace_name(const char* output) {
    struct stat st;
    if (lstat(output, &st) != 0)
        return 0;
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        cli_error("%s: is %s; the trace must be a new or a regular file", output,
                  kind_of(st.st_mode));
        return 1;
    }
    unlink(output); // when it cannot go, the agent names its trace OUTPUT.1
    return 0;
}

int cmd_run(int argc, char** argv) {
    run_opts_t o = {.depth = 32, .guard = 8, .sample_ms = 10};
    cli_report_defaults(&o.report);
    int i = 1;
    for (; i < argc; i++) {
        const char* a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (cli_is_help(a)) {
            cli_usage_run(stdout);
            return 0;
        }
        int r = cli_report_option(argc, argv, &i, &o.report);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char* v = NULL;
        if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc)
            o.output = argv[++i];
        else if (!strncmp(a, "--output=", 9))
            o.output = a + 9;
        else if ((!strcmp(a, "-d") || !strcmp(a, "--depth")) && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(a, "--depth=", 8))
            v = a + 8;
        else if (!strncmp(a, "-d", 2) && a[2])
            v = a + 2;
        else if (!strcmp(a, "--no-follow"))
            o.no_follow = 1;
        else if ((v = cli_option_value(argc, argv, &i, "--remote", NULL)))
            o.remote = v, v = NULL;
        else if ((v = cli_option_value(argc, argv, &i, "--remote-token", NULL))) {
            char* abs = realpath(v, NULL); // the agent opens it from the program's directory
            if (!abs) {
                cli_error("--remote-token %s: %s", v, strerror(errno));
                return 2;
            }
            o.remote_token = abs;
            v = NULL;
        }
        else if (!strcmp(a, "--no-scan"))
            o.no_scan = 1;
        else if (!strcmp(a, "--no-control"))
            o.no_control = 1;
        else if (!strcmp(a, "--wait"))
            o.wait = 1;
        else if ((v = cli_option_value(argc, argv, &i, "--alert-growth", NULL))) {
            char* end;
            o.has_alert_growth = 1;
            o.alert_growth = strtod(v, &end);
            if (!strcmp(end, "/s") || !strcmp(end, "B/s"))
                end += strlen(end);
            if (!*v || *end || o.alert_growth < 0) {
                cli_error("--alert-growth: expected bytes per second (e.g. 1000 or 1000/s), got '%s'",
                          v);
                return 2;
            }
            v = NULL;
        }
        else if ((v = cli_option_value(argc, argv, &i, "--alert-window", NULL))) {
            char* end;
            o.alert_window_s = strtod(v, &end);
            if (!strcmp(end, "s"))
                end++;
            if (!*v || *end || !(o.alert_window_s >= 0.1) || o.alert_window_s > 1e6) {
                cli_error("--alert-window: expected seconds (0.1 or more), got '%s'", v);
                return 2;
            }
            v = NULL;
        }
        else if (!strcmp(a, "--no-release-stacks"))
            o.no_release_stacks = 1;
        else if (!strcmp(a, "--guard-pages-before"))
            o.guard_pages_before = 1;
        else if (!strcmp(a, "--guard-pages-abort"))
            o.guard_pages_abort = 1;
        else if (!strncmp(a, "--guard=", 8)) {
            if (parse_int(a + 8, 0, 4096, &o.guard) != 0) {
                cli_error("--guard: expected a number of bytes from 0 to 4096, got '%s'", a + 8);
                return 2;
            }
        } else if (!strncmp(a, "--redzone=", 10)) {
            if (parse_int(a + 10, 0, HL_REDZONE_MAX, &o.redzone) != 0) {
                cli_error("--redzone: expected a number of bytes from 0 to %d, got '%s'",
                          HL_REDZONE_MAX, a + 10);
                return 2;
            }
        } else if (!strncmp(a, "--paint=", 8)) {
            int pa, pf;
            if (hl_parse_paint(a + 8, &pa, &pf) != 0) {
                cli_error("--paint: expected alloc:BYTE,free:BYTE (either alone; BYTE as 0xAA "
                          "or 170), got '%s'", a + 8);
                return 2;
            }
            o.paint = a + 8;
        } else if (!strncmp(a, "--hoard=", 8)) {
            uint64_t bytes;
            if (hl_parse_size(a + 8, &bytes) != 0) {
                cli_error("--hoard: expected a size such as 65536, 512K, 64M or 1G, got '%s'",
                          a + 8);
                return 2;
            }
            o.hoard = a + 8;
        } else if (!strncmp(a, "--guard-pages=", 14)) {
            uint32_t every;
            if (hl_parse_rate(a + 14, &every) != 0) {
                cli_error("--guard-pages: expected 1 or 1/N, got '%s'", a + 14);
                return 2;
            }
            o.guard_pages = a + 14;
        } else if ((v = cli_option_value(argc, argv, &i, "--guard-sites", NULL))) {
            if (gsites_check_regex(v) != 0)
                return 2;
            o.guard_sites = v;
            v = NULL;
        } else if (!strncmp(a, "--sample-interval=", 18)) {
            if (parse_int(a + 18, 1, 3600000, &o.sample_ms) != 0) {
                cli_error("--sample-interval: expected milliseconds, got '%s'", a + 18);
                return 2;
            }
        } else if (!strcmp(a, "--allocator-stats")) {
            o.alloc_stats_ms = HL_ALLOC_STATS_MS_DEFAULT;
        } else if (!strncmp(a, "--allocator-stats=", 18)) {
            if (parse_int(a + 18, 1, 3600000, &o.alloc_stats_ms) != 0) {
                cli_error("--allocator-stats: expected milliseconds from 1 to 3600000, got '%s'",
                          a + 18);
                return 2;
            }
        } else if (a[0] == '-') {
            cli_error("run: unknown option '%s' (see heaplens --help)", a);
            return 2;
        } else {
            break; // the program, without "--"
        }
        if (v && parse_int(v, 1, 256, &o.depth) != 0) {
            cli_error("--depth: expected a number of frames from 1 to 256, got '%s'", v);
            return 2;
        }
    }
    if (i >= argc) {
        cli_error("run: which program? usage: heaplens run [options] -- PROGRAM [ARGS...]");
        return 2;
    }
    if (o.remote && (o.report.json_path || o.report.html_path || o.report.sarif_path ||
                     o.report.error_exitcode)) {
        cli_error("run: with --remote the trace is the collector's: report there (heaplens "
                  "report), not with --json, --html, --sarif or --error-exitcode here");
        return 2;
    }
    if (o.remote_token && !o.remote) {
        cli_error("run: --remote-token goes with --remote ADDR");
        return 2;
    }
    return cli_run_traced(o, argv + i, NULL, NULL);
}

int cli_run_traced(run_opts_t o, char** prog_argv, cli_run_report_fn report, void* report_arg) {
    char prog[PATH_MAX];
    int rr = resolve_program(prog_argv[0], prog, sizeof prog);
    if (rr != 0) {
        cli_error("%s: %s", prog_argv[0], rr == -EACCES ? "permission denied" : "command not found");
        return 127;
    }
    char agent[PATH_MAX];
    int has_agent = cli_find_agent(agent, sizeof agent) == 0;
    int runs_untraced = 0;
    const char* why = why_untraceable(prog, has_agent ? agent : "", &runs_untraced);
    if (why && runs_untraced)
        return run_untraced(prog, prog_argv, why);
    if (why) {
        cli_error("%s: %s", prog, why);
        return 126;
    }
    if (!has_agent) {
        cli_error("cannot find libheaplens.so next to the heaplens binary (set HEAPLENS_AGENT)");
        return 2;
    }

    // The trace's name: absolute, so a program that changes directory still writes it here.
    char output[PATH_MAX + 64];
    if (o.output) {
        if (o.output[0] == '/')
            snprintf(output, sizeof output, "%s", o.output);
        else {
            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd)) {
                cli_error("cannot read the current directory: %s", strerror(errno));
                return 2;
            }
            snprintf(output, sizeof output, "%s/%s", cwd, o.output);
        }
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            cli_error("cannot read the current directory: %s", strerror(errno));
            return 2;
        }
        snprintf(output, sizeof output, "%s/heaplens.%%e.%%p.hl", cwd);
    }
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", output);
    char* slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cli_error("%s: output directory does not exist", dir);
        return 2;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cli_error("%s: output directory is not writable", dir);
        return 2;
    }
    // This run's trace takes the name; children get a suffix.
    if (o.output && !strchr(output, '%') && free_trace_name(output) != 0)
        return 2;

    rundir_t run;
    if (rundir_create(&run) != 0)
        return 2;
    char session[PATH_MAX];
    int sfd = rundir_name(&run, RUNDIR_SESSION, session, sizeof session);
    if (sfd == 0)
        sfd = rundir_create_file(&run, RUNDIR_SESSION);
    if (sfd < 0) {
        cli_error("%s: cannot create the session index: %s", run.path, strerror(-sfd));
        rundir_remove(&run);
        return 2;
    }
    close(sfd);

    // --guard-sites: the functions' ranges, found here in the program's and libraries' symbols.
    char* sites = NULL;
    if (o.guard_sites && !(sites = gsites_resolve(o.guard_sites, prog))) {
        rundir_remove(&run);
        return 2;
    }

    // Environment for the agent.
    const char* old_preload = getenv("LD_PRELOAD");
    char agent_name[PATH_MAX + 64];
    agent_preload_name(agent, agent_name, sizeof agent_name);
    char* preload = malloc(strlen(agent_name) + (old_preload ? strlen(old_preload) : 0) + 2);
    char* options = agent_options(&o, output, session, sites);
    free(sites);
    if (!preload || !options) {
        cli_error("out of memory");
        free(preload);
        free(options);
        rundir_remove(&run);
        return 2;
    }
    sprintf(preload, "%s%s%s", agent_name, old_preload && *old_preload ? ":" : "",
            old_preload ? old_preload : "");

    struct sigaction ign = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward_signal};
    struct sigaction old_int, old_quit, old_term, old_hup;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGTERM, &fwd, &old_term);
    sigaction(SIGHUP, &fwd, &old_hup);
    int exec_err[2]; // the child's errno when exec fails; closed unwritten when exec succeeds
    if (pipe2(exec_err, O_CLOEXEC) != 0) {
        cli_error("pipe: %s", strerror(errno));
        return 2;
    }
    fflush(NULL);
    child_pid = fork();
    if (child_pid < 0) {
        cli_error("fork: %s", strerror(errno));
        rundir_remove(&run);
        return 2;
    }
    if (child_pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
        setenv("LD_PRELOAD", preload, 1);
        setenv("HEAPLENS_OPTIONS", options, 1);
        execv(prog, prog_argv);
        int e = errno;
        if (write(exec_err[1], &e, sizeof e) != sizeof e) // the parent says it, in one line
            fprintf(stderr, "heaplens: %s: %s\n", prog, strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    close(exec_err[1]);
    int exec_errno = 0;
    while (read(exec_err[0], &exec_errno, sizeof exec_errno) < 0 && errno == EINTR)
        ;
    close(exec_err[0]);
    // Nothing asks for the analysis: the trace is the result (heaplens report reads it).
    int wants_no_analysis = o.report.is_quiet && !o.report.json_path && !o.report.html_path &&
                            !o.report.sarif_path && !o.report.error_exitcode;
    // The default report (cli_report_trace's) is made from the trace as the program writes it.
    int follows = !exec_errno && !report && !o.remote && !wants_no_analysis && !o.has_alert_growth;
    run_follow_t* follow = follows ? run_follow_start(&run, child_pid, &o.report) : NULL;
    int status = 0;
    if (o.has_alert_growth && !o.no_control && !o.remote)
        wait_alerting(child_pid, &o, &status);
    else
        while (waitpid(child_pid, &status, 0) < 0 && errno == EINTR)
            ;
    free(preload);
    free(options);
    if (exec_errno) { // the program never ran: there is no trace to miss
        unlink(session);
        cli_error("%s: cannot execute it: %s%s", prog, strerror(exec_errno),
                  exec_errno == ENOENT ? " (its #! interpreter or ELF loader is missing)" : "");
        return exec_errno == ENOENT ? 127 : 126;
    }

    rundir_entry_t* ents;
    size_t nents = rundir_read_session(&run, &ents);
    const char* root_trace = NULL;
    int root_failed = 0; // its agent could not write the trace, and said so
    report_child_t* kids = calloc(nents + 1, sizeof *kids);
    size_t nkids = 0;
    for (size_t k = 0; k < nents; k++) {
        if (ents[k].pid == (long)child_pid) {
            // the last image of the pid we started
            root_trace = ents[k].is_written ? ents[k].trace : NULL;
            root_failed = !ents[k].is_written;
        } else if (kids && ents[k].is_written) {
            kids[nkids++] = (report_child_t){ents[k].pid, ents[k].trace};
        }
    }
    int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    int rc = exit_status >= 0 ? exit_status : 128 + exit_signal;
    int has_errors = 0, report_failed = 0;
    if (root_failed) {
        report_failed = 1; // the agent's own line said which file and what went wrong
    } else if (root_trace && root_trace[0] == '@') {
        // The trace is the collector's: its host reports on it (heaplens report there).
        if (!o.report.is_quiet)
            fprintf(stderr, "==heaplens== %s: the trace went to the collector %s\n", prog,
                    root_trace + 1);
    } else if (!root_trace) {
        cli_error("%s wrote no trace (set-user-ID programs ignore LD_PRELOAD; the agent may have "
                  "failed to start)", prog);
        report_failed = 1;
    } else if (report) {
        cli_run_result_t res = {child_pid, root_trace, kids, nkids, exit_status, exit_signal};
        report_failed = report(report_arg, &res, &has_errors) != 0;
    } else if (!wants_no_analysis) {
        int followed = follow ? run_follow_report(follow, root_trace, kids, nkids, exit_status,
                                                  exit_signal, &has_errors)
                              : -1;
        follow = NULL;
        report_failed = followed >= 0 ? followed != 0
                                      : cli_report_trace(root_trace, &o.report, kids, nkids,
                                                         exit_status, exit_signal,
                                                         &has_errors) != 0;
    }
    run_follow_free(follow);
    rundir_remove(&run);
    if (o.has_alert_growth && root_trace && !report_failed)
        cli_report_growth(root_trace, &o.report, o.alert_growth);
    for (size_t k = 0; k < nents; k++)
        free(ents[k].trace);
    free(ents);
    free(kids);
    (void)report_failed;
    if (o.report.error_exitcode && has_errors)
        return o.report.error_exitcode;
    if (exit_signal) {
        // End as the program ended, so a shell or CI sees the same death.
        fflush(NULL);
        signal(exit_signal, SIG_DFL);
        kill(getpid(), exit_signal);
    }
    return rc;
}
