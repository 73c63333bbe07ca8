// SPDX-License-Identifier: MIT
// options.h - the agent's settings, from the HEAPLENS_* environment, parsed once (options.c).
#ifndef HL_OPTIONS_H
#define HL_OPTIONS_H

#include <stddef.h>

typedef struct hl_options_s {
    int depth;          // frames per backtrace
    int guard;          // guard bytes after each block (0 = allocator layout untouched)
    int sample_ms;      // heap/RSS sample period
    int alloc_stats_ms; // allocator statistics sample period (allocstats.c; 0: none)
    int no_follow;      // do not trace forked children or exec'd images
    int scan_at_exit;   // run the reachability scan at exit
    int is_disabled;    // HEAPLENS_DISABLE: pass everything through
    int release_stacks; // unwind releases too, so a double free names the first release
    int libc_freeres;   // at exit, glibc's __libc_freeres runs (libc_exit.h): as memcheck has
                        // glibc release what it keeps to the end by default
    int cxx_freeres;    // at exit, libstdc++'s __gnu_cxx::__freeres too (its exception pool)
    int unwind_cfi;     // the agent's own unwinder (unwind.c); 0: libgcc's for every stack
    int unwind_check;   // a test's setting: every stack taken from earlier walks walked again
    int unwind_hits;    // the own unwinder, unchecked: a found stack answers at once (capture_hit)
    int control;        // listen on a control socket (control.c)
    int wait;           // start the program only once a shell has connected (run --wait)
    size_t header_min;  // blocks of malloc/calloc/realloc from this size carry a header
    int trailers;       // smaller guarded blocks over glibc keep their record in their chunk's
                        // last word (live_header.c); 0: in the direct map
    // Heap checking (check.c, layout.c, hoard.c); any of them makes `checking` 1, and every block
    // then takes the checked path (no header: the red zone is what comes before a block).
    int checking;
    int redzone;          // red zone bytes asked for on each side (0: none)
    int redzone_before;   // the zone before a block: redzone rounded up to 16 (alignment)
    int paint_alloc;      // byte new blocks are filled with, or -1
    int paint_free;       // byte released blocks are filled with, or -1
    unsigned long long hoard; // bytes of released blocks held back from reuse (0: none)
    unsigned gpage_every; // one allocation in this many on a guard page (0: none)
    int gpage_before;     // the guard page before the block (underruns), not after it
    int gpage_abort;      // a guard page's fault, once reported, ends the program (SIGSEGV)
    char guard_pages[32]; // "1", "1/1000"
    char paint[64];       // the settings as given: "alloc:0xAA,free:0xDD"
    char hoard_size[32];  // "64M"
    char output[1024];  // trace path template: %p pid, %e program name
    char session[1024]; // file that lists every trace this session writes
    char remote[1024];  // the collector the trace goes to (unix:PATH, tcp:HOST:PORT), or ""
    char remote_token[1024]; // a file holding the secret the collector asks for first, or ""
} hl_options_t;

extern hl_options_t hl_opt;
void options_load(void);
void options_load_string(const char* s); // built-in settings, then s (as HEAPLENS_OPTIONS)
void options_checking_off(void);         // no red zones, paint, hoard or guard pages

#endif
