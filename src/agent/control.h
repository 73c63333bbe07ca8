// SPDX-License-Identifier: MIT
// control.h - the traced process's control socket (control.c): a UNIX socket in a directory
// private to the user, where `heaplens shell PID` asks for scans, marks and flushes while the
// program runs. Served by the writer thread between its passes, never by a program thread.
#ifndef HL_CONTROL_H
#define HL_CONTROL_H

// On a program thread at start (it reads the environment): where the socket goes.
void control_init(void);
// The writer, between passes, holding the writer lock: opens the socket on first use, takes a
// client, answers its complete commands. Never waits.
void control_poll(void);
// On the program's thread at start (run --wait): returns once a client has connected.
void control_wait_for_client(void);
// The process ends, or tracing stops: the socket goes away.
void control_close(void);
// A fork child: the parent's socket and client are not its own; it opens its own on first use.
void control_after_fork(void);

#endif
