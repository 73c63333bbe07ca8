// SPDX-License-Identifier: MIT
// debuginfod_gate.h - whether the symbolizer may load a debuginfod client (debuginfod_gate.c).
#ifndef HL_DEBUGINFOD_GATE_H
#define HL_DEBUGINFOD_GATE_H

int debuginfod_wanted(void); // is a debuginfod server named (DEBUGINFOD_URLS set, not empty)?
// Is file (as passed to dlopen) the debuginfod client, to be left unloaded since no server is
// named?
int debuginfod_gate_declines(const char* file);

#endif
