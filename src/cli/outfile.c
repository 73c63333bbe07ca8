// SPDX-License-Identifier: MIT
// outfile.c - opens every report output (contract in outfile.h). The path is looked up one name
// at a time from a directory descriptor, as the kernel does, so that each symbolic link met on
// the way can be judged by its owner and its directory before it is followed: the rule of
// fs.protected_symlinks and fs.protected_regular, which a machine may have turned off (and
// which root, the likeliest victim, often runs without). A name is looked at (lstat) and then
// opened without following (O_NOFOLLOW) and checked to be what was looked at, so a name changed
// in between is looked at again, never trusted.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "outfile.h"

// The kernel's own bound on the links one lookup follows (MAXSYMLINKS).
#define OUTFILE_MAX_LINKS 40
// A name that another process keeps changing between our look and our open is looked at again,
// this many times; past that, the path is refused rather than trusted.
#define OUTFILE_MAX_RACES 8
// What fopen(path, "w") gave a new report under the usual umask of 022, less the umask.
#define OUTFILE_MODE 0644

typedef struct walk_s {
    int dir;                 // O_PATH descriptor of the directory the next name is looked up in
    struct stat dir_st;      // that directory
    char rest[2 * PATH_MAX]; // the names still to look up, '/'-separated
    size_t pos;              // where the next of them starts in rest
    int links;               // followed so far
    uid_t uid;               // the caller's effective user
    int via_shared;          // a link followed lay in a world-writable sticky directory...
    uid_t shared_owner;      // ... of this owner
    char* why;
    size_t why_cap;
} walk_t;

// World-writable and sticky (/tmp, /var/tmp, /dev/shm): where other users put names.
static int is_shared(const struct stat* dir) {
    return (dir->st_mode & S_ISVTX) && (dir->st_mode & S_IWOTH);
}

