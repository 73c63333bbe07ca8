// SPDX-License-Identifier: MIT
// leaks.h - leak records from a scan's VERDICT records (leaks.c), for model.c. A verdict names
// its block's size and stack, so the records need nothing else; an indirectly lost block's
// leader is found by address once the scan's verdicts end (the leader may come later).
#ifndef HL_LEAKS_H
#define HL_LEAKS_H

#include "model.h"

void leaks_scan(model_t* m, const rd_record_t* r);    // REC_SCAN: earlier verdicts are void
void leaks_verdict(model_t* m, const rd_record_t* r); // REC_VERDICT
void leaks_run_end(model_t* m); // the record after a run of verdicts, or the end of the trace
// Once the trace is read: blocks live at the end beyond the verdicts of their site as
// unscanned records, totals per kind, records sorted. 0, or -ENOMEM.
int leaks_finish(model_t* m);
void leaks_free(model_t* m);

#endif
