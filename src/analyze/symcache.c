// SPDX-License-Identifier: MIT
// symcache.c - the symbolizer's answers on disk (symcache.h). A file:
//   "HLSYMC01" | u32 entries | u32 0 |
//   per entry: u64 address | u8 frames (1..SYMCACHE_FRAMES_MAX) |
//     per frame: u32 line | u8 flags (SC_INLINED, SC_FUNCTION, SC_FILE) |
//                [u16 length | bytes, the last one NUL] for the function, then the file, if flagged
//   "HLSYMEND"
// little-endian. Nothing in a file is trusted: every length is bounded by what is left of it,
// and a file read short of its count or past its end marker is not used at all.
#define _GNU_SOURCE
#include "symcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/private_dir.h"

#define SC_MAGIC "HLSYMC01"
#define SC_END "HLSYMEND"
#define SC_MAGIC_LEN 8
#define SC_HEADER (SC_MAGIC_LEN + 8)
#define SC_INLINED 1u
#define SC_FUNCTION 2u
#define SC_FILE 4u
#define SC_BUILD_ID_MAX 64 // bytes of a build-id a name spells out (GNU's are 20)

// ---------------------------------------------------------------------------------------------
// The directory

// mkdir -p with mode 0700 for what is missing below an existing prefix.
static void make_path(char* path) {
    for (char* p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    mkdir(path, 0700);
}

static char* joined(const char* a, const char* b) {
    size_t la = strlen(a), lb = strlen(b);
    char* s = malloc(la + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

char* symcache_default_dir(void) {
    const char* env = getenv("HEAPLENS_SYMBOL_CACHE");
    const char* xdg = getenv("XDG_CACHE_HOME");
    const char* home = getenv("HOME");
    char* dir = NULL;
    if (env) {
        if (env[0] != '/') // "off", "0", empty, or a relative path: no cache
            return NULL;
        dir = strdup(env);
    } else if (xdg && xdg[0] == '/') {
        dir = joined(xdg, "/heaplens/symbols");
    } else if (home && home[0] == '/') {
        dir = joined(home, "/.cache/heaplens/symbols");
    }
    if (!dir)
        return NULL;
    make_path(dir);
    struct stat st;
    if (lstat(dir, &st) != 0 || !hl_is_private_dir(&st, geteuid())) {
        free(dir);
        return NULL;
    }
    return dir;
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
    uint64_t id[6] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
                      (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec, 1};
    return fnv(h, id, sizeof id);
}

int symcache_name(const char* file, const uint8_t* build_id, size_t build_id_len,
                  const char* const* debug_dirs, int ndebug_dirs, char* out, size_t outlen) {
    struct stat st;
    if (!build_id || build_id_len < 2 || build_id_len > SC_BUILD_ID_MAX ||
        stat(file, &st) != 0 || !S_ISREG(st.st_mode) || outlen < 2 * build_id_len + 22)
        return -1;
    char hex[2 * SC_BUILD_ID_MAX + 1];
    for (size_t i = 0; i < build_id_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", build_id[i]);
    uint64_t h = fnv_str(0xcbf29ce484222325ull, SC_MAGIC);
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

int symcache_exists(const char* dir, const char* name) {
    struct stat st;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    int is = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    close(dfd);
    return is;
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

// The entries of a file read whole into buf: their count when the bytes are exactly a file
// symcache_store writes, else -1.
static long check_file(const uint8_t* buf, size_t len) {
    if (len < SC_HEADER + SC_MAGIC_LEN || memcmp(buf, SC_MAGIC, SC_MAGIC_LEN) != 0 ||
        memcmp(buf + len - SC_MAGIC_LEN, SC_END, SC_MAGIC_LEN) != 0)
        return -1;
    uint64_t count = le(buf + SC_MAGIC_LEN, 4);
    cursor_t c = {buf + SC_HEADER, len - SC_HEADER - SC_MAGIC_LEN};
    sym_frame_t frames[SYMCACHE_FRAMES_MAX];
    symcache_entry_t e;
    for (uint64_t i = 0; i < count; i++)
        if (take_entry(&c, &e, frames) != 0)
            return -1;
    return c.left == 0 ? (long)count : -1;
}

static uint8_t* read_file(const char* dir, const char* name, size_t* len) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return NULL;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(dfd);
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

int symcache_load(const char* dir, const char* name,
                  int (*each)(void* arg, const symcache_entry_t* e), void* arg) {
    size_t len = 0;
    uint8_t* buf = read_file(dir, name, &len);
    if (!buf)
        return -1;
    long count = check_file(buf, len);
    if (count < 0) {
        free(buf);
        return -1;
    }
    cursor_t c = {buf + SC_HEADER, len - SC_HEADER - SC_MAGIC_LEN};
    sym_frame_t frames[SYMCACHE_FRAMES_MAX];
    symcache_entry_t e;
    for (long i = 0; i < count; i++) {
        take_entry(&c, &e, frames); // checked above
        if (each(arg, &e) != 0)
            break;
    }
    free(buf);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Writing

typedef struct out_s {
    uint8_t* p;
    size_t len, cap;
    int failed;
} out_t;

static void put(out_t* o, const void* src, size_t n) {
    if (o->failed)
        return;
    if (o->len + n > SYMCACHE_FILE_MAX) {
        o->failed = 1;
        return;
    }
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n)
            cap *= 2;
        uint8_t* fresh = realloc(o->p, cap);
        if (!fresh) {
            o->failed = 1;
            return;
        }
        o->p = fresh;
        o->cap = cap;
    }
    memcpy(o->p + o->len, src, n);
    o->len += n;
}

static void put_le(out_t* o, uint64_t v, int n) {
    uint8_t b[8];
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(o, b, (size_t)n);
}

static void put_string(out_t* o, const char* s) {
    size_t n = strlen(s) + 1;
    put_le(o, n, 2);
    put(o, s, n);
}

static int keepable(const char* s) {
    return !s || strlen(s) <= SYMCACHE_STRING_MAX;
}

// The whole file in memory: its entries, and in its header their count.
static int build(out_t* o, int (*next)(void* arg, symcache_entry_t* e), void* arg) {
    put(o, SC_MAGIC, SC_MAGIC_LEN);
    put_le(o, 0, 8); // the count, set below
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
    put(o, SC_END, SC_MAGIC_LEN);
    if (o->failed || count == 0)
        return -1;
    for (int i = 0; i < 4; i++)
        o->p[SC_MAGIC_LEN + i] = (uint8_t)(count >> (8 * i));
    return 0;
}

int symcache_store(const char* dir, const char* name,
                   int (*next)(void* arg, symcache_entry_t* e), void* arg) {
    out_t o = {0};
    if (build(&o, next, arg) != 0) {
        free(o.p);
        return -1;
    }
    int rc = -1;
    char tmp[512];
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int n = snprintf(tmp, sizeof tmp, ".%s.%ld.tmp", name, (long)getpid());
    if (dfd >= 0 && n > 0 && (size_t)n < sizeof tmp) {
        // The directory is private: a name already there is a file an earlier run of this
        // process id left when it was killed.
        unlinkat(dfd, tmp, 0);
        int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
            if (ok && renameat(dfd, tmp, dfd, name) == 0)
                rc = 0;
            else
                unlinkat(dfd, tmp, 0); // a full disk leaves nothing behind
        }
    }
    if (dfd >= 0)
        close(dfd);
    free(o.p);
    return rc;
}
