// SPDX-License-Identifier: MIT
// cmd_memcheck.c - heaplens memcheck [valgrind options] PROGRAM ARGS (also the binary called
// as heaplens-memcheck): Valgrind's command line and reports, so that whatever runs memcheck
// (ctest -T memcheck, IDEs, CI scripts) can run heaplens instead. The program runs under the
// agent as with heaplens run; its trace, kept in a private directory, becomes memcheck's text
// on the log destination and its XML on the XML destination, and is removed after.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../analyze/report_valgrind.h"
#include "cli.h"
#include "outfile.h"

// memcheck's --num-callers: its default and its bound.
#define MC_NUM_CALLERS_DEFAULT 12
#define MC_NUM_CALLERS_MAX 500
// The agent records at most this many frames per stack (heaplens run --depth's bound).
#define MC_DEPTH_MAX 256
// --log-socket and --xml-socket without a port: Valgrind's (valgrind-listener's) default.
#define MC_SOCKET_PORT "1500"

typedef struct mc_opts_s {
    vg_opts_t vg;
    int error_exitcode;
    const char* log_file;   // pattern: %p, %q{VAR}, %%
    int log_fd;             // -1: none given
    const char* log_socket; // HOST[:PORT]
    int log_append;         // a child's report after its parent's, in the same file
    int is_xml;
    const char* xml_file;
    int xml_fd;
    const char* xml_socket;
    int trace_children;
    int run_libc_freeres;
    int run_cxx_freeres;
    const char* keep_trace; // --heaplens-output: the trace is kept there
    const char* trace_dir;  // else the traces' private directory, removed once reported
    vsupp_t* supp;
    char** argv; // heaplens's own command line, for the XML's <vargv>
    int argc;
} mc_opts_t;

static void usage(FILE* out) {
    fputs("usage: heaplens memcheck [options] PROGRAM [ARGS...]\n"
          "       heaplens-memcheck [options] PROGRAM [ARGS...]\n"
          "Runs PROGRAM under heaplens and reports as Valgrind's memcheck does (its text, its\n"
          "XML protocol 4, its suppressions), taking memcheck's options:\n"
          "  --leak-check=no|summary|full   (default summary; yes is full)\n"
          "  --show-leak-kinds=LIST         definite,indirect,possible,reachable, all or none\n"
          "                                 (default definite,possible)\n"
          "  --errors-for-leak-kinds=LIST   loss records counted as errors (default\n"
          "                                 definite,possible)\n"
          "  --show-reachable=yes|no, --show-possibly-lost=yes|no   the older spellings\n"
          "  --error-exitcode=N             exit N when errors were found (0: off)\n"
          "  --log-file=FILE                the report to FILE (%p pid, %q{VAR} environment, %%)\n"
          "  --log-fd=N                     the report to descriptor N (default 2)\n"
          "  --xml=yes --xml-file=FILE      XML protocol 4 to FILE (or --xml-fd=N,\n"
          "                                 --xml-socket=HOST:PORT; --log-socket likewise)\n"
          "  --suppressions=FILE            Valgrind-format suppressions (repeatable)\n"
          "  --gen-suppressions=all         print a suppression for each error\n"
          "  --num-callers=N                frames per stack (default 12)\n"
          "  --trace-children=yes|no        report on exec'd and forked children (default no)\n"
          "  --run-libc-freeres=yes|no      at exit, have glibc release what it keeps to the end\n"
          "                                 (__libc_freeres), as memcheck does (default yes)\n"
          "  --run-cxx-freeres=yes|no       likewise libstdc++'s exception pool (default yes)\n"
          "  -q, --quiet, -v, --verbose     quieter, more verbose\n"
          "  -s, --show-error-list=yes|no   list the errors again before the summary\n"
          "  --tool=memcheck                the only tool there is (another is noted, and\n"
          "                                 memcheck runs)\n"
          "  --heaplens-output=FILE         keep the heaplens trace in FILE\n"
          "  -h, --help, --help-debug       this help\n"
          "  --version                      heaplens's version\n"
          "Valgrind's other options are accepted with a note; they do not apply here.\n",
          out);
}

