// SPDX-License-Identifier: MIT
// log.h - allocation-free diagnostics on stderr, rate limited, and the formatter behind them
// (log.c): the agent never uses stdio.
#ifndef HL_LOG_H
#define HL_LOG_H

#include <stddef.h>

void log_init(void); // at start: the agent's own copy of stderr (none when 2 is not open)
void log_close(void); // detach: the copy goes (a later message makes it again)
void hl_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int hl_fmt(char* buf, size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
