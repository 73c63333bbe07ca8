// SPDX-License-Identifier: MIT
// symcache.c - the symbolizer's answers on disk (symcache.h). A file:
//   "HLSYMC03" | u16 length | its own name, the last byte NUL | u64 demangler | u32 entries |
//   per entry: u64 address | u8 frames (1..SYMCACHE_FRAMES_MAX) |
//     per frame: u32 line | u8 flags (SC_INLINED, SC_FUNCTION, SC_FILE) |
//                [u16 length | bytes, the last one NUL] for the function, then the file, if flagged
//   "HLSYMEND"
// little-endian. demangler is 0 when no name in the file was demangled, else the identity of the
// demangler that did it (symcache_load). Nothing in a file is trusted: every length is bounded
// by what is left of it, and a file read short of its count or past its end marker is not used
// at all.
#define _GNU_SOURCE
#include "bytebuf.h"
#include "symcache.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/private_dir.h"

// 03: the demangler is named in the file, no longer in its name (every name of a C program's
// modules was keyed by libstdc++, which the report then had to load to find its answers).
#define SC_MAGIC "HLSYMC03"
#define SC_END "HLSYMEND"
#define SC_MAGIC_LEN 8
#define SC_NAME_MAX 255 // a file's name, as symcache_name makes them
#define SC_INLINED 1u
#define SC_FUNCTION 2u
#define SC_FILE 4u
#define SC_BUILD_ID_MAX 64 // bytes of a build-id a name spells out (GNU's are 20)

// ---------------------------------------------------------------------------------------------
// The directory

int symcache_open(const char* path) {
    char dir[4096];
    size_t len = strlen(path);
    // A trailing slash would make the last component's link followed, O_NOFOLLOW or not.
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (path[0] != '/' || len >= sizeof dir)
        return -1;
    memcpy(dir, path, len);
    dir[len] = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !hl_is_private_dir(&st, geteuid()))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

