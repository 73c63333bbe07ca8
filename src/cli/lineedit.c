// SPDX-License-Identifier: MIT
// lineedit.c - a small line editor for heaplens shell (see lineedit.h). VT100 sequences only:
// every terminal emulator in use speaks them.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "lineedit.h"

#define LE_MAX_CANDIDATES 64
#define KEY_CTRL(c) ((c) & 0x1f)
#define KEY_ESC 27
#define KEY_BACKSPACE 127

void le_init(le_t* e, int in, int out, le_complete_fn complete) {
    memset(e, 0, sizeof *e);
    e->in = in;
    e->out = out;
    e->complete = complete;
}

void le_free(le_t* e) {
    for (int i = 0; i < e->nhistory; i++)
        free(e->history[i]);
    e->nhistory = 0;
}

static void put(le_t* e, const char* s, size_t n) {
    while (n > 0) {
        ssize_t w = write(e->out, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void puts_(le_t* e, const char* s) {
    put(e, s, strlen(s));
}

// The line again: prompt, text, the rest of the screen line cleared, the cursor at pos.
static void redraw(le_t* e, const char* prompt, const char* buf, size_t len, size_t pos) {
    char seq[32];
    puts_(e, "\r");
    puts_(e, prompt);
    put(e, buf, len);
    puts_(e, "\x1b[K");
    if (len > pos) {
        snprintf(seq, sizeof seq, "\x1b[%zuD", len - pos);
        puts_(e, seq);
    }
}

static int read_byte(le_t* e, unsigned char* c) {
    for (;;) {
        ssize_t n = read(e->in, c, 1);
        if (n == 1)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return -1;
    }
}

static void remember(le_t* e, const char* line) {
    if (!line[0] || (e->nhistory && !strcmp(e->history[e->nhistory - 1], line)))
        return;
    char* copy = strdup(line);
    if (!copy)
        return;
    if (e->nhistory == LE_HISTORY) {
        free(e->history[0]);
        memmove(e->history, e->history + 1, (LE_HISTORY - 1) * sizeof *e->history);
        e->nhistory--;
    }
    e->history[e->nhistory++] = copy;
}

// Tab: the word before the cursor completed as far as every candidate agrees; with several
// candidates and nothing to add, they are listed under the line.
static void complete(le_t* e, const char* prompt, char* buf, size_t cap, size_t* len, size_t* pos) {
    if (!e->complete)
        return;
    size_t word = *pos;
    while (word > 0 && buf[word - 1] != ' ')
        word--;
    const char* cand[LE_MAX_CANDIDATES];
    int n = e->complete(buf, word, *pos, cand, LE_MAX_CANDIDATES);
    if (n <= 0)
        return;
    size_t typed = *pos - word, common = strlen(cand[0]);
    for (int i = 1; i < n; i++) {
        size_t k = 0;
        while (k < common && cand[i][k] == cand[0][k])
            k++;
        common = k;
    }
    const char* add = cand[0] + typed;
    size_t nadd = common > typed ? common - typed : 0;
    int is_whole = n == 1;
    if (nadd + (is_whole ? 1 : 0) + *len >= cap)
        return;
    if (nadd || is_whole) {
        memmove(buf + *pos + nadd + is_whole, buf + *pos, *len - *pos);
        memcpy(buf + *pos, add, nadd);
        if (is_whole)
            buf[*pos + nadd] = ' ';
        *len += nadd + (size_t)is_whole;
        *pos += nadd + (size_t)is_whole;
    } else {
        puts_(e, "\r\n");
        for (int i = 0; i < n; i++) {
            puts_(e, cand[i]);
            puts_(e, i + 1 < n ? "  " : "\r\n");
        }
    }
    redraw(e, prompt, buf, *len, *pos);
}

int le_read(le_t* e, const char* prompt, char* buf, size_t cap) {
    struct termios old, raw;
    if (cap < 2 || tcgetattr(e->in, &old) != 0)
        return -1;
    raw = old;
    raw.c_lflag &= ~(tcflag_t)(ECHO | ICANON | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL | INLCR);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(e->in, TCSADRAIN, &raw) != 0)
        return -1;
    size_t len = 0, pos = 0;
    int hist = e->nhistory; // e->nhistory: the line being typed
    char typed[4096] = "";  // the line being typed, while the history is browsed
    buf[0] = 0;
    puts_(e, prompt);
    int rc = -1;
    for (;;) {
        unsigned char c;
        if (read_byte(e, &c) != 0)
            break;
        if (c == '\r' || c == '\n') {
            buf[len] = 0;
            puts_(e, "\r\n");
            remember(e, buf);
            rc = (int)len;
            break;
        }
        if (c == KEY_CTRL('d')) {
            if (len == 0) {
                puts_(e, "\r\n");
                break;
            }
            if (pos < len) {
                memmove(buf + pos, buf + pos + 1, len - pos - 1);
                len--;
            }
        } else if (c == KEY_CTRL('c')) {
            puts_(e, "^C\r\n");
            len = pos = 0;
            hist = e->nhistory;
            puts_(e, prompt);
            continue;
        } else if (c == KEY_BACKSPACE || c == KEY_CTRL('h')) {
            if (pos > 0) {
                memmove(buf + pos - 1, buf + pos, len - pos);
                pos--;
                len--;
            }
        } else if (c == KEY_CTRL('a')) {
            pos = 0;
        } else if (c == KEY_CTRL('e')) {
            pos = len;
        } else if (c == KEY_CTRL('u')) {
            memmove(buf, buf + pos, len - pos);
            len -= pos;
            pos = 0;
        } else if (c == KEY_CTRL('k')) {
            len = pos;
        } else if (c == KEY_CTRL('w')) {
            size_t from = pos;
            while (from > 0 && buf[from - 1] == ' ')
                from--;
            while (from > 0 && buf[from - 1] != ' ')
                from--;
            memmove(buf + from, buf + pos, len - pos);
            len -= pos - from;
            pos = from;
        } else if (c == '\t') {
            complete(e, prompt, buf, cap, &len, &pos);
            continue;
        } else if (c == KEY_ESC) {
            unsigned char s0, s1, s2;
            if (read_byte(e, &s0) != 0 || read_byte(e, &s1) != 0)
                break;
            if (s0 != '[' && s0 != 'O')
                continue;
            if (s1 >= '0' && s1 <= '9') { // ESC [ n ~
                if (read_byte(e, &s2) != 0)
                    break;
                if (s1 == '3' && pos < len) { // Delete
                    memmove(buf + pos, buf + pos + 1, len - pos - 1);
                    len--;
                } else if (s1 == '1' || s1 == '7') {
                    pos = 0;
                } else if (s1 == '4' || s1 == '8') {
                    pos = len;
                }
            } else if (s1 == 'C' && pos < len) {
                pos++;
            } else if (s1 == 'D' && pos > 0) {
                pos--;
            } else if (s1 == 'H') {
                pos = 0;
            } else if (s1 == 'F') {
                pos = len;
            } else if (s1 == 'A' || s1 == 'B') { // history
                if (hist == e->nhistory) {
                    size_t n = len < sizeof typed - 1 ? len : sizeof typed - 1;
                    memcpy(typed, buf, n);
                    typed[n] = 0;
                }
                int to = s1 == 'A' ? hist - 1 : hist + 1;
                if (to < 0 || to > e->nhistory)
                    continue;
                hist = to;
                const char* line = hist == e->nhistory ? typed : e->history[hist];
                len = strlen(line) < cap - 1 ? strlen(line) : cap - 1;
                memcpy(buf, line, len);
                pos = len;
            }
        } else if (c >= ' ' && len + 1 < cap) {
            memmove(buf + pos + 1, buf + pos, len - pos);
            buf[pos++] = (char)c;
            len++;
        }
        redraw(e, prompt, buf, len, pos);
    }
    tcsetattr(e->in, TCSADRAIN, &old);
    return rc;
}
