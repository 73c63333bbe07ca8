// SPDX-License-Identifier: MIT
// cli.h - the subcommands and what they share: options that shape a report, and the one place
// that turns a model into the stderr report and the JSON file.
#ifndef HL_CLI_H
#define HL_CLI_H

#include <stdio.h>

#include "../analyze/report.h"

#define HEAPLENS_VERSION "0.9.0"

typedef struct cli_report_opts_s {
    const char* json_path;      // NULL: none; "-": stdout
    const char* html_path;      // NULL: none; "-": stdout
    const char* sarif_path;     // NULL: none; "-": stdout
    const char* suppressions;
    unsigned show_kinds;
    int error_exitcode;         // 0: off
    int is_quiet;
    const char* sysroot;
    const char* debug_dirs[8]; // --debug-dir, in the order given
    int ndebug_dirs;
} cli_report_opts_t;

// Parses one report option at argv[*i] (advancing *i past a separate value). Returns 1 when it
// was one, 0 when not, -1 on a bad value (message printed).
int cli_report_option(int argc, char** argv, int* i, cli_report_opts_t* o);
void cli_report_defaults(cli_report_opts_t* o);

// A trace loaded for reporting: its model, symbolizing context and suppressions.
typedef struct cli_trace_s {
    model_t* m;
    report_ctx_t* ctx;
    suppressions_t* supp;
    struct aggregate_s* page; // the page's views, made while the trace was read, or NULL
    symbolizer_t* sym;        // while the trace is read; the context's after
    model_observer_t obs;     // what goes on beside the reading (cli_trace_observer)
    int is_observed;
} cli_trace_t;

// Load (0), or print one error line and return 1 (nothing left to close). A trace cut short is
// read up to where it ends (the reports say so); a corrupt one is refused.
int cli_trace_open(cli_trace_t* t, const char* trace, const cli_report_opts_t* o);
// A trace whose bytes are wrong (not merely cut short): its reports would tell what the damage
// made up, so it is refused. Prints one line "TRACE: corrupt trace: why, where" and returns 1;
// 0 when the trace is sound.
int cli_trace_is_corrupt(const char* trace, const model_t* m);
// Are there definitely or indirectly lost blocks (after suppressions) or heap errors?
int cli_trace_has_errors(cli_trace_t* t);
void cli_trace_close(cli_trace_t* t);
// Set by heaplens shell: the traces it reads are still being written, so that they have no end
// yet is not worth a line.
extern int cli_trace_is_live;

// Load the trace, print the report (stderr) and JSON. *has_errors tells whether definite or
// indirect leaks or heap errors exist. Returns 0, or 1 after printing one error line.
int cli_report_trace(const char* trace, const cli_report_opts_t* o, const report_child_t* kids,
                     size_t nkids, int exit_status, int exit_signal, int* has_errors);

// The same in steps, for a trace read while its program runs (run_follow.c): cli_trace_begin
// (0, or 1 after one error line), the model read with model_begin(t->m, cli_trace_observer(t))
// and model_read, then cli_trace_suppressions (0, or 1 after one error line: the caller closes
// t) and cli_trace_finish with model_end's result (0, or 1 after one error line, t closed),
// then cli_report_loaded, which reports as cli_report_trace and closes t.
int cli_trace_begin(cli_trace_t* t, const cli_report_opts_t* o, int with_page);
int cli_trace_suppressions(cli_trace_t* t, const cli_report_opts_t* o);
const model_observer_t* cli_trace_observer(const cli_trace_t* t);
int cli_trace_finish(cli_trace_t* t, const char* trace, int rc);
int cli_report_loaded(cli_trace_t* t, const char* trace, const cli_report_opts_t* o,
                      const report_child_t* kids, size_t nkids, int exit_status, int exit_signal,
                      int* has_errors);

// The call sites whose live bytes rose in each quarter of the run, growing by `rate` bytes/s or
// more, on stderr (the run's report): 0, or 1 after printing one error line.
int cli_report_growth(const char* trace, const cli_report_opts_t* o, double rate);

// The HTML page for a loaded trace; 0, or 1 after printing one error line.
int cli_write_html(const char* path, report_ctx_t* ctx, const report_opts_t* ro,
                   const char* trace);

// The SARIF log for a loaded trace; 0, or 1 after printing one error line.
int cli_write_sarif(const char* path, report_ctx_t* ctx, const report_opts_t* ro);

// "--name=value" or "--name value" at argv[*i] (advancing *i past a separate value): the value,
// or NULL when argv[*i] is another option; *missing (may be NULL) is set when the value is.
const char* cli_option_value(int argc, char** argv, int* i, const char* name, int* missing);