// base + rest, each missing directory of rest made 0700 when base is a directory already (a
// HOME that does not exist is not made): the descriptor of the last, checked, or -1.
static int open_below(const char* base, const char* rest) {
    char path[4096];
    struct stat st;
    int n = snprintf(path, sizeof path, "%s%s", base, rest);
    if (n < 0 || (size_t)n >= sizeof path || stat(base, &st) != 0 || !S_ISDIR(st.st_mode))
        return -1;
    for (char* p = path + strlen(base) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    mkdir(path, 0700);
    return symcache_open(path);
}

int symcache_open_default(void) {
    const char* env = getenv("HEAPLENS_SYMBOL_CACHE");
    const char* xdg = getenv("XDG_CACHE_HOME");
    const char* home = getenv("HOME");
    if (env) {
        if (env[0] != '/') // "off", "0", empty, or a relative path: no cache
            return -1;
        mkdir(env, 0700); // the directory itself, not its parents
        return symcache_open(env);
    }
    if (xdg && xdg[0] == '/')
        return open_below(xdg, "/heaplens/symbols");
    if (home && home[0] == '/')
        return open_below(home, "/.cache/heaplens/symbols");
    return -1;
}

// ---------------------------------------------------------------------------------------------
// The name

static uint64_t fnv(uint64_t h, const void* p, size_t n) {
    const unsigned char* s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t fnv_str(uint64_t h, const char* s) {
    return fnv(h, s, strlen(s) + 1);
}

// A file's identity as a stat gives it (nothing when it does not exist: a 0 marks that).
static uint64_t fnv_stat(uint64_t h, const char* path) {
    h = fnv_str(h, path);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return fnv(h, "", 1);
    // The change time moves with any rewrite or change of mode, even one that keeps the
    // modification time (cp -p).
    uint64_t id[8] = {(uint64_t)st.st_dev,        (uint64_t)st.st_ino,
                      (uint64_t)st.st_size,       (uint64_t)st.st_mtim.tv_sec,
                      (uint64_t)st.st_mtim.tv_nsec, (uint64_t)st.st_ctim.tv_sec,
                      (uint64_t)st.st_ctim.tv_nsec, (uint64_t)st.st_mode};
    return fnv(h, id, sizeof id);
}

uint64_t symcache_producer(const void* const* code, int n) {
    uint64_t h = fnv_str(0xcbf29ce484222325ull, SC_MAGIC);
    for (int i = 0; i < n; i++) {
        Dl_info info;
        if (code[i] && dladdr(code[i], &info) && info.dli_fname)
            h = fnv_stat(h, info.dli_fname[0] ? info.dli_fname : "/proc/self/exe");
    }
    return h;
}

int symcache_name(const char* file, const uint8_t* build_id, size_t build_id_len,
                  const char* const* debug_dirs, int ndebug_dirs, uint64_t producer, char* out,
                  size_t outlen) {
    struct stat st;
    if (!build_id || build_id_len < 2 || build_id_len > SC_BUILD_ID_MAX ||
        stat(file, &st) != 0 || !S_ISREG(st.st_mode) || outlen < 2 * build_id_len + 22 ||
        2 * build_id_len + 21 > SC_NAME_MAX)
        return -1;
    char hex[2 * SC_BUILD_ID_MAX + 1];
    for (size_t i = 0; i < build_id_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", build_id[i]);
    uint64_t h = fnv(0xcbf29ce484222325ull, &producer, sizeof producer);
    h = fnv_stat(h, file);
    for (int k = 0; k < ndebug_dirs; k++) {
        char path[4096];
        int n = snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", debug_dirs[k], hex,
                         hex + 2);
        if (n < 0 || (size_t)n >= sizeof path)
            return -1;
        h = fnv_stat(h, path);
    }
    snprintf(out, outlen, "%s-%016llx.sym", hex, (unsigned long long)h);
    return 0;
}

int symcache_exists(int dir, const char* name) {
    struct stat st;
    return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

// ---------------------------------------------------------------------------------------------
// Reading

typedef struct cursor_s {
    const uint8_t* p;
    size_t left;
} cursor_t;

static int take(cursor_t* c, void* out, size_t n) {
    if (c->left < n)
        return -1;
    memcpy(out, c->p, n);
    c->p += n;
    c->left -= n;
    return 0;
}

static uint64_t le(const uint8_t* b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

// A string as written: a length, then that many bytes ending in the only NUL among them.
static int take_string(cursor_t* c, const char** out) {
    uint8_t b[2];
    if (take(c, b, 2) != 0)
        return -1;
    size_t n = (size_t)le(b, 2);
    if (n == 0 || n > SYMCACHE_STRING_MAX + 1 || c->left < n || c->p[n - 1] != '\0' ||
        memchr(c->p, '\0', n - 1))
        return -1;
    *out = (const char*)c->p;
    c->p += n;
    c->left -= n;
    return 0;
}

// One entry into e (frames into the caller's array); 0, or -1 when the bytes are not one.
static int take_entry(cursor_t* c, symcache_entry_t* e, sym_frame_t* frames) {
    uint8_t b[9];
    if (take(c, b, 9) != 0 || b[8] == 0 || b[8] > SYMCACHE_FRAMES_MAX)
        return -1;
    e->addr = le(b, 8);
    e->nframes = b[8];
    e->frames = frames;
    for (int i = 0; i < e->nframes; i++) {
        uint8_t f[5];
        if (take(c, f, 5) != 0 || (f[4] & ~(SC_INLINED | SC_FUNCTION | SC_FILE)))
            return -1;
        frames[i] = (sym_frame_t){.line = (uint32_t)le(f, 4), .is_inlined = f[4] & SC_INLINED};
        if ((f[4] & SC_FUNCTION) && take_string(c, &frames[i].function) != 0)
            return -1;
        if ((f[4] & SC_FILE) && take_string(c, &frames[i].file) != 0)
            return -1;
    }
    return 0;
}

// The header of a file read whole into buf: the entries' count, with c at the first of them and
// up to the end marker, and its demangler, when it is a file symcache_store wrote under this
// name; else -1.
static long check_header(const uint8_t* buf, size_t len, const char* name, cursor_t* c,
                         uint64_t* demangler) {
    if (len < 2 * SC_MAGIC_LEN || memcmp(buf, SC_MAGIC, SC_MAGIC_LEN) != 0 ||
        memcmp(buf + len - SC_MAGIC_LEN, SC_END, SC_MAGIC_LEN) != 0)
        return -1;
    *c = (cursor_t){buf + SC_MAGIC_LEN, len - 2 * SC_MAGIC_LEN};
    const char* own;
    uint8_t d[8], b[4];
    if (take_string(c, &own) != 0 || strcmp(own, name) != 0 || take(c, d, 8) != 0 ||
        take(c, b, 4) != 0)
        return -1;
    *demangler = le(d, 8);
    return (long)le(b, 4);
}

// The entries of a file read whole into buf: their count, with *first at the first of them,
// when the bytes are exactly a file symcache_store wrote under this name, else -1.
static long check_file(const uint8_t* buf, size_t len, const char* name, cursor_t* first,
                       uint64_t* demangler) {
    long count = check_header(buf, len, name, first, demangler);
    cursor_t c = *first;
    sym_frame_t frames[SYMCACHE_FRAMES_MAX];
    symcache_entry_t e;
    for (long i = 0; i < count; i++)
        if (take_entry(&c, &e, frames) != 0)
            return -1;
    return count >= 0 && c.left == 0 ? count : -1;
}

static uint8_t* read_file(int dir, const char* name, size_t* len) {
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    uint8_t* buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_size > 0 && (size_t)st.st_size <= SYMCACHE_FILE_MAX &&
        (buf = malloc((size_t)st.st_size)) != NULL) {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
            if (n <= 0) {
                if (n < 0 && errno == EINTR)
                    continue;
                break;
            }
            got += (size_t)n;
        }
        if (got != (size_t)st.st_size) {
            free(buf);
            buf = NULL;
        }
        *len = got;
    }
    close(fd);
    return buf;
}

int symcache_load(int dir, const char* name, uint64_t (*demangler_now)(void),
                  int (*each)(void* arg, const symcache_entry_t* e), void* arg) {
    size_t len = 0;
    uint8_t* buf = read_file(dir, name, &len);
    if (!buf)
        return -1;
    cursor_t c;
    uint64_t demangler = 0;
    long count = check_file(buf, len, name, &c, &demangler);
    // Names another demangler wrote are worked out again (asked only of a file that has some).
    if (count < 0 || (demangler && (!demangler_now || demangler_now() != demangler))) {
        free(buf);
        return -1;
    }
    sym_frame_t frames[SYMCACHE_FRAMES_MAX];
    symcache_entry_t e;
    for (long i = 0; i < count; i++) {
        take_entry(&c, &e, frames); // checked above
        if (each(arg, &e) != 0)
            break;
    }
    free(buf);
    return demangler ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Writing

typedef bytebuf_t out_t;

static void put_le(out_t* o, uint64_t v, int n) {
    uint8_t b[8];
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    bytebuf_put(o, b, (size_t)n);
}

static void put_string(out_t* o, const char* s) {
    size_t n = strlen(s) + 1;
    put_le(o, n, 2);
    bytebuf_put(o, s, n);
}

static int keepable(const char* s) {
    return !s || strlen(s) <= SYMCACHE_STRING_MAX;
}

// The whole file in memory: its name, its entries, and in its header their count.
static int build(out_t* o, const char* name, uint64_t demangler,
                 int (*next)(void* arg, symcache_entry_t* e), void* arg) {
    bytebuf_put(o, SC_MAGIC, SC_MAGIC_LEN);
    put_string(o, name);
    put_le(o, demangler, 8);
    size_t count_at = o->len;
    put_le(o, 0, 4); // the count, set below
    uint32_t count = 0;
    symcache_entry_t e;
    while (!o->failed && next(arg, &e) == 1) {
        if (e.nframes < 1 || e.nframes > SYMCACHE_FRAMES_MAX)
            continue;
        int ok = 1;
        for (int i = 0; i < e.nframes; i++)
            ok &= keepable(e.frames[i].function) && keepable(e.frames[i].file);
        if (!ok)
            continue; // looked up again next time
        put_le(o, e.addr, 8);
        put_le(o, (uint64_t)e.nframes, 1);
        for (int i = 0; i < e.nframes; i++) {
            const sym_frame_t* f = &e.frames[i];
            put_le(o, f->line, 4);
            put_le(o, (f->is_inlined ? SC_INLINED : 0) | (f->function ? SC_FUNCTION : 0) |
                          (f->file ? SC_FILE : 0), 1);
            if (f->function)
                put_string(o, f->function);
            if (f->file)
                put_string(o, f->file);
        }
        count++;
    }
    bytebuf_put(o, SC_END, SC_MAGIC_LEN);
    if (o->failed || count == 0)
        return -1;
    for (int i = 0; i < 4; i++)
        o->p[count_at + i] = (uint8_t)(count >> (8 * i));
    return 0;
}

// Tries at a fresh temporary name: a name taken (a writer of another process with the same
// id, in another PID namespace sharing the directory) is never removed, another is drawn.
#define SC_TMP_TRIES 8

static int open_tmp(int dir, const char* name, char* tmp, size_t len) {
    for (int k = 0; k < SC_TMP_TRIES; k++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long salt = (unsigned long)ts.tv_nsec ^ (unsigned long)ts.tv_sec << 20 ^
                             (unsigned long)k * 0x9E3779B1ul;
        int n = snprintf(tmp, len, ".%s.%ld.%lx.tmp", name, (long)getpid(), salt);
        if (n < 0 || (size_t)n >= len)
            return -1;
        int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

int symcache_store(int dir, const char* name, uint64_t demangler,
                   int (*next)(void* arg, symcache_entry_t* e),
                   void* arg) {
    out_t o = {.max = SYMCACHE_FILE_MAX};
    char tmp[SC_NAME_MAX + 64];
    int fd = -1, rc = -1;
    if (strlen(name) <= SC_NAME_MAX && build(&o, name, demangler, next, arg) == 0)
        fd = open_tmp(dir, name, tmp, sizeof tmp);
    if (fd >= 0) {
        size_t done = 0;
        while (done < o.len) {
            ssize_t w = write(fd, o.p + done, o.len - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        int ok = close(fd) == 0 && done == o.len;
        if (ok && renameat(dir, tmp, dir, name) == 0)
            rc = 0;
        else
            unlinkat(dir, tmp, 0); // a full disk leaves nothing behind
    }
    free(o.p);
    return rc;
}
