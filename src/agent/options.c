// SPDX-License-Identifier: MIT
// options.c - the agent's settings, read once at start into one struct. heaplens run passes them
// all in one variable, HEAPLENS_OPTIONS ("depth=32:guard=8:output=/path/t.%p.hl", a backslash
// quoting the next character), so that the program sees one variable of heaplens's besides
// LD_PRELOAD. A user preloading the agent by hand may set that, or the same settings one
// variable each (HEAPLENS_DEPTH, HEAPLENS_OUTPUT, ...); HEAPLENS_OPTIONS wins over those.
//
// With no_follow, the agent also takes itself out of the environment the program's children
// inherit (scrub_environ). Neither step allocates: getenv does not, and the environment is
// edited by moving its pointers, never by freeing or growing what the program may own.
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#include "../common/checkopts.h"
#include "gsites.h"
#include "log.h"
#include "os.h"
#include "options.h"
#include "stacks.h"
#include "session.h"

hl_options_t hl_opt = {
    .depth = 32,
    .guard = 8,
    .sample_ms = 10,
    .scan_at_exit = 1,
    .control = 1,
    .release_stacks = 1,
    .libc_freeres = 1,
    .cxx_freeres = 1,
    .trailers = 1,
    .unwind_cfi = 1,
    .unwind_hits = 1,
    .paint_alloc = -1,
    .paint_free = -1,
};

// Blocks from this size carry the agent's header (when guards are on), unless told otherwise:
// from here the 16 bytes cost at most 6% and the block's record shares the chunk's cache line.
#define HL_HEADER_MIN_DEFAULT 256

#define OPTIONS_VAR "HEAPLENS_OPTIONS"

// LD_PRELOAD without the agent is written into the agent's own memory (the program's string is
// never changed); one longer than this keeps the agent (scrub_environ says so). Two dozen
// libraries by long paths fit.
#define HL_PRELOAD_MAX 8192

// One setting: its name in HEAPLENS_OPTIONS, and HEAPLENS_ + the name in capitals for its
// variable of its own. Integers are kept within [lo, hi].
typedef struct option_s {
    const char* name;
    const char* var;
    int* value; // NULL: a string, into str
    int lo, hi;
    char* str;
    size_t cap;
} option_t;

static int header_min = HL_HEADER_MIN_DEFAULT;

static const option_t options[] = {
    {"depth", "HEAPLENS_DEPTH", &hl_opt.depth, 1, HL_MAX_DEPTH, NULL, 0},
    {"guard", "HEAPLENS_GUARD", &hl_opt.guard, 0, 4096, NULL, 0},
    {"sample_ms", "HEAPLENS_SAMPLE_MS", &hl_opt.sample_ms, 1, 3600000, NULL, 0},
    {"allocator_stats", "HEAPLENS_ALLOCATOR_STATS", &hl_opt.alloc_stats_ms, 0, 3600000, NULL, 0},
    {"no_follow", "HEAPLENS_NO_FOLLOW", &hl_opt.no_follow, 0, 1, NULL, 0},
    {"scan", "HEAPLENS_SCAN", &hl_opt.scan_at_exit, 0, 1, NULL, 0},
    {"control", "HEAPLENS_CONTROL", &hl_opt.control, 0, 1, NULL, 0},
    {"wait", "HEAPLENS_WAIT", &hl_opt.wait, 0, 1, NULL, 0},
    {"disable", "HEAPLENS_DISABLE", &hl_opt.is_disabled, 0, 1, NULL, 0},
    {"release_stacks", "HEAPLENS_RELEASE_STACKS", &hl_opt.release_stacks, 0, 1, NULL, 0},
    {"libc_freeres", "HEAPLENS_LIBC_FREERES", &hl_opt.libc_freeres, 0, 1, NULL, 0},
    {"cxx_freeres", "HEAPLENS_CXX_FREERES", &hl_opt.cxx_freeres, 0, 1, NULL, 0},
    {"unwind_cfi", "HEAPLENS_UNWIND_CFI", &hl_opt.unwind_cfi, 0, 1, NULL, 0},
    {"unwind_check", "HEAPLENS_UNWIND_CHECK", &hl_opt.unwind_check, 0, 1, NULL, 0},
    {"header_min", "HEAPLENS_HEADER_MIN", &header_min, 0, 1 << 30, NULL, 0},
    {"trailers", "HEAPLENS_TRAILERS", &hl_opt.trailers, 0, 1, NULL, 0},
    {"redzone", "HEAPLENS_REDZONE", &hl_opt.redzone, 0, HL_REDZONE_MAX, NULL, 0},
    {"paint", "HEAPLENS_PAINT", NULL, 0, 0, hl_opt.paint, sizeof hl_opt.paint},
    {"guard_pages", "HEAPLENS_GUARD_PAGES", NULL, 0, 0, hl_opt.guard_pages,
     sizeof hl_opt.guard_pages},
    {"guard_pages_before", "HEAPLENS_GUARD_PAGES_BEFORE", &hl_opt.gpage_before, 0, 1, NULL, 0},
    {"guard_pages_abort", "HEAPLENS_GUARD_PAGES_ABORT", &hl_opt.gpage_abort, 0, 1, NULL, 0},
    // Kept by gsites.c, not in a buffer here: a range per function may be long (no str, no value).
    {"guard_sites", "HEAPLENS_GUARD_SITES", NULL, 0, 0, NULL, 0},
    {"hoard", "HEAPLENS_HOARD", NULL, 0, 0, hl_opt.hoard_size, sizeof hl_opt.hoard_size},
    {"output", "HEAPLENS_OUTPUT", NULL, 0, 0, hl_opt.output, sizeof hl_opt.output},
    {"session", "HEAPLENS_SESSION", NULL, 0, 0, hl_opt.session, sizeof hl_opt.session},
    {"remote", "HEAPLENS_REMOTE", NULL, 0, 0, hl_opt.remote, sizeof hl_opt.remote},
    {"remote_token", "HEAPLENS_REMOTE_TOKEN", NULL, 0, 0, hl_opt.remote_token,
     sizeof hl_opt.remote_token},
};
#define NOPTIONS (sizeof options / sizeof *options)

