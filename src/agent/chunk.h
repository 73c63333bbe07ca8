// SPDX-License-Identifier: MIT
// chunk.h - a trace's bytes as they leave the agent (chunk.c): the file header, then chunks,
// each the flushed part of one zstd stream with a header (magic, sizes, checksum; format.h);
// the stream's first bytes in frames of one raw block, written without zstd.
// Where the bytes go is the sink's business (sink.h), not this file's.
#ifndef HL_CHUNK_H
#define HL_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "../common/format.h"

void chunk_file_header(uint8_t out[HL_FILE_HEADER_SIZE]); // what a trace starts with
// Part of the open chunk, compressed now: the work of a chunk is spread over the writer's
// passes. 0, or -1 when compression failed (said once).
int chunk_feed(const uint8_t* raw, size_t len);
// Closes the open chunk: *out and *len are its framed bytes (header and payload), valid until
// the next call; *len is 0 when nothing was fed. 0, or -1 when compression failed.
int chunk_end(const uint8_t** out, size_t* len);
// The program's resident memory as the writer sampled it, in bytes: the trace's window grows
// with the largest.
void chunk_note_rss(uint64_t bytes);
// The open chunk is the last with the long window: once it ends, the window and its tables
// (1-8 MiB) are given back, and later chunks are compressed with a small one (the records of an
// exit scan, whose working memory then takes the window's place). Nothing to do while the stream
// has not left its small first frame.
void chunk_release_window(void);
// A new trace begins (a fork child's, or one in a new sink): the stream starts over, and a
// chunk left open is dropped.
void chunk_restart_stream(void);

#endif
