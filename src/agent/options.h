// SPDX-License-Identifier: MIT
// options.h - the agent's settings, from the HEAPLENS_* environment, parsed once (options.c).
#ifndef HL_OPTIONS_H
#define HL_OPTIONS_H

#include <stddef.h>

typedef struct hl_options_s {
    int depth;          // frames per backtrace
    int guard;          // guard bytes after each block (0 = allocator layout untouched)
    int sample_ms;      // heap/RSS sample period
    int no_follow;      // do not trace forked children or exec'd images
    int scan_at_exit;   // run the reachability scan at exit
    int is_disabled;    // HEAPLENS_DISABLE: pass everything through
    int release_stacks; // unwind releases too, so a double free names the first release
    int control;        // listen on a control socket (control.c)
    int wait;           // start the program only once a shell has connected (run --wait)
    size_t header_min;  // blocks of malloc/calloc/realloc from this size carry a header
    char output[1024];  // trace path template: %p pid, %e program name
    char session[1024]; // file that lists every trace this session writes
    char remote[1024];  // the collector the trace goes to (unix:PATH, tcp:HOST:PORT), or ""
    char remote_token[1024]; // a file holding the secret the collector asks for first, or ""
} hl_options_t;

extern hl_options_t hl_opt;
void options_load(void);
void options_load_string(const char* s); // built-in settings, then s (as HEAPLENS_OPTIONS)

#endif
