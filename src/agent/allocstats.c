// SPDX-License-Identifier: MIT
// allocstats.c - --allocator-stats: what the allocator underneath says of itself (glibc's
// mallinfo2 and malloc_info, or an allocator's own mallinfo) and what the kernel says of the
// process (/proc/thread-self/status), sampled by the writer thread into REC_ALLOC_STATS.
//
// Why this is safe on the writer thread, and what it costs:
// - mallinfo2 and malloc_info lock each arena in turn and walk its free lists. glibc's malloc
//   takes no arena lock while it believes the process single-threaded, so with this option the
//   writer leaves glibc knowing there are two threads (writer_start): the program's mallocs then
//   take their arena's lock, uncontended but not free (README gives the measured cost). Samples
//   space out when a walk takes long (writer.c: HL_STATS_DUTY).
// - Neither calls malloc (Debian's glibc 2.36, disassembled: mallinfo2 calls the lock functions
//   only; malloc_info those, fprintf and fputs). malloc_info writes XML to a FILE, and every
//   FILE is made with malloc (fopencookie's, about 500 bytes): one is made once per process, on
//   the program thread that starts the writer (busy: the agent's own block, never in the trace;
//   see allocstats_prepare), and kept. It is unbuffered (no stdio buffer is ever allocated) and
//   its cookie's write function parses the XML as it comes into fixed tables: nothing grows with
//   the number of arenas or lines.
// - The figures are taken with no agent lock held, then encoded under the writer lock: a thread
//   that dies or is stopped inside malloc keeps its arena's lock, and the writer waiting for it
//   must not hold up the thread that ends the trace (or a scan that stops the world). A fork
//   in between leaves the child a FILE locked by a thread it does not have: the child makes its
//   own (allocstats_reset_after_fork).
// Under another allocator (jemalloc, mimalloc preloaded, or one linked into the executable),
// glibc's functions describe glibc's unused heap, not the program's: those values are recorded
// as not available, never as zeros. tcmalloc's own mallinfo gives three of them.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/format.h"
#include "allocstats.h"
#include "options.h"
#include "real.h"

typedef struct mallinfo2 (*mallinfo2_fn)(void);
typedef struct mallinfo (*mallinfo_fn)(void);
typedef int (*malloc_info_fn)(int, FILE*);

static int source; // HL_AS_SRC_*
static mallinfo2_fn get_mallinfo2;
static mallinfo_fn get_mallinfo; // an allocator's own (tcmalloc), int-sized
static malloc_info_fn get_malloc_info;

// The sample (one owner: the writer thread).
static uint32_t available;
static uint64_t value[HL_AS_COUNT];
static uint32_t arenas;                                      // malloc_info's <heap> elements
static uint64_t arena[HL_AS_ARENAS_MAX][HL_AS_ARENA_FIELDS]; // the first HL_AS_ARENAS_MAX

// ---------------------------------------------------------------------------------------------
// Which allocator the functions describe
// ---------------------------------------------------------------------------------------------
static const void* module_of(const void* fn) {
    Dl_info info;
    return fn && dladdr(fn, &info) ? info.dli_fbase : NULL;
}

static int is_resolved;

static void resolve(void) {
    is_resolved = 1;
    // The definition the program would call: the executable's own, else the first library's.
    void* mi2 = dlsym(RTLD_DEFAULT, "mallinfo2");
    void* mi = dlsym(RTLD_DEFAULT, "mallinfo");
    void* info = dlsym(RTLD_DEFAULT, "malloc_info");
    const void* heap = module_of((const void*)hl_real.malloc);
    if (!heap)
        return;
    if (module_of(mi2) == heap) {
        source = HL_AS_SRC_MALLINFO2;
        get_mallinfo2 = (mallinfo2_fn)mi2;
        if (module_of(info) == heap)
            get_malloc_info = (malloc_info_fn)info;
    } else if (module_of(mi) == heap) {
        source = HL_AS_SRC_MALLINFO;
        get_mallinfo = (mallinfo_fn)mi;
    }
}

