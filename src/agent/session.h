// SPDX-License-Identifier: MIT
// session.h - the session index of a heaplens run (session.c).
#ifndef HL_SESSION_H
#define HL_SESSION_H

// Appends "PID PPID TRACE" to the index, or "PID PPID !TRACE" when TRACE could not be written
// (is_written 0): the CLI then knows the agent said why, and says nothing misleading of its own.
// Does nothing when there is no index or it cannot be used.
void session_note(int pid, int ppid, const char* trace, int is_written);

// Does the index already list a trace? 0 only when it is there, usable and empty: the first
// image of the first process. An index that is named but gone (the run is over: a process that
// outlived it) or not private counts as listing one.
int session_has_entries(void);

#endif
