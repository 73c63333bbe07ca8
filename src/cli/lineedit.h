// SPDX-License-Identifier: MIT
// lineedit.h - reading a command line at a terminal (lineedit.c): editing (arrows, Home, End,
// Backspace, Delete, Ctrl-A/E/U/K/W), history (up and down) and tab completion, as a shell
// user expects; the terminal is in raw mode only while a line is read.
#ifndef HL_LINEEDIT_H
#define HL_LINEEDIT_H

#include <stddef.h>

#define LE_HISTORY 200 // lines kept

// Completion: the candidates for the word that ends at `len` bytes into `line` (the word starts
// at `word`), into out (at most max); returns how many.
typedef int (*le_complete_fn)(const char* line, size_t word, size_t len, const char** out,
                              int max);

typedef struct le_s {
    int in, out;            // terminal descriptors
    char* history[LE_HISTORY];
    int nhistory;
    le_complete_fn complete;
} le_t;

void le_init(le_t* e, int in, int out, le_complete_fn complete);
void le_free(le_t* e);
// Reads one line (without its newline) into buf: its length, or -1 at end of input (Ctrl-D on
// an empty line, or the terminal gone). Ctrl-C abandons the line and starts a new one.
int le_read(le_t* e, const char* prompt, char* buf, size_t cap);

#endif