static int parse_yes_no(const char* v, int* out) {
    if (!strcmp(v, "yes"))
        *out = 1;
    else if (!strcmp(v, "no"))
        *out = 0;
    else
        return -1;
    return 0;
}

// "definite,possible", "all", "none" -> bits per HL_LEAK_*; -1 on an unknown word.
static int parse_leak_kinds(const char* v, unsigned* out) {
    static const char* names[HL_LEAK_COUNT] = {"definite", "indirect", "possible", "reachable"};
    char buf[256];
    unsigned bits = 0;
    snprintf(buf, sizeof buf, "%s", v);
    for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        if (!strcmp(tok, "all"))
            bits |= (1u << HL_LEAK_COUNT) - 1, found = 1;
        else if (!strcmp(tok, "none"))
            found = 1;
        for (int k = 0; k < HL_LEAK_COUNT; k++)
            if (!strcmp(tok, names[k]))
                bits |= 1u << k, found = 1;
        if (!found)
            return -1;
    }
    *out = bits;
    return 0;
}

static int parse_num(const char* v, long lo, long hi, long* out) {
    char* end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < lo || n > hi)
        return -1;
    *out = n;
    return 0;
}

// One option at argv[*i]. 1: taken, 0: not an option (the program starts here), -1: bad value
// (message printed), 2: --help or --version answered.
static int parse_option(mc_opts_t* o, int argc, char** argv, int* i) {
    const char* a = argv[*i];
    const char* eq = strchr(a, '=');
    const char* v = eq ? eq + 1 : "";
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(nlen < sizeof name - 1 ? nlen : sizeof name - 1), a);
    long n;
    int yes;
    if (a[0] != '-' || !a[1])
        return 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "--help-debug")) {
        usage(stdout);
        return 2;
    }
    if (!strcmp(a, "--version")) {
        printf("heaplens-%s (memcheck's command line)\n", HEAPLENS_VERSION);
        return 2;
    }
    if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
        o->vg.verbosity = 0;
    else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
        o->vg.verbosity = 2;
    else if (!strcmp(a, "-s") || !strcmp(a, "--show-error-list=yes"))
        o->vg.show_counts = 1;
    else if (!strcmp(a, "--show-error-list=no"))
        o->vg.show_counts = 0;
    else if (!strcmp(name, "--tool")) {
        if (strcmp(v, "memcheck") != 0 && o->vg.verbosity)
            fprintf(stderr, "heaplens: memcheck: --tool=%s: heaplens runs as memcheck\n", v);
    } else if (!strcmp(name, "--leak-check")) {
        if (!strcmp(v, "no"))
            o->vg.leak_check = VG_LEAK_CHECK_NO;
        else if (!strcmp(v, "summary"))
            o->vg.leak_check = VG_LEAK_CHECK_SUMMARY;
        else if (!strcmp(v, "full") || !strcmp(v, "yes"))
            o->vg.leak_check = VG_LEAK_CHECK_FULL;
        else
            goto bad;
    } else if (!strcmp(name, "--show-leak-kinds")) {
        if (parse_leak_kinds(v, &o->vg.show_kinds) != 0)
            goto bad;
    } else if (!strcmp(name, "--errors-for-leak-kinds")) {
        if (parse_leak_kinds(v, &o->vg.error_kinds) != 0)
            goto bad;
    } else if (!strcmp(name, "--show-reachable")) {
        if (parse_yes_no(v, &yes) != 0)
            goto bad;
        o->vg.show_kinds =
            yes ? (1u << HL_LEAK_COUNT) - 1 : (1u << HL_LEAK_DEFINITE) | (1u << HL_LEAK_POSSIBLE);
    } else if (!strcmp(name, "--show-possibly-lost")) {
        if (parse_yes_no(v, &yes) != 0)
            goto bad;
        o->vg.show_kinds = yes ? o->vg.show_kinds | (1u << HL_LEAK_POSSIBLE)
                               : o->vg.show_kinds & ~(1u << HL_LEAK_POSSIBLE);
    } else if (!strcmp(name, "--error-exitcode")) {
        if (parse_num(v, 0, 255, &n) != 0)
            goto bad;
        o->error_exitcode = (int)n;
    } else if (!strcmp(name, "--log-file")) {
        if (!*v)
            goto bad;
        o->log_file = v;
    } else if (!strcmp(name, "--log-fd")) {
        if (parse_num(v, 0, INT_MAX, &n) != 0)
            goto bad;
        o->log_fd = (int)n;
    } else if (!strcmp(name, "--xml")) {
        if (parse_yes_no(v, &o->is_xml) != 0)
            goto bad;
    } else if (!strcmp(name, "--xml-file")) {
        if (!*v)
            goto bad;
        o->xml_file = v;
    } else if (!strcmp(name, "--log-socket") || !strcmp(name, "--xml-socket")) {
        if (!*v)
            goto bad;
        *(name[2] == 'l' ? &o->log_socket : &o->xml_socket) = v;
    } else if (!strcmp(name, "--xml-fd")) {
        if (parse_num(v, 0, INT_MAX, &n) != 0)
            goto bad;
        o->xml_fd = (int)n;
    } else if (!strcmp(name, "--suppressions")) {
        char err[512];
        vsupp_t* s = vsupp_load(o->supp, v, err, sizeof err);
        if (!s) {
            cli_error("%s", err);
            return -1;
        }
        o->supp = s;
    } else if (!strcmp(name, "--gen-suppressions")) {
        if (!strcmp(v, "all"))
            o->vg.gen_suppressions = 1;
        else if (!strcmp(v, "no"))
            o->vg.gen_suppressions = 0;
        else if (!strcmp(v, "yes")) {
            // memcheck asks on the terminal for each error; a report written after the run
            // cannot ask, so it prints them all.
            o->vg.gen_suppressions = 1;
            if (o->vg.verbosity)
                fprintf(stderr, "heaplens: memcheck: --gen-suppressions=yes: printing all\n");
        } else
            goto bad;
    } else if (!strcmp(name, "--num-callers")) {
        if (parse_num(v, 1, MC_NUM_CALLERS_MAX, &n) != 0)
            goto bad;
        o->vg.num_callers = (int)n;
    } else if (!strcmp(name, "--trace-children")) {
        if (parse_yes_no(v, &o->trace_children) != 0)
            goto bad;
    } else if (!strcmp(name, "--run-libc-freeres")) {
        if (parse_yes_no(v, &o->run_libc_freeres) != 0)
            goto bad;
    } else if (!strcmp(name, "--run-cxx-freeres")) {
        if (parse_yes_no(v, &o->run_cxx_freeres) != 0)
            goto bad;
    } else if (!strcmp(name, "--heaplens-output")) {
        if (!*v)
            goto bad;
        o->keep_trace = v;
    } else if (!strcmp(a, "--")) {
        (*i)++;
        return 0;
    } else if (o->vg.verbosity) {
        fprintf(stderr, "heaplens: memcheck: %s has no effect under heaplens\n", a);
    }
    (void)argc;
    return 1;