// ---------------------------------------------------------------------------------------------
// malloc_info's XML, parsed line by line as glibc writes it (glibc 2.36, malloc/malloc.c):
//   <heap nr="0"> ... <total type="fast" count="C" size="S"/> <total type="rest" .../>
//   <system type="current" size="S"/> <system type="max" size="S"/> ... </heap>
// then the process's totals, which mallinfo2 gives already. A line longer than the buffer
// (none is) is skipped.
// ---------------------------------------------------------------------------------------------
#define HL_XML_LINE_MAX 256

typedef struct xml_state_s {
    char line[HL_XML_LINE_MAX];
    size_t len;
    int is_long; // the line overran: skip it
    int in_heap;
} xml_state_t;

static xml_state_t xml;

// The number after `name="` in line, or 0.
static uint64_t attr(const char* line, const char* name) {
    const char* p = strstr(line, name);
    uint64_t v = 0;
    if (!p)
        return 0;
    for (p += strlen(name); *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (uint64_t)(*p - '0');
    return v;
}

static int starts(const char* line, const char* prefix) {
    return strncmp(line, prefix, strlen(prefix)) == 0;
}

static void xml_line(const char* line) {
    while (*line == ' ')
        line++;
    if (starts(line, "<heap nr=")) {
        xml.in_heap = 1;
        if (arenas < HL_AS_ARENAS_MAX)
            memset(arena[arenas], 0, sizeof arena[arenas]);
        arenas++;
        return;
    }
    if (!xml.in_heap || arenas == 0)
        return;
    uint64_t* a = arenas <= HL_AS_ARENAS_MAX ? arena[arenas - 1] : NULL;
    if (starts(line, "</heap>")) {
        xml.in_heap = 0;
    } else if (!a) {
        return;
    } else if (starts(line, "<total type=\"fast\"") || starts(line, "<total type=\"rest\"")) {
        a[HL_AS_ARENA_FREE] += attr(line, "size=\"");
        a[HL_AS_ARENA_FREE_BLOCKS] += attr(line, "count=\"");
    } else if (starts(line, "<system type=\"current\"")) {
        a[HL_AS_ARENA_SYSTEM] = attr(line, "size=\"");
    } else if (starts(line, "<system type=\"max\"")) {
        a[HL_AS_ARENA_MAX] = attr(line, "size=\"");
    }
}

static ssize_t xml_write(void* cookie, const char* buf, size_t size) {
    (void)cookie;
    for (size_t i = 0; i < size; i++) {
        char c = buf[i];
        if (c == '\n') {
            xml.line[xml.len] = 0;
            if (!xml.is_long)
                xml_line(xml.line);
            xml.len = 0;
            xml.is_long = 0;
        } else if (xml.len + 1 < sizeof xml.line) {
            xml.line[xml.len++] = c;
        } else {
            xml.is_long = 1;
        }
    }
    return (ssize_t)size;
}

static FILE* xml_file; // made once per process (see the top), never closed

void allocstats_prepare(void) {
    if (!hl_opt.alloc_stats_ms)
        return;
    if (!is_resolved)
        resolve();
    if (xml_file || !get_malloc_info)
        return;
    xml_file = fopencookie(NULL, "w", (cookie_io_functions_t){.write = xml_write});
    if (xml_file)
        setvbuf(xml_file, NULL, _IONBF, 0); // no buffer to allocate: each write comes here
}

static void take_arenas(void) {
    arenas = 0;
    memset(&xml, 0, sizeof xml);
    if (!xml_file)
        return;
    get_malloc_info(0, xml_file);
    fflush(xml_file);
    clearerr(xml_file);
}

// ---------------------------------------------------------------------------------------------
// The process's figures, from /proc/thread-self/status (the process's own status is its
// leader's, which has no memory figures once main has called pthread_exit), read with system
// calls into the writer's stack.
// ---------------------------------------------------------------------------------------------
#define HL_STATUS_MAX 4096 // a status file is about 1.5 KiB

static void take_vm(void) {
    static const struct {
        const char* name;
        int index;
    } lines[] = {{"VmRSS:", HL_AS_VM_RSS},
                 {"VmHWM:", HL_AS_VM_HWM},
                 {"VmSwap:", HL_AS_VM_SWAP},
                 {"RssAnon:", HL_AS_RSS_ANON}};
    char buf[HL_STATUS_MAX];
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t len = 0;
    for (;;) {
        long n = syscall(SYS_read, fd, buf + len, sizeof buf - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len >= sizeof buf - 1)
            break;
    }
    syscall(SYS_close, fd);
    buf[len] = 0;
    for (const char* p = buf; *p;) {
        for (size_t k = 0; k < sizeof lines / sizeof *lines; k++) {
            if (!starts(p, lines[k].name))
                continue;
            const char* s = p + strlen(lines[k].name);
            while (*s == ' ' || *s == '\t')
                s++;
            uint64_t kib = 0;
            for (; *s >= '0' && *s <= '9'; s++)
                kib = kib * 10 + (uint64_t)(*s - '0');
            value[lines[k].index] = kib * 1024;
            available |= 1u << lines[k].index;
        }
        const char* nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
}

// mallinfo2 walks every free chunk of every arena under its lock, and malloc_info walks them
// again: 750,000 free fastbin chunks take 80-150 ms each (the program's mallocs that miss their
// thread cache wait meanwhile). When mallinfo2's walk took longer than this, the sample goes
// without the arenas (its record lists none) rather than hold the locks twice as long.
#define HL_ARENAS_WALK_MAX_NS 1000000ull

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t allocstats_take(void) {
    available = 0;
    memset(value, 0, sizeof value);
    arenas = 0;
    uint64_t cpu = thread_cpu_ns();
    if (get_mallinfo2) {
        struct mallinfo2 m = get_mallinfo2();
        value[HL_AS_ARENA] = m.arena;
        value[HL_AS_IN_USE] = m.uordblks;
        value[HL_AS_FREE] = m.fordblks;
        value[HL_AS_FAST_FREE] = m.fsmblks;
        value[HL_AS_MMAPPED] = m.hblkhd;
        value[HL_AS_MMAP_COUNT] = m.hblks;
        value[HL_AS_KEEPCOST] = m.keepcost;
        available |= HL_AS_ALLOCATOR_MASK;
        if (get_malloc_info && thread_cpu_ns() - cpu < HL_ARENAS_WALK_MAX_NS)
            take_arenas();
    } else if (get_mallinfo) {
        // tcmalloc fills these three (its page heap: system, in use, free) and zeros the rest.
        // The fields are int: read as unsigned, figures up to 4 GiB hold.
        struct mallinfo m = get_mallinfo();
        value[HL_AS_ARENA] = (unsigned)m.arena;
        value[HL_AS_IN_USE] = (unsigned)m.uordblks;
        value[HL_AS_FREE] = (unsigned)m.fordblks;
        available |= 1u << HL_AS_ARENA | 1u << HL_AS_IN_USE | 1u << HL_AS_FREE;
    }
    uint64_t took = thread_cpu_ns() - cpu;
    take_vm();
    return took;
}

// Bytes a record takes at most: tag, time, source, mask, counts, and every value as a varint.
#define HL_AS_RECORD_MAX                                                                           \
    (16 + 6 * HL_VARINT_MAX + (HL_AS_COUNT + HL_AS_ARENAS_MAX * HL_AS_ARENA_FIELDS) * HL_VARINT_MAX)

void allocstats_encode(hl_enc_t* e, int64_t now_ns) {
    if (enc_reserve(e, HL_AS_RECORD_MAX) != 0)
        return;
    enc_tag(e, REC_ALLOC_STATS);
    enc_time(e, now_ns);
    enc_u(e, (uint64_t)source);
    enc_u(e, available);
    enc_u(e, HL_AS_COUNT);
    for (int k = 0; k < HL_AS_COUNT; k++)
        enc_u(e, value[k]);
    uint32_t listed = arenas < HL_AS_ARENAS_MAX ? arenas : HL_AS_ARENAS_MAX;
    enc_u(e, arenas);
    enc_u(e, listed);
    enc_u(e, HL_AS_ARENA_FIELDS);
    for (uint32_t i = 0; i < listed; i++)
        for (int k = 0; k < HL_AS_ARENA_FIELDS; k++)
            enc_u(e, arena[i][k]);
}

void allocstats_reset_after_fork(void) {
    xml_file = NULL; // the parent's stays in the child's heap, unused (about 500 bytes)
}