// heaplens run's settings (cmd_run.c); heaplens memcheck fills them in from Valgrind's options.
typedef struct cli_run_opts_s {
    const char* output;
    int depth, guard, sample_ms, no_follow, no_scan, no_release_stacks, no_control, wait;
    int no_libc_freeres; // memcheck's --run-libc-freeres=no: what glibc would release at exit stays
    int no_cxx_freeres;  // memcheck's --run-cxx-freeres=no: libstdc++'s exception pool stays
    int alloc_stats_ms; // --allocator-stats: the allocator's figures every so many ms (0: off)
    int has_alert_growth; // report the call sites growing alert_growth bytes/s or faster
    double alert_growth;
    double alert_window_s;    // while it runs: the growth of the last this many seconds
    const char* remote;       // the collector's address (the trace goes there), or NULL
    const char* remote_token; // absolute path of the file with its secret, or NULL
    int redzone;              // red zone bytes before and after each block (0: none)
    const char* paint;        // "alloc:0xAA,free:0xDD", either half (NULL: none)
    const char* hoard;        // bytes of released blocks held back ("64M"), or NULL
    const char* guard_pages;  // "1" or "1/N": allocations placed against a guard page, or NULL
    int guard_pages_before, guard_pages_abort;
    const char* guard_sites; // REGEX: only allocations through matching functions (NULL: all)
    cli_report_opts_t report;
} cli_run_opts_t;

// What a traced run left for its report: the program's pid and trace, its children's, and how it
// ended (exit_status -1 when it was killed, by exit_signal).
typedef struct cli_run_result_s {
    long pid;
    const char* trace;
    const report_child_t* children;
    size_t nchildren;
    int exit_status, exit_signal;
} cli_run_result_t;

// Reports on a finished run: 0, or 1 after printing one error line. *has_errors says whether
// o.report.error_exitcode applies.
typedef int (*cli_run_report_fn)(void* arg, const cli_run_result_t* r, int* has_errors);

// Runs prog_argv (NULL-terminated) with the agent preloaded, waits for it, reports with report
// (NULL: heaplens run's report), and returns the status heaplens ends with: the program's, or
// o.report.error_exitcode. A program killed by a signal kills heaplens by the same signal.
int cli_run_traced(cli_run_opts_t o, char** prog_argv, cli_run_report_fn report, void* report_arg);

// The agent: $HEAPLENS_AGENT, or libheaplens.so beside the binary or in ../lib/heaplens/. 0, or
// -1 when there is none.
int cli_find_agent(char* out, size_t cap);
// Is there an agent for that platform ($PLATFORM: x86_64, i686...) beside the agent found, in
// AGENT_DIR/agents/PLATFORM/? 1, and then (out given) the name LD_PRELOAD gives it with the
// loader's $PLATFORM; else 0.
int cli_agent_for(const char* agent, const char* platform, char* out, size_t cap);

int cmd_run(int argc, char** argv);
int cmd_memcheck(int argc, char** argv); // cmd_memcheck.c: Valgrind's command line and reports
int cmd_report(int argc, char** argv);
int cmd_diff(int argc, char** argv); // cmd_diff.c
int cmd_html(int argc, char** argv); // cmd_diff.c: heaplens html REPORT.json
int cmd_server(int argc, char** argv); // cmd_server.c: the collector of remote traces
int cmd_shell(int argc, char** argv);  // cmd_shell.c: talk to a traced process while it runs
void cli_usage_shell(FILE* out);
int cmd_attach(int argc, char** argv); // cmd_attach.c: trace a process that is running already
int cmd_detach(int argc, char** argv);
void cli_usage_attach(FILE* out);
void cli_usage_report_options(FILE* out); // report's options, as run's and attach's usage list them
void cli_usage_detach(FILE* out);
// A traced process's control socket (src/agent/control.c) by the agent's rule.
void cli_control_socket(char* out, size_t cap, long pid);
// One command to it and its one-line answer: 0 for "ok ...", -1 (no socket, an error answer).
int cli_control_ask(long pid, const char* cmd, char* out, size_t cap);
// "key=value" of an answer ("trace" takes the rest of the line): 0, or -1.
int cli_control_field(const char* answer, const char* key, char* out, size_t cap);

// Each command's usage (main.c; diff's and memcheck's are in their files), for -h and --help.
void cli_usage_run(FILE* out);
void cli_usage_report(FILE* out);
void cli_usage_html(FILE* out);
int cli_is_help(const char* arg); // -h or --help

// "heaplens: " + message, one line, on stderr.
void cli_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
