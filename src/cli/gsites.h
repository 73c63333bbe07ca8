// SPDX-License-Identifier: MIT
// gsites.h - heaplens run --guard-sites=REGEX resolved on the host (gsites.c) into the agent's
// guard_sites= value: the matching functions' address ranges in each module.
#ifndef HL_CLI_GSITES_H
#define HL_CLI_GSITES_H

// 0 when REGEX compiles (POSIX extended), or -1 after one line saying why not.
int gsites_check_regex(const char* regex);
// The value for the agent (malloc'd) over PROG, its libraries and the shared objects it may
// dlopen from its directory, LD_LIBRARY_PATH or its run path: "-" when nothing matched (after one warning
// line), NULL after one error line (too many functions, out of memory).
char* gsites_resolve(const char* regex, const char* prog);

#endif