bad:
    cli_error("memcheck: bad value in '%s' (see heaplens memcheck --help)", a);
    return -1;
}

// The log file's name for process pid: %p the pid, %q{VAR} the environment's VAR, %% a %.
static int expand_log_name(const char* pat, long pid, char* out, size_t cap) {
    size_t o = 0;
    for (const char* p = pat; *p; p++) {
        char piece[PATH_MAX];
        piece[0] = 0;
        if (*p != '%') {
            piece[0] = *p;
            piece[1] = 0;
        } else if (p[1] == 'p') {
            snprintf(piece, sizeof piece, "%ld", pid);
            p++;
        } else if (p[1] == '%') {
            snprintf(piece, sizeof piece, "%%");
            p++;
        } else if (p[1] == 'q' && p[2] == '{' && strchr(p + 3, '}')) {
            const char* close = strchr(p + 3, '}');
            char var[256];
            snprintf(var, sizeof var, "%.*s", (int)(close - p - 3), p + 3);
            const char* val = getenv(var);
            if (!val) {
                cli_error("--log-file: %%q{%s}: the environment has no %s", var, var);
                return -1;
            }
            snprintf(piece, sizeof piece, "%s", val);
            p = close;
        } else {
            cli_error("--log-file: '%s': %% must be followed by p, q{VAR} or %%", pat);
            return -1;
        }
        size_t n = strlen(piece);
        if (o + n >= cap) {
            cli_error("--log-file: '%s': the name is too long", pat);
            return -1;
        }
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = 0;
    return 0;
}

// A TCP connection to HOST[:PORT] (IDEs listen so for memcheck's XML). -1 after one error line.
static int connect_socket(const char* spec, const char* what) {
    char host[256];
    const char* colon = strrchr(spec, ':');
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, colon ? colon + 1 : MC_SOCKET_PORT, &hints, &res);
    if (rc != 0) {
        cli_error("%s socket %s: %s", what, spec, gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo* a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        cli_error("%s socket %s: %s", what, spec, strerror(err ? err : errno));
    return fd;
}

// A stream for a destination: a file named by a pattern, a socket, or a descriptor (duplicated,
// so that closing the stream leaves it open). NULL after one error line.
static FILE* open_destination(const char* pattern, const char* sock, int fd, long pid,
                              const char* what, int append) {
    if (sock) {
        int s = connect_socket(sock, what);
        FILE* f = s >= 0 ? fdopen(s, "w") : NULL;
        if (s >= 0 && !f)
            close(s);
        return f;
    }
    if (pattern) {
        char path[PATH_MAX];
        if (expand_log_name(pattern, pid, path, sizeof path) != 0)
            return NULL;
        // The first open goes through the safe opener; appending (a child's part of a log
        // file) reopens the file that first open made.
        char why[256] = "cannot open for writing";
        FILE* f = append ? fopen(path, "a") : outfile_fopen(path, why, sizeof why);
        if (!f)
            cli_error("%s %s: %s", what, path, append ? strerror(errno) : why);
        return f;
    }
    int copy = dup(fd);
    FILE* f = copy >= 0 ? fdopen(copy, "w") : NULL;
    if (!f) {
        cli_error("%s descriptor %d: %s", what, fd, strerror(errno));
        if (copy >= 0)
            close(copy);
    }
    return f;
}

// One process's trace as memcheck's reports. 0, or 1 after one error line.
static int report_process(mc_opts_t* o, const char* trace, long pid, uint64_t* errors) {
    cli_report_opts_t ro;
    cli_report_defaults(&ro);
    cli_trace_t t;
    if (cli_trace_open(&t, trace, &ro) != 0)
        return 1;
    vg_opts_t vo = o->vg;
    vo.pid = pid;
    vg_report_t* r = vg_report_new(t.ctx, &vo);
    int status = 0;
    if (!r) {
        cli_error("out of memory");
        status = 1;
    }
    // With --xml=yes, memcheck writes no text unless a log destination is named.
    int wants_text = !o->is_xml || o->log_file || o->log_fd >= 0 || o->log_socket;
    if (r && wants_text) {
        FILE* f = open_destination(o->log_file, o->log_socket, o->log_fd >= 0 ? o->log_fd : 2, pid,
                                   "log", o->log_append);
        if (f) {
            vg_report_text(f, r);
            if (fclose(f) != 0)
                status = 1;
        } else {
            status = 1;
        }
    }
    if (r && o->is_xml) {
        FILE* f = open_destination(o->xml_file, o->xml_socket, o->xml_fd, pid, "XML", 0);
        if (f) {
            vg_report_xml(f, r);
            if (fclose(f) != 0)
                status = 1;
        } else {
            status = 1;
        }
    }
    if (r)
        *errors += vg_report_errors(r);
    vg_report_free(r);
    cli_trace_close(&t);
    return status;
}

// Removes the directory's files (the traces) and the directory.
static void remove_dir(const char* dir) {
    DIR* d = opendir(dir);
    if (d) {
        struct dirent* e;
        char path[PATH_MAX];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

static int report_run(void* arg, const cli_run_result_t* res, int* has_errors) {
    mc_opts_t* o = arg;
    uint64_t errors = 0;
    o->vg.exit_status = res->exit_status;
    o->vg.exit_signal = res->exit_signal;
    int status = report_process(o, res->trace, res->pid, &errors);
    // Children's text follows the parent's in a log file whose name has no %p; their XML goes
    // only to files of their own (an XML document is one process's).
    int has_log = o->log_file || o->log_fd >= 0 || o->log_socket;
    int xml_per_pid = o->xml_file && strstr(o->xml_file, "%p");
    for (size_t i = 0; o->trace_children && i < res->nchildren; i++) {
        mc_opts_t child = *o;
        child.log_append = o->log_file && !strstr(o->log_file, "%p");
        if (o->is_xml && !xml_per_pid) {
            if (!has_log)
                continue; // nowhere to write
            child.is_xml = 0;
        }
        child.vg.exit_status = -1;
        child.vg.exit_signal = 0;
        status |= report_process(&child, res->children[i].trace, res->children[i].pid, &errors);
    }
    *has_errors = errors > 0;
    // Now: a program killed by a signal ends heaplens by the same signal, without returning.
    if (o->trace_dir)
        remove_dir(o->trace_dir);
    return status;
}

int cmd_memcheck(int argc, char** argv) {
    mc_opts_t o = {
        .vg =
            {
                .leak_check = VG_LEAK_CHECK_SUMMARY,
                .show_kinds = (1u << HL_LEAK_DEFINITE) | (1u << HL_LEAK_POSSIBLE),
                .error_kinds = (1u << HL_LEAK_DEFINITE) | (1u << HL_LEAK_POSSIBLE),
                .num_callers = MC_NUM_CALLERS_DEFAULT,
                .verbosity = 1,
                .exit_status = -1,
                .tool_version = "heaplens-" HEAPLENS_VERSION,
            },
        .log_fd = -1,
        .xml_fd = -1,
        .run_libc_freeres = 1,
        .run_cxx_freeres = 1,
        .argv = argv,
    };
    int i = 1;
    for (; i < argc; i++) {
        int r = parse_option(&o, argc, argv, &i);
        if (r < 0 || r == 2) {
            vsupp_free(o.supp);
            return r < 0 ? 1 : 0;
        }
        if (r == 0)
            break;
    }
    if (i >= argc) {
        cli_error("memcheck: which program? usage: heaplens memcheck [options] PROGRAM [ARGS...]");
        vsupp_free(o.supp);
        return 1;
    }
    if (o.is_xml && !o.xml_file && o.xml_fd < 0 && !o.xml_socket) {
        cli_error("memcheck: --xml=yes needs a destination: --xml-file=FILE, --xml-fd=N or "
                  "--xml-socket=HOST:PORT");
        vsupp_free(o.supp);
        return 1;
    }
    o.vg.supp = o.supp;
    // <vargv> names the tool's executable, then its options.
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    char* exe_argv0 = argv[0];
    if (n > 0)
        argv[0] = self;
    o.vg.vargv = argv;
    o.vg.nvargv = i;

    cli_run_opts_t ro = {
        .depth = o.vg.num_callers < MC_DEPTH_MAX ? o.vg.num_callers : MC_DEPTH_MAX,
        .guard = 8,
        .sample_ms = 10,
        .no_follow = !o.trace_children,
        .no_libc_freeres = !o.run_libc_freeres,
        .no_cxx_freeres = !o.run_cxx_freeres,
    };
    cli_report_defaults(&ro.report);
    ro.report.error_exitcode = o.error_exitcode;
    char dir[] = "/tmp/heaplens-memcheck-XXXXXX";
    char output[sizeof dir + 32];
    if (o.keep_trace) {
        ro.output = o.keep_trace;
    } else {
        if (!mkdtemp(dir)) {
            cli_error("cannot create a directory in /tmp: %s", strerror(errno));
            vsupp_free(o.supp);
            return 1;
        }
        snprintf(output, sizeof output, "%s/%%p.hl", dir);
        ro.output = output;
        o.trace_dir = dir;
    }
    int rc = cli_run_traced(ro, argv + i, report_run, &o);
    argv[0] = exe_argv0;
    if (o.trace_dir)
        remove_dir(o.trace_dir);
    vsupp_free(o.supp);
    return rc;
}
