// SPDX-License-Identifier: MIT
// growth_alert.h - heaplens run --alert-growth while the program runs (growth_alert.c).
#ifndef HL_CLI_GROWTH_ALERT_H
#define HL_CLI_GROWTH_ALERT_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"

typedef struct growth_alert_s {
    long pid;         // the program, through its control socket
    double rate;      // bytes per second a call site must grow by
    double window_s;  // the last this many seconds, cut in AG_GROWTH_WINDOWS parts
    const cli_report_opts_t* report;
    uint32_t* said;   // the stacks of the call sites already said (each once)
    size_t nsaid, cap;
    int is_off;       // no control socket, or the trace is a collector's: no live alerts
} growth_alert_t;

// One look, every part of the window: the program flushes its trace, which is read up to there;
// each call site that grew by the rate in every part of the last window, and was not said
// before, gets one line on stderr.
void growth_alert_check(growth_alert_t* g);
void growth_alert_free(growth_alert_t* g);

#endif