// Sets opt from the text s (from where, for a message). Bad values are ignored, with a line.
static void set_option(const option_t* opt, const char* s, const char* where) {
    if (!opt->value && !opt->str) {
        if (gsites_set(s, strlen(s)) != 0)
            hl_log("ignoring guard_sites in %s: expected what heaplens run --guard-sites gives, "
                   "MODULE@VADDR+LEN,...;... (see heaplens(1))", where);
        return;
    }
    if (!opt->value) {
        if (strlen(s) < opt->cap)
            strcpy(opt->str, s);
        else
            hl_log("ignoring %s in %s: longer than %zu bytes", opt->name, where, opt->cap - 1);
        return;
    }
    if (!*s)
        return;
    long v = 0;
    const char* p = s;
    for (; *p >= '0' && *p <= '9' && v <= opt->hi; p++)
        v = v * 10 + (*p - '0');
    if (*p || v < opt->lo || v > opt->hi) {
        hl_log("ignoring %s in %s: not a number in [%d, %d]", opt->name, where, opt->lo, opt->hi);
        return;
    }
    *opt->value = (int)v;
}

static const option_t* find_option(const char* name, size_t len) {
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strlen(options[i].name) == len && !memcmp(options[i].name, name, len))
            return &options[i];
    return NULL;
}

// guard_sites's value from s to the first unescaped ':' (it may be longer than any other
// setting's: unescaped into a mapping of its own); returns where the value ends.
static const char* take_long_value(const option_t* opt, const char* s) {
    size_t n = 0, cap = strlen(s) + 1;
    char* value = os_map(cap);
    for (; *s && *s != ':'; s++) {
        if (*s == '\\' && s[1])
            s++;
        if (value)
            value[n++] = *s;
    }
    if (value) {
        value[n] = 0;
        set_option(opt, value, OPTIONS_VAR);
        os_unmap(value, cap);
    }
    return s;
}

// HEAPLENS_OPTIONS: NAME=VALUE settings separated by ':'; '\' takes the next character as it
// is (a path may hold ':' or '\').
static void parse_options_var(const char* s) {
    char value[sizeof hl_opt.output + 1];
    while (*s) {
        const char* name = s;
        while (*s && *s != '=' && *s != ':')
            s++;
        size_t name_len = (size_t)(s - name);
        const option_t* long_opt = *s == '=' ? find_option(name, name_len) : NULL;
        if (long_opt && !long_opt->value && !long_opt->str) {
            s = take_long_value(long_opt, s + 1);
            if (*s == ':')
                s++;
            continue;
        }
        size_t n = 0;
        int is_long = 0;
        if (*s == '=') {
            for (s++; *s && *s != ':'; s++) {
                if (*s == '\\' && s[1])
                    s++;
                if (n < sizeof value - 1)
                    value[n++] = *s;
                else
                    is_long = 1;
            }
        }
        value[n] = 0;
        if (*s == ':')
            s++;
        if (!name_len)
            continue;
        const option_t* opt = find_option(name, name_len);
        char shown[64];
        size_t shown_len = name_len < sizeof shown - 1 ? name_len : sizeof shown - 1;
        memcpy(shown, name, shown_len);
        shown[shown_len] = 0;
        if (!opt)
            hl_log("ignoring '%s' in " OPTIONS_VAR ": not a setting", shown);
        else if (is_long)
            hl_log("ignoring %s in " OPTIONS_VAR ": too long", shown);
        else
            set_option(opt, value, OPTIONS_VAR);
    }
}

