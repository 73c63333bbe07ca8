// SPDX-License-Identifier: MIT
// outfile.h - opening a report output (--json, --html, --pprof, --massif, --flamegraph,
// --collapsed, diff's and html's outputs) so that no other user can send it elsewhere (outfile.c).
#ifndef HL_OUTFILE_H
#define HL_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

// Opens PATH for writing a report:
// - a new file is created with mode 0644 less the umask; an existing regular file is truncated
//   and keeps its mode; a device, FIFO or socket (/dev/null, a pipe from >(cmd)) is written as
//   it is; a directory is refused;
// - a symbolic link anywhere on the path is followed only where the kernel's fs.protected_symlinks
//   would follow it, whether or not the machine turns that on: outside a world-writable sticky
//   directory (/tmp), or when the link belongs to the caller or to the directory's owner;
// - in such a directory, an existing file must belong to the caller or to the directory's owner
//   (fs.protected_regular), and so must a file reached through a link that lives there: another
//   user's file is never written;
// - links in /proc (/dev/stdout, /dev/fd/N) name what this process holds: the kernel follows them.
// Returns a descriptor (close-on-exec), or -errno with WHY (WHY_CAP bytes) set to one short
// clause saying why not, for a line "PATH: cannot write the REPORT: WHY".
int outfile_open(const char* path, char* why, size_t why_cap);

// outfile_open as a stdio stream for writing; "-" is stdout. NULL with WHY set on failure.
FILE* outfile_fopen(const char* path, char* why, size_t why_cap);

#endif
