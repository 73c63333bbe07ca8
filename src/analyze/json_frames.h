// SPDX-License-Identifier: MIT
// json_frames.h - each distinct frame of a JSON report made into text once. Stacks share most
// of their frames (the same few thousand addresses make up every stack of a program), so what
// a return address stands for is made the first time it is met and copied out after that; in
// the HTML page's data, stacks go further and name frames by their index in one "frames" array.
#ifndef HL_JSON_FRAMES_H
#define HL_JSON_FRAMES_H

#include <stdio.h>

#include "report.h"

typedef struct json_frames_s json_frames_t;

// A table that writes frames inline ({...} objects, as report_json_stack does) or, with
// by_index, as numbers into the array json_frames_write_table writes. NULL when out of memory.
json_frames_t* json_frames_new(int by_index);
void json_frames_free(json_frames_t* t);

// The stack as a JSON array: frame objects, or indices into the table.
// Out of memory inside: the frames are written inline without the table.
void json_frames_stack(FILE* out, json_frames_t* t, report_ctx_t* c, uint32_t stack);

// "[{...}, {...}]": every frame the table has indexed, in index order.
void json_frames_write_table(FILE* out, const json_frames_t* t);
size_t json_frames_count(const json_frames_t* t);

#endif
