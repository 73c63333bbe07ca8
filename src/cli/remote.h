// SPDX-License-Identifier: MIT
// remote.h - what the collector (cmd_server.c) and the shell that reaches it (cmd_shell.c)
// share: the token file, and the parts of a tcp:HOST:PORT address (remote.c).
#ifndef HL_CLI_REMOTE_H
#define HL_CLI_REMOTE_H

#include <stddef.h>

#define REMOTE_TOKEN_MAX 256 // a token file's content at most

// The secret in the token file at path: the user's own regular file, readable by nobody else,
// its trailing newline and spaces cut. Its length (out holds it, NUL-ended), or -1 after one
// line "WHO: --token PATH ..." saying what is wrong.
int remote_read_token(const char* who, const char* path, char out[REMOTE_TOKEN_MAX]);

// HOST:PORT (what follows "tcp:"; HOST may be [v6], its brackets taken off) into host and port,
// either left as it was when the spec has none. 0, or -1 when a part does not fit.
int remote_split_tcp(const char* spec, char* host, size_t host_cap, char* port, size_t port_cap);

#endif