// ---------------------------------------------------------------------------------------------
// no_follow: the agent out of what the children inherit
// ---------------------------------------------------------------------------------------------
extern char** environ;

// "NAME=" of a variable that is the agent's own: HEAPLENS_OPTIONS, one of the settings' own.
static int is_agent_var(const char* entry) {
    if (strncmp(entry, "HEAPLENS_", 9) != 0)
        return 0;
    size_t len = strcspn(entry, "=");
    if (!entry[len])
        return 0;
    if (len == sizeof OPTIONS_VAR - 1 && !memcmp(entry, OPTIONS_VAR, len))
        return 1;
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strlen(options[i].var) == len && !memcmp(entry, options[i].var, len))
            return 1;
    return 0;
}

// The agent's own file, to know it among LD_PRELOAD's entries.
typedef struct self_file_s {
    struct stat st;
    int has_st;
    const char* base; // its file name, for entries the loader searched for
} self_file_t;

static int self_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    (void)size;
    self_file_t* self = arg;
    uintptr_t mine = (uintptr_t)&parse_options_var;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || mine < lo || mine >= lo + ph->p_memsz)
            continue;
        if (!info->dlpi_name || !info->dlpi_name[0])
            return 1;
        self->has_st = fstatat(AT_FDCWD, info->dlpi_name, &self->st, 0) == 0;
        const char* slash = strrchr(info->dlpi_name, '/');
        self->base = slash ? slash + 1 : info->dlpi_name;
        return 1;
    }
    return 0;
}

// Is the entry (len bytes) of LD_PRELOAD the agent? The same file, or, for a name the loader
// searched the library path for, the same file name.
static int is_agent_entry(const self_file_t* self, const char* entry, size_t len) {
    char path[PATH_MAX];
    if (len >= sizeof path)
        return 0;
    memcpy(path, entry, len);
    path[len] = 0;
    if (!strchr(path, '/'))
        return self->base && !strcmp(path, self->base);
    // heaplens run names the agent as DIR/agents/$PLATFORM/libheaplens.so, which the loader
    // expands to this process's platform (a 64-bit or a 32-bit agent): so is it here.
    char* token = strstr(path, "$PLATFORM");
    const char* platform = (const char*)getauxval(AT_PLATFORM);
    if (token && platform) {
        size_t head = (size_t)(token - path), plen = strlen(platform);
        size_t tail = strlen(token + sizeof "$PLATFORM" - 1);
        if (head + plen + tail >= sizeof path)
            return 0;
        memmove(path + head + plen, token + sizeof "$PLATFORM" - 1, tail + 1);
        memcpy(path + head, platform, plen);
    }
    struct stat st;
    return self->has_st && fstatat(AT_FDCWD, path, &st, 0) == 0 && st.st_dev == self->st.st_dev &&
           st.st_ino == self->st.st_ino;
}

// LD_PRELOAD without the agent, written to out (the whole "LD_PRELOAD=..." entry); 0 when
// nothing else is left, -1 when it does not fit.
static int preload_without_agent(const self_file_t* self, const char* entry, char* out,
                                 size_t cap) {
    const char* list = entry + sizeof "LD_PRELOAD=" - 1;
    size_t n = sizeof "LD_PRELOAD=" - 1, kept = 0;
    memcpy(out, entry, n);
    // The loader takes ':' and ' ' alike between entries.
    for (const char* p = list; *p;) {
        size_t len = strcspn(p, ": ");
        if (len && !is_agent_entry(self, p, len)) {
            if (n + len + 2 > cap)
                return -1;
            if (kept++)
                out[n++] = ':';
            memcpy(out + n, p, len);
            n += len;
        }
        p += len;
        if (*p)
            p++;
    }
    out[n] = 0;
    return kept ? 1 : 0;
}

// Takes HEAPLENS_OPTIONS, the settings' own variables and the agent's entry of LD_PRELOAD out of
// environ, so that what the program starts runs without heaplens. Other entries keep their
// strings and their order; the array is only shortened in place (it may be the program's own),
// and a changed LD_PRELOAD lives in the agent's memory, which stays mapped to the end.
static void scrub_environ(void) {
    static char preload[HL_PRELOAD_MAX];
    if (!environ)
        return;
    self_file_t self = {0};
    dl_iterate_phdr(self_cb, &self);
    int kept = -2; // LD_PRELOAD: -2 absent, else preload_without_agent's answer
    for (size_t i = 0; environ[i] && kept == -2; i++)
        if (!strncmp(environ[i], "LD_PRELOAD=", 11))
            kept = preload_without_agent(&self, environ[i], preload, sizeof preload);
    if (kept == -1) {
        // The children load the agent then; with its settings it knows not to trace them, and
        // only the run's first image says so.
        if (!session_has_entries())
            hl_log("LD_PRELOAD is too long to take the agent out of: it stays in the environment");
        return;
    }
    size_t out = 0;
    for (size_t in = 0; environ[in]; in++) {
        char* e = environ[in];
        if (is_agent_var(e))
            continue;
        if (!strncmp(e, "LD_PRELOAD=", 11)) {
            if (!kept)
                continue;
            e = preload;
            kept = 0; // a second LD_PRELOAD goes: the loader takes the last, with the agent
        }
        environ[out++] = e;
    }
    environ[out] = NULL;
}