// Links in /proc name what a process holds (/proc/self/fd/1 behind /dev/stdout); their text
// need not even be a path (pipe:[1234]). Only the kernel can follow them.
static int is_on_procfs(int dir) {
    struct statfs fs;
    return fstatfs(dir, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

// Looks up the next names in FD (taken over; -1 passes errno on).
static int enter(walk_t* w, int fd) {
    if (fd < 0)
        return -errno;
    if (fstat(fd, &w->dir_st) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    if (w->dir >= 0)
        close(w->dir);
    w->dir = fd;
    return 0;
}

// The next name into NAME: 0, 1 when none is left, or -ENAMETOOLONG. *is_last when no name
// follows it; *wants_dir when a '/' does all the same (it must then be a directory).
static int next_name(walk_t* w, char* name, int* is_last, int* wants_dir) {
    const char* s = w->rest + w->pos;
    while (*s == '/')
        s++;
    size_t n = strcspn(s, "/");
    if (n == 0)
        return 1;
    if (n > NAME_MAX)
        return -ENAMETOOLONG;
    memcpy(name, s, n);
    name[n] = 0;
    s += n;
    *wants_dir = *s == '/';
    while (*s == '/')
        s++;
    *is_last = *s == 0;
    w->pos = (size_t)(s - w->rest);
    return 0;
}

// May the link LINK, in the current directory, be followed? (fs.protected_symlinks)
static int may_follow(const walk_t* w, const struct stat* link) {
    return !is_shared(&w->dir_st) || link->st_uid == w->uid || link->st_uid == w->dir_st.st_uid;
}

// May the existing file ST, in the current directory, be written? (fs.protected_regular, and
// the same for a file reached through a link that lay in a shared directory.)
static int may_write(const walk_t* w, const struct stat* st) {
    if (is_shared(&w->dir_st) && st->st_uid != w->uid && st->st_uid != w->dir_st.st_uid)
        return 0;
    return !w->via_shared || st->st_uid == w->uid || st->st_uid == w->shared_owner;
}

static int refuse_link(walk_t* w, const struct stat* link) {
    snprintf(w->why, w->why_cap,
             "not following a symbolic link that another user (uid %u) owns in a world-writable "
             "sticky directory",
             (unsigned)link->st_uid);
    return -EACCES;
}

static int refuse_file(walk_t* w, const struct stat* st) {
    snprintf(w->why, w->why_cap, "not writing to a file that another user (uid %u) owns %s",
             (unsigned)st->st_uid,
             w->via_shared && !is_shared(&w->dir_st)
                 ? "(reached through a link in a world-writable sticky directory)"
                 : "in a world-writable sticky directory");
    return -EACCES;
}

// Follows the link NAME of the current directory: its text goes before the names still to
// look up. 0, or -errno.
static int follow(walk_t* w, const char* name) {
    if (++w->links > OUTFILE_MAX_LINKS)
        return -ELOOP;
    if (is_shared(&w->dir_st)) {
        w->via_shared = 1;
        w->shared_owner = w->dir_st.st_uid;
    }
    char target[PATH_MAX];
    ssize_t n = readlinkat(w->dir, name, target, sizeof target);
    if (n < 0)
        return -errno;
    if ((size_t)n >= sizeof target)
        return -ENAMETOOLONG;
    if (n == 0)
        return -ENOENT;
    target[n] = 0;
    char joined[sizeof w->rest];
    const char* rest = w->rest + w->pos;
    if (snprintf(joined, sizeof joined, "%s%s%s", target, *rest ? "/" : "", rest) >=
        (int)sizeof joined)
        return -ENAMETOOLONG;
    memcpy(w->rest, joined, sizeof joined);
    w->pos = 0;
    return target[0] == '/' ? enter(w, open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) : 0;
}

// A name on the way to the output: a directory to enter, or a link to follow.
static int walk_dir(walk_t* w, const char* name) {
    struct stat st;
    if (fstatat(w->dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return -errno;
    if (S_ISLNK(st.st_mode)) {
        if (is_on_procfs(w->dir))
            return enter(w, openat(w->dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC));
        return may_follow(w, &st) ? follow(w, name) : refuse_link(w, &st);
    }
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    return enter(w, openat(w->dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Opens the existing NAME, which must still be what SEEN describes (NULL: a /proc link, the
// kernel's to follow). 1 with *fd set, -EAGAIN when the name changed meanwhile, or -errno.
static int open_existing(walk_t* w, const char* name, const struct stat* seen, int* fd) {
    int f = openat(w->dir, name, O_WRONLY | O_NOCTTY | O_CLOEXEC | (seen ? O_NOFOLLOW : 0));
    if (f < 0)
        return seen && (errno == ELOOP || errno == ENOENT) ? -EAGAIN : -errno;
    struct stat got;
    int err = 0;
    if (fstat(f, &got) != 0)
        err = -errno;
    else if (seen && (got.st_dev != seen->st_dev || got.st_ino != seen->st_ino))
        err = -EAGAIN;
    else if (S_ISREG(got.st_mode) && ftruncate(f, 0) != 0)
        err = -errno;
    if (err) {
        close(f);
        return err;
    }
    *fd = f;
    return 1;
}

// The output's own name: created, opened, or a link to follow (0). 1 with *fd set, or -errno.
static int walk_last(walk_t* w, const char* name, int wants_dir, int* fd) {
    for (int race = 0; race < OUTFILE_MAX_RACES; race++) {
        struct stat st;
        if (fstatat(w->dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT)
                return -errno;
            if (wants_dir)
                return -EISDIR; // as fopen says of "new/"
            *fd = openat(w->dir, name,
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
                         OUTFILE_MODE);
            if (*fd >= 0)
                return 1;
            if (errno != EEXIST)
                return -errno;
            continue; // made by someone else meanwhile: look again
        }
        if (S_ISLNK(st.st_mode)) {
            if (is_on_procfs(w->dir))
                return open_existing(w, name, NULL, fd);
            return may_follow(w, &st) ? follow(w, name) : refuse_link(w, &st);
        }
        if (S_ISDIR(st.st_mode))
            return -EISDIR;
        if (wants_dir)
            return -ENOTDIR;
        if (!may_write(w, &st))
            return refuse_file(w, &st);
        int r = open_existing(w, name, &st, fd);
        if (r != -EAGAIN)
            return r;
    }
    snprintf(w->why, w->why_cap, "the name kept changing while it was opened");
    return -EAGAIN;
}

int outfile_open(const char* path, char* why, size_t why_cap) {
    walk_t w = {.dir = -1, .uid = geteuid(), .why = why, .why_cap = why_cap};
    if (why_cap)
        why[0] = 0;
    size_t len = strlen(path);
    int r = 0, fd = -1;
    if (len == 0)
        r = -ENOENT;
    else if (len >= PATH_MAX)
        r = -ENAMETOOLONG;
    else {
        memcpy(w.rest, path, len + 1);
        r = enter(&w, open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
    while (r == 0) {
        char name[NAME_MAX + 1];
        int is_last, wants_dir;
        r = next_name(&w, name, &is_last, &wants_dir);
        if (r == 1)
            r = -EISDIR; // nothing after the last directory ("/", "dir/.."): no file to write
        else if (r == 0)
            r = is_last ? walk_last(&w, name, wants_dir, &fd) : walk_dir(&w, name);
    }
    if (w.dir >= 0)
        close(w.dir);
    if (r < 0) {
        if (why_cap && !why[0])
            snprintf(why, why_cap, "%s", strerror(-r));
        return r;
    }
    return fd;
}

// A report is written in pieces of this size: stdio's own buffer is the file system's block
// (4 KiB), a system call each: 134 of them for a short run's 546 KiB JSON report, a tenth of
// its time. The buffers live as long as the process (a command writes a few outputs), so no
// close has to give them back; they are kept here, where a leak checker sees them reachable.
#define OUTFILE_BUFFER (64u << 10)
#define OUTFILE_BUFFERS 8 // outputs of one command with a buffer of their own; more get stdio's
static char* buffers[OUTFILE_BUFFERS];
static int buffers_made;

FILE* outfile_fopen(const char* path, char* why, size_t why_cap) {
    if (!strcmp(path, "-"))
        return stdout;
    int fd = outfile_open(path, why, why_cap);
    if (fd < 0)
        return NULL;
    FILE* f = fdopen(fd, "w");
    if (!f) {
        snprintf(why, why_cap, "%s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (buffers_made < OUTFILE_BUFFERS) {
        char* b = malloc(OUTFILE_BUFFER);
        if (b && setvbuf(f, b, _IOFBF, OUTFILE_BUFFER) == 0)
            buffers[buffers_made++] = b;
        else
            free(b);
    }
    return f;
}
