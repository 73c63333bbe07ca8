// SPDX-License-Identifier: MIT
// encode.h - field encoders for trace records. Callers reserve room first: enc_reserve(e, n)
// guarantees n more bytes (a varint takes at most HL_VARINT_MAX).
#ifndef HL_ENCODE_H
#define HL_ENCODE_H

#include "agent.h"

int enc_reserve(hl_enc_t* e, size_t more); // 0, or -1 when out of memory
void enc_tag(hl_enc_t* e, int tag);
void enc_u(hl_enc_t* e, uint64_t v);
void enc_s(hl_enc_t* e, int64_t v);
void enc_bytes(hl_enc_t* e, const void* p, size_t n);
void enc_time(hl_enc_t* e, int64_t t); // dt against the previous timed record
void enc_addr(hl_enc_t* e, uint64_t a); // delta against the previous ALLOC/FREE address

#endif