// Released blocks held back are painted so that a write to one shows; this byte unless --paint
// names another (memory debuggers' customary "dead" byte).
#define HL_HOARD_PAINT_DEFAULT 0xDD

// The heap checking settings into their values; a bad one is ignored with a line, as others.
static void checking_load(void) {
    if (hl_opt.paint[0] && hl_parse_paint(hl_opt.paint, &hl_opt.paint_alloc, &hl_opt.paint_free)) {
        hl_log("ignoring paint=%s: expected alloc:BYTE,free:BYTE (either alone)", hl_opt.paint);
        hl_opt.paint_alloc = hl_opt.paint_free = -1;
    }
    uint64_t hoard = 0;
    if (hl_opt.hoard_size[0] && hl_parse_size(hl_opt.hoard_size, &hoard))
        hl_log("ignoring hoard=%s: expected a size such as 65536, 512K, 64M, 1G",
               hl_opt.hoard_size);
    hl_opt.hoard = hoard;
    uint32_t every = 0;
    if (hl_opt.guard_pages[0] && hl_parse_rate(hl_opt.guard_pages, &every))
        hl_log("ignoring guard_pages=%s: expected 1 or 1/N", hl_opt.guard_pages);
    // Sites alone: every allocation through them; with a rate, one in N of those.
    if (hl_gsites_on && !every)
        every = 1;
    hl_opt.gpage_every = every;
    if (hl_opt.hoard && hl_opt.paint_free < 0)
        hl_opt.paint_free = HL_HOARD_PAINT_DEFAULT;
    // The zone before keeps the program's pointer 16-aligned; the one after is the guard.
    hl_opt.redzone_before = (hl_opt.redzone + 15) & ~15;
    if (hl_opt.redzone > hl_opt.guard)
        hl_opt.guard = hl_opt.redzone;
    hl_opt.checking = hl_opt.redzone || hl_opt.paint_alloc >= 0 || hl_opt.paint_free >= 0 ||
                      hl_opt.hoard || hl_opt.gpage_every;
}

void options_checking_off(void) {
    if (hl_opt.checking)
        hl_log("heap checking is off: blocks this process made before heaplens, or inside its own "
               "allocator, keep the allocator's layout");
    hl_opt.redzone = hl_opt.redzone_before = 0;
    hl_opt.paint_alloc = hl_opt.paint_free = -1;
    hl_opt.hoard = 0;
    hl_opt.gpage_every = 0;
    hl_opt.checking = 0;
}

// What follows from the settings read, once they all are (at start, and for a session's own).
static void derive_options(void) {
    checking_load();
    // Guards must keep the real block's alignment: round to the pointer size.
    hl_opt.guard = (hl_opt.guard + 7) & ~7;
    // Without guards the allocator's layout stays untouched: no headers either; nor with
    // checking, whose blocks have their red zone where a header would be.
    hl_opt.header_min = hl_opt.guard && !hl_opt.checking ? (size_t)header_min : SIZE_MAX;
    // With unwind_check every found stack goes through capture(), which checks it: the hot
    // path tests nothing more.
    hl_opt.unwind_hits = hl_opt.unwind_cfi && !hl_opt.unwind_check;
    if (!hl_opt.output[0])
        strcpy(hl_opt.output, "heaplens.%e.%p.hl");
}

// The settings as the agent was built, for a session that sets its own (attach).
static hl_options_t built_in;
static int has_built_in;

void options_load_string(const char* s) {
    if (!has_built_in) {
        built_in = hl_opt;
        has_built_in = 1;
    }
    hl_opt = built_in;
    header_min = HL_HEADER_MIN_DEFAULT;
    parse_options_var(s);
    derive_options();
}

void options_load(void) {
    for (size_t i = 0; i < NOPTIONS; i++) {
        const char* s = getenv(options[i].var);
        if (s)
            set_option(&options[i], s, options[i].var);
    }
    const char* all = getenv(OPTIONS_VAR);
    if (all)
        parse_options_var(all);
    derive_options();
    if (hl_opt.no_follow)
        scrub_environ();
}
