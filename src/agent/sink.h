// SPDX-License-Identifier: MIT
// sink.h - where the trace goes (sink.c): records into compressed chunks, chunks into the file.
#ifndef HL_SINK_H
#define HL_SINK_H

#include <stddef.h>
#include <stdint.h>

int sink_open(void);                           // create the trace file and write its header
int sink_feed(const uint8_t* raw, size_t len); // part of the open chunk
int sink_end_chunk(void);                      // close the open chunk and write it
void sink_close(void);
int sink_is_open(void);
void sink_reset_after_fork(void);

#endif
