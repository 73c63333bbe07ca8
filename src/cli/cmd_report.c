// SPDX-License-Identifier: MIT
// cmd_report.c - heaplens report TRACE: the same report as at the end of a run, from the file.
#include <string.h>

#include "cli.h"

int cmd_report(int argc, char** argv) {
    cli_report_opts_t o;
    cli_report_defaults(&o);
    const char* trace = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_report_option(argc, argv, &i, &o);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("report: unknown option '%s'", argv[i]);
            return 2;
        }
        if (trace) {
            cli_error("report: one trace at a time ('%s' and '%s')", trace, argv[i]);
            return 2;
        }
        trace = argv[i];
    }
    if (!trace) {
        cli_error("report: which trace? usage: heaplens report [options] TRACE");
        return 2;
    }
    int has_errors;
    if (cli_report_trace(trace, &o, NULL, 0, -1, 0, &has_errors) != 0)
        return 1;
    return o.error_exitcode && has_errors ? o.error_exitcode : 0;
}
